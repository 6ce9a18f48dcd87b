"""Rewrite what the tools wrote so that no credential given to them remains (DESIGN.md §8).

Commands are redacted as they are recorded (redaction.py); the tools themselves may echo the
credentials they were given: wget's ``-d`` debug lines, curl's ``-v`` trace, yt-dlp's
``--verbose`` argument list, the request records and ``wget-arguments`` of wget's WARC.
``scrub_folder`` rewrites those files after each run, before finalizing computes the manifest,
with the values ``redaction.redact`` found in the extractor's arguments.

What is replaced in logs and WARC records: URL userinfo; the value of the Authorization,
Proxy-Authorization and Cookie fields (RFC 9110 §11.6.2, §11.7.2; RFC 6265 §5.4) and of every
header named on the command line; every credential value found on the command line. Each is
shown as ``REDACTED`` (``REDACTED_ASCII`` in an HTTP header of a WARC record).
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.warcwriter import WARCWriter

from core.extractors.redaction import REDACTED, URL_USERINFO, Redaction, redact

# The same in an HTTP header of a WARC record, which warcio (and RFC 9110 §5.5) keeps ASCII.
REDACTED_ASCII = "...redacted..."
# Fields that always hold credentials when a tool echoes a request (RFC 9110 §11.6.2, §11.7.2;
# RFC 6265 §5.4). Set-Cookie is the archived server's, not ours, and stays.
SECRET_HEADERS = ("Authorization", "Proxy-Authorization", "Cookie")
# Literal secrets shorter than this are not searched for in logs (they would match ordinary
# text); the patterns above still hide them where they appear as an option or a field.
MIN_LITERAL = 4
# What scrub_folder rewrites: the tools' logs and their text files, and WARCs.
TEXT_SUFFIXES = (".log", ".txt")
WARC_SUFFIXES = (".warc", ".warc.gz")

logger = logging.getLogger(__name__)


def redact_text(text: str, *, secrets: Iterable[str] = (), headers: Iterable[str] = ()) -> str:
    """Return ``text`` (a log, or a WARC record's text) with credentials replaced.

    Replaced: URL userinfo; the values of the SECRET_HEADERS fields and of ``headers`` wherever
    "Name: value" appears (up to the end of the line or a double quote, as in the quoted
    ``wget-arguments``); each of ``secrets`` (values ``redact`` found) of at least
    MIN_LITERAL characters wherever it appears, longest first.
    """
    names = sorted({*SECRET_HEADERS, *(name for name in headers if name)}, key=len, reverse=True)
    field_value = re.compile(
        rf"(?<![\w-])(?P<name>{'|'.join(map(re.escape, names))})(?P<sep>[ \t]*:[ \t]*)"
        rf"(?P<value>[^\"\r\n]+)",
        re.IGNORECASE,
    )
    text = field_value.sub(
        lambda m: (
            m.group(0) if m["value"].strip() == REDACTED else f"{m['name']}{m['sep']}{REDACTED}"
        ),
        text,
    )
    text = URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    for secret in sorted((s for s in secrets if len(s) >= MIN_LITERAL), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def scrub_folder(
    folder: Path,
    arguments: Sequence[str],
    *,
    tool: str | None = None,
    secrets: Iterable[str] = (),
    headers: Iterable[str] = (),
    persona_in_warcs: bool = False,
) -> list[Path]:
    """Rewrite what a tool wrote under ``folder`` so no credential of ``arguments`` remains.

    ``arguments`` are the extra arguments the extractor was given (EXTRACTOR_OPTIONS), the only
    place Vellum's tools get credentials from; ``tool`` names the program for its short options.
    Logs and text files (TEXT_SUFFIXES) are redacted with ``redact_text``; WARCs (WARC_SUFFIXES)
    have their request, warcinfo, metadata and resource records redacted (responses are what
    the server sent and stay). ``secrets`` and ``headers`` add the values and header names a
    persona gave the tool (core/extractors/credentials.py); with ``persona_in_warcs`` (the
    persona's choice) they stay in the WARCs' request records, so that a replay can show what
    was sent, and only those of ``arguments`` are taken out there. Files are rewritten in place only
    when something changed; returns those. A file that cannot be read or rewritten is logged
    and left.

    WARCs are read only when ``arguments`` hid something: without them Vellum sent no
    credential, and a Cookie in a request record is one the archived site set (parsing every
    WARC of every run would cost some 10 ms a page for nothing).
    """
    found = redact(arguments, tool=tool)
    from_arguments = Redaction(secrets=set(found.secrets), headers=set(found.headers))
    # A persona's cookie and header values, and its header names (crawls.Persona).
    found.secrets.update(secrets)
    found.headers.update(headers)
    in_warcs = from_arguments if persona_in_warcs else found
    ours = bool(in_warcs.secrets or in_warcs.headers)
    changed = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            if path.name.endswith(WARC_SUFFIXES):
                if not ours:
                    continue
                rewritten = scrub_warc(path, in_warcs)
            elif path.name.endswith(TEXT_SUFFIXES):
                rewritten = _scrub_text_file(path, found)
            else:
                continue
        except (OSError, ArchiveLoadFailed) as error:
            logger.warning("cannot redact %s: %s", path, error)
            continue
        if rewritten:
            changed.append(path)
    return changed


def _scrub_text_file(path: Path, found: Redaction) -> bool:
    """Redact a text file in place (its bytes read as Latin-1, so none is lost); say if it
    changed."""
    text = path.read_bytes().decode("latin-1")
    scrubbed = _redact_bytes_text(text, found)
    if scrubbed == text:
        return False
    _replace(path, _encode(scrubbed))
    return True


def _redact_bytes_text(text: str, found: Redaction) -> str:
    """``redact_text`` over Latin-1 text: secrets and the marker are matched as UTF-8 bytes."""
    secrets = {_latin(secret) for secret in found.secrets}
    redacted = redact_text(text, secrets=secrets, headers=map(_latin, found.headers))
    return redacted.replace(REDACTED, _latin(REDACTED))


def _latin(text: str) -> str:
    """Return ``text``'s UTF-8 bytes read as Latin-1 (how byte-exact rewrites see text)."""
    return text.encode("utf-8").decode("latin-1")


def _encode(text: str) -> bytes:
    return text.encode("latin-1")


def scrub_warc(path: Path, found: Redaction) -> bool:
    """Redact the records of the WARC at ``path`` that Vellum's tools wrote from their own
    request (request, warcinfo, metadata, resource records); say whether it changed.

    Records that need no change are copied byte for byte; a changed one is written anew by
    warcio with fresh Content-Length and digests. The file is replaced atomically.
    """
    compressed = path.name.endswith(".gz")
    output = io.BytesIO()
    writer = WARCWriter(output, gzip=compressed)
    records: list[tuple[int, object]] = []  # (offset, its replacement or None), in order
    with open(path, "rb") as stream:
        iterator = ArchiveIterator(stream, no_record_parse=False)
        for record in iterator:
            replacement = _redacted_record(writer, record, found)
            iterator.read_to_end(record)
            records.append((iterator.get_record_offset(), replacement))
        if all(replacement is None for _offset, replacement in records):
            return False
        # A record runs to where the next one starts: in an uncompressed WARC, warcio's
        # record length leaves out the CRLF CRLF that ends it (WARC 1.1 §4).
        size = os.fstat(stream.fileno()).st_size
        ends = [offset for offset, _replacement in records[1:]] + [size]
        for (offset, replacement), end in zip(records, ends, strict=True):
            if replacement is None:
                stream.seek(offset)
                output.write(stream.read(end - offset))
            else:
                writer.write_record(replacement)
    _replace(path, output.getvalue())
    return True


def _redacted_record(writer: WARCWriter, record, found: Redaction):
    """Return a redacted copy of ``record``, or None when it holds nothing to redact."""
    if record.rec_type not in ("request", "warcinfo", "metadata", "resource"):
        return None
    body = record.raw_stream.read()
    text = body.decode("latin-1")
    new_text = _redact_bytes_text(text, found)
    http_headers = record.http_headers
    headers_changed = False
    for index, (name, value) in enumerate(http_headers.headers if http_headers else ()):
        new_value = _redact_field(name, value, found)
        if new_value != value:
            http_headers.headers[index] = (name, new_value)
            headers_changed = True
    if new_text == text and not headers_changed:
        return None
    warc_headers = record.rec_headers
    for name in ("WARC-Block-Digest", "WARC-Payload-Digest", "Content-Length"):
        warc_headers.remove_header(name)
    return writer.create_warc_record(
        warc_headers.get_header("WARC-Target-URI") or "",
        record.rec_type,
        payload=io.BytesIO(_encode(new_text)),
        warc_headers=warc_headers,
        http_headers=http_headers,
    )


def _redact_field(name: str, value: str, found: Redaction) -> str:
    """Return an HTTP header's value redacted, with the ASCII marker."""
    line = redact_text(f"{name}: {value}", secrets=found.secrets, headers=found.headers)
    return line.split(":", 1)[1].strip().replace(REDACTED, REDACTED_ASCII)


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` over ``path`` atomically, keeping its mode."""
    temp = path.with_name(f".{path.name}.redacting")
    temp.write_bytes(data)
    os.chmod(temp, path.stat().st_mode & 0o7777)
    os.replace(temp, path)
