"""Keep credentials given to the tools out of everything Vellum records (DESIGN.md §8).

EXTRACTOR_OPTIONS ``arguments`` may carry secrets: ``--header=Authorization: Bearer …``,
``--http-password=…``, ``curl -u user:pass``, ``https://user:pass@host/``. Whatever Vellum keeps
of a command (the ArchiveResult's ``cmd``, ``index.json``, the admin, the ``$ …`` line of a log)
goes through ``redact_command``; what the tools themselves write (wget's ``-d`` debug lines,
curl's ``-v`` trace, the request records and ``wget-arguments`` of wget's WARC) is rewritten by
``scrub_folder`` after the run, before finalizing computes the manifest.

What counts as a secret:

- the value of every header given on the command line (``--header``, curl's ``-H`` and
  ``--proxy-header``, yt-dlp's ``--add-header``, git's ``-c http.extraHeader=``): the name stays;
- the value of an option that carries a credential (``--password``, ``--http-password``,
  ``--ftp-password``, ``--proxy-password``, ``--cookie``, ``--oauth2-bearer``, ``--netrc-file``,
  any ``--…password…=``/``--…token…=``/``--…secret…=``), and the password of ``--user``/
  ``--proxy-user``/curl's ``-u``;
- the userinfo (``user:pass@``, or a token as user name) of any URL, in arguments and logs;
- in logs, the value of the Authorization, Proxy-Authorization and Cookie fields (RFC 9110
  §11.6.2, §11.7.2; RFC 6265 §5.4) and of every header named on the command line.

Each is shown as ``REDACTED``.
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.warcwriter import WARCWriter

REDACTED = "…redacted…"
# The same in an HTTP header of a WARC record, which warcio (and RFC 9110 §5.5) keeps ASCII.
REDACTED_ASCII = "...redacted..."

# Options whose value is a header, "Name: value" (the name is kept).
HEADER_OPTIONS = frozenset({"--header", "--add-header", "--proxy-header"})
# Options whose whole value is a credential.
SECRET_OPTIONS = frozenset(
    {
        "--password",
        "--http-password",
        "--http-passwd",
        "--ftp-password",
        "--ftp-passwd",
        "--proxy-password",
        "--proxy-passwd",
        "--video-password",
        "--ap-password",
        "--twofactor",
        "--cookie",
        "--oauth2-bearer",
        "--pass",
        "--proxy-pass",
        "--tlspassword",
        "--proxy-tlspassword",
        "--netrc-file",
    }
)
# Options whose value is "user:password" (the user name is kept).
USER_OPTIONS = frozenset({"--user", "--proxy-user"})
# An option written "--name=value" whose name says it holds a credential.
SECRET_NAME = re.compile(r"passw|token|secret|api-?key|bearer", re.IGNORECASE)
# Short options that carry a credential, per tool (a letter means something else in another:
# wget's -H spans hosts, yt-dlp's -u is a bare user name).
SHORT_OPTIONS = {
    "curl": {"-H": "header", "-u": "user", "-U": "user", "-b": "secret", "-E": "secret"},
    "yt-dlp": {"-p": "secret", "-2": "secret"},
    "git": {"-c": "config"},
}
# The userinfo of a URL (RFC 3986 §3.2.1), whether "user:password" or a token as the user.
URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s\"'<>]+@")
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


@dataclass
class Redaction:
    """A command as it may be recorded, with what was taken out of it.

    ``cmd`` is the recorded form; ``secrets`` holds each hidden value (for finding it again in
    logs) and ``headers`` the names of the headers whose values were hidden.
    """

    cmd: list[str] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    headers: set[str] = field(default_factory=set)


def redact_command(cmd: Sequence[str]) -> list[str]:
    """Return ``cmd`` (a list of arguments, the binary first) as it may be recorded.

    Idempotent: a recorded command passes through unchanged. See the module docstring for
    what is hidden.
    """
    return redact(cmd).cmd


def redact(cmd: Sequence[str], *, tool: str | None = None) -> Redaction:
    """Redact ``cmd``; ``tool`` names the program when ``cmd`` holds only arguments (else
    ``cmd[0]``'s file name does). Returns the recorded form and what was hidden."""
    args = [str(arg) for arg in cmd]
    short = SHORT_OPTIONS.get(tool or (os.path.basename(args[0]) if args else ""), {})
    found = Redaction()
    index = 0
    while index < len(args):
        arg = args[index]
        kind = _option_kind(arg, short)
        if kind and "=" not in arg and arg in (*short, *_LONG) and index + 1 < len(args):
            found.cmd += [arg, _redact_value(kind, args[index + 1], found)]
            index += 2
            continue
        found.cmd.append(_redact_argument(arg, kind, short, found))
        index += 1
    return found


_LONG = HEADER_OPTIONS | SECRET_OPTIONS | USER_OPTIONS


def _option_kind(arg: str, short: dict[str, str]) -> str | None:
    """Say what an argument's value holds: "header", "secret", "user", "config" or None."""
    name = arg.split("=", 1)[0]
    if name in HEADER_OPTIONS:
        return "header"
    if name in SECRET_OPTIONS:
        return "secret"
    if name in USER_OPTIONS:
        return "user"
    if name.startswith("--") and "=" in arg and SECRET_NAME.search(name):
        return "secret"
    if arg[:2] in short and arg.startswith("-") and not arg.startswith("--"):
        return short[arg[:2]]
    return None


def _redact_argument(arg: str, kind: str | None, short: dict[str, str], found: Redaction) -> str:
    """Redact one argument that holds its own value (``--name=value``, ``-Hvalue``) or none."""
    if kind and arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return f"{name}={_redact_value(kind, value, found)}"
    if kind and arg[:2] in short and len(arg) > 2:
        return arg[:2] + _redact_value(kind, arg[2:], found)
    return _redact_urls(arg, found)


def _redact_value(kind: str, value: str, found: Redaction) -> str:
    """Redact an option's value by what it holds; note what was hidden in ``found``."""
    if kind == "header":
        return _redact_header(value, found)
    if kind == "user":
        user, colon, password = value.partition(":")
        if not colon or password in ("", REDACTED):
            return _redact_urls(value, found)
        _note(found, password)
        return f"{user}:{REDACTED}"
    if kind == "config":  # git -c key=value: an extra header, or a key that names a secret
        key, equals, setting = value.partition("=")
        if equals and key.lower().endswith("extraheader"):
            return f"{key}={_redact_header(setting, found)}"
        if equals and SECRET_NAME.search(key) and setting != REDACTED:
            _note(found, setting)
            return f"{key}={REDACTED}"
        return _redact_urls(value, found)
    if value != REDACTED:
        _note(found, value)
    return REDACTED


def _redact_header(value: str, found: Redaction) -> str:
    """Redact "Name: value" to "Name: REDACTED"; a value without a colon (curl's ``@file``)
    stays, as does an empty header ("Name;" or "Name:", which removes it)."""
    name, colon, content = value.partition(":")
    content = content.strip()
    if not colon or not content or content == REDACTED:
        return value
    found.headers.add(name.strip())
    _note(found, content)
    return f"{name}: {REDACTED}"


def _redact_urls(text: str, found: Redaction) -> str:
    """Replace the userinfo of every URL in ``text``, noting each one."""

    def replace(match: re.Match) -> str:
        userinfo = match.group(0)[len(match["scheme"]) : -1]
        if userinfo != REDACTED:
            _note(found, userinfo)
        return f"{match['scheme']}{REDACTED}@"

    return URL_USERINFO.sub(replace, text)


def _note(found: Redaction, secret: str) -> None:
    """Remember ``secret``, and its credential alone when it has a scheme ("Bearer x" -> x)."""
    found.secrets.add(secret)
    found.secrets.update(secret.split()[-1:])
    if ":" in secret and "://" not in secret:  # user:password
        found.secrets.add(secret.split(":", 1)[1])


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


def scrub_folder(folder: Path, arguments: Sequence[str], *, tool: str | None = None) -> list[Path]:
    """Rewrite what a tool wrote under ``folder`` so no credential of ``arguments`` remains.

    ``arguments`` are the extra arguments the extractor was given (EXTRACTOR_OPTIONS), the only
    place Vellum's tools get credentials from; ``tool`` names the program for its short options.
    Logs and text files (TEXT_SUFFIXES) are redacted with ``redact_text``; WARCs (WARC_SUFFIXES)
    have their request, warcinfo, metadata and resource records redacted (responses are what
    the server sent and stay). Files are rewritten in place only when something changed;
    returns those. A file that cannot be read or rewritten is logged and left.
    """
    found = redact(arguments, tool=tool)
    changed = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            if path.name.endswith(WARC_SUFFIXES):
                rewritten = scrub_warc(path, found)
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


_MARKERS = frozenset({REDACTED, REDACTED_ASCII, _latin(REDACTED)})


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
    changed = False
    with open(path, "rb") as stream:
        records = ArchiveIterator(stream, no_record_parse=False)
        for record in records:
            replacement = _redacted_record(writer, record, found)
            records.read_to_end(record)
            offset, length = records.get_record_offset(), records.get_record_length()
            if replacement is None:
                position = stream.tell()
                stream.seek(offset)
                output.write(stream.read(length))
                stream.seek(position)
            else:
                writer.write_record(replacement)
                changed = True
    if changed:
        _replace(path, output.getvalue())
    return changed


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
