"""Verify that a file is sound in its format: WARC, PNG, PDF, JSON, UTF-8 text.

The integrity check (core/folder/integrity.py) runs these on the outputs extractors declare
(core/extractors/base.py's ``Output``), looked up by ``Format`` in ``FORMAT_CHECKS``. Each
check takes a path and returns its problems, short lines such as ``truncated PNG (it does not
end with an IEND chunk)`` (``[]`` when the file is sound); it reads the file at most once, in
chunks, and turns whatever a parser says of a corrupt file into a problem. An OSError (the
disk, not the format) is raised.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PIL import Image, UnidentifiedImageError
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import DecompressingBufferedReader
from warcio.exceptions import ArchiveLoadFailed
from warcio.limitreader import LimitReader
from warcio.recordloader import ArcWarcRecord
from warcio.utils import BUFF_SIZE

from core.extractors.base import FileCheck, Format
from core.folder.strict_warc import read_strict_warc

READ_CHUNK = 1024 * 1024  # bytes read at a time from a file that is streamed
MAX_PROBLEMS_PER_FILE = 10  # further problems in one file are counted, not listed
MAX_DETAIL_CHARS = 160  # of a parser's message quoted in a problem
# ISO 32000-1 §7.5.5: a PDF's last line holds %%EOF; readers look for it near the end (Adobe's
# implementation notes allow it anywhere in the last 1024 bytes).
PDF_EOF_MARKER = b"%%EOF"
PDF_TAIL_BYTES = 1024
UTF8_BOM = codecs.BOM_UTF8
# A PNG's last 12 bytes: IEND's length (0), its type and its CRC, which never vary.
PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"

# pypdf turns a malformed structure into its own errors (PyPdfError), but also lets Python's own
# escape from deep inside its parser (fuzzing Chromium's PDFs gave TypeError, AttributeError and
# NotImplementedError for an unknown filter); all of them mean "this file cannot be read".
PDF_ERRORS = (
    OSError,
    ValueError,
    TypeError,
    AttributeError,
    KeyError,
    IndexError,
    NotImplementedError,
    RecursionError,
    zlib.error,
)
# warcio trusts a record's headers: one without WARC-Target-URI fails with AttributeError, a
# digest that is not base32, base64 or base16 with binascii.Error (a ValueError) or TypeError.
# Raised while warcio parses the file's bytes, they mean a malformed record, as its own
# ArchiveLoadFailed does.
WARC_RECORD_ERRORS = (ValueError, TypeError, AttributeError)
# What Pillow raises for a PNG that is truncated or fails its CRCs: OSError ("Truncated File
# Read", UnidentifiedImageError), SyntaxError ("broken PNG file"), EOFError, and the struct and
# value errors of a chunk header that makes no sense.
PNG_ERRORS = (
    OSError,
    SyntaxError,
    EOFError,
    ValueError,
    struct.error,
    Image.DecompressionBombError,
)


# --- WARC ----------------------------------------------------------------------------------------


class CorruptGzip(Exception):
    """A gzip member of a WARC holds data that does not decompress."""


class _StrictReader(DecompressingBufferedReader):
    """warcio's reader, but corrupt gzip data raises CorruptGzip.

    warcio writes a decompression error to stderr and goes on with no data, which reads as a
    record cut short and floods the console. The first block keeps warcio's handling: a file
    that does not start as gzip is read as an uncompressed WARC.
    """

    def _decompress(self, data: bytes) -> bytes:
        if self.decompressor is None or not data or self.num_read == 0:
            return super()._decompress(data)
        try:
            return self.decompressor.decompress(data)
        except zlib.error as error:
            raise CorruptGzip(
                f"corrupt gzip data near byte {self.stream.tell()}: {error}"
            ) from None


class _WarcRecords(ArchiveIterator):
    """warcio's ArchiveIterator with digests checked, strict about gzip data, and telling
    whether the last gzip member was complete (``ended_early``).

    warcio stops silently at the end of a file cut inside a gzip member: the member's
    decompressor then has not seen the member's end (``eof``), which is the only sign.
    """

    def __init__(self, stream) -> None:
        super().__init__(stream, check_digests=True)
        self.reader = _StrictReader(self.fh, block_size=BUFF_SIZE)
        self.ended_early = False
        self.count = 0  # records read so far

    def close(self) -> None:
        reader = self.reader
        if reader is not None and reader.decompressor is not None:
            self.ended_early = not reader.decompressor.eof
        super().close()


def check_warc(path: Path) -> list[str]:
    """Read every record of the WARC at ``path`` (gzip or not) and verify its digests.

    Problems: a file that does not parse as WARC records to its end, a gzip member that is
    corrupt or cut short, a record whose Content-Length is missing or longer than what follows
    (cut short) or shorter (its block runs on past the record separator), a
    WARC-Block-Digest or WARC-Payload-Digest that does not match (as ``warcio check`` verifies
    them; revisit records carry no digest of their own), and a file without records. A file
    cut exactly between two records cannot be told from a complete one.

    A WARC of the strict shape Vellum's tools write is read by core/folder/strict_warc.py,
    which gives no verdict of its own: any other file, a sound one included, is read by warcio.
    """
    if read_strict_warc(path):
        return []
    return check_warc_with_warcio(path)


def check_warc_with_warcio(path: Path) -> list[str]:
    """``check_warc`` by warcio alone: the reference the strict reader is held to."""
    problems = _Problems()
    with open(path, "rb") as stream:
        records = _WarcRecords(stream)
        try:
            _read_records(records, problems)
        except (ArchiveLoadFailed, CorruptGzip) as error:
            problems.add(f"truncated or not a WARC ({_short(error)})")
        except WARC_RECORD_ERRORS as error:
            problems.add(f"WARC record {records.count + 1} is malformed ({_short(error)})")
        else:
            if records.ended_early:
                problems.add("truncated (its last gzip member ends early)")
            if records.count == 0:
                problems.add("not a WARC (no records)")
    return problems.lines


def _read_records(records: _WarcRecords, problems: _Problems) -> None:
    """Read each of ``records`` to its end, adding what is wrong with it to ``problems``."""
    warned, previous = 0, None
    for record in records:
        records.count += 1
        if records.err_count > warned:  # warcio found the previous record running on
            problems.add(f"{_label(records.count - 1, previous)} runs past its Content-Length")
            warned = records.err_count
        if record.format != "warc":
            problems.add(f"not a WARC (record {records.count} is no WARC record)")
            return
        try:
            found = list(_record_problems(record))
        except WARC_RECORD_ERRORS as error:  # a digest header warcio cannot decode
            found = [f"is malformed ({_short(error)})"]
        if found:
            problems.add(f"{_label(records.count, record)} {', '.join(found)}")
        previous = record
    if records.err_count > warned:
        problems.add(f"{_label(records.count, previous)} runs past its Content-Length")


def _record_problems(record: ArcWarcRecord) -> Iterator[str]:
    """Read ``record``'s block to its end; yield what is wrong with its length and digests.

    The raw stream is read, not ``content_stream()`` as ``warcio check`` does: the digests are
    over the raw bytes, and undoing the server's Content-Encoding would cost time and fail on a
    server's own broken gzip, which the archive must keep as it was sent.
    """
    length = record.rec_headers.get_header("Content-Length")
    if length is None or not length.strip().isdigit():
        yield f"has no valid Content-Length ({length!r})"
        return
    raw = record.raw_stream
    while raw.read(READ_CHUNK):
        pass
    missing = raw.limit if isinstance(raw, LimitReader) else 0
    if missing:
        yield f"cut short ({missing} of {length.strip()} bytes missing)"
        return  # a digest is only checked over the whole block
    for problem in record.digest_checker.problems:
        yield _digest_problem(problem)


def _digest_problem(text: str) -> str:
    """Return warcio's digest complaint as a problem ("block digest failed: sha1:…")."""
    for kind in ("block", "payload"):
        if text.startswith(f"{kind} digest failed"):
            return f"{kind} digest mismatch"
    return text


def _label(number: int, record: ArcWarcRecord | None) -> str:
    """Return "WARC record <number> (<type> <target URI>)"."""
    if record is None:
        return f"WARC record {number}"
    uri = record.rec_headers.get_header("WARC-Target-URI") or ""
    kind = record.rec_headers.get_header("WARC-Type") or "untyped"
    return f"WARC record {number} ({_short(f'{kind} {uri}'.strip(), 100)})"


# --- PNG, PDF, JSON, UTF-8 -----------------------------------------------------------------------


def check_png(path: Path) -> list[str]:
    """Open ``path`` as a PNG with Pillow, ``verify()`` it (every chunk's CRC up to IEND), and
    check that it ends with the IEND chunk (PNG §5.6: IEND is last).

    The pixels are not decoded: the CRCs cover the compressed data, so a flipped byte or a cut
    file is caught without holding a 16384-pixel-tall screenshot in memory. Pillow stops at
    IEND's type, so a file cut inside IEND's own CRC is caught by the ending only.
    """
    try:
        with Image.open(path, formats=["PNG"]) as image:
            image.verify()
    except UnidentifiedImageError:
        return ["not a PNG image"]
    except PNG_ERRORS as error:
        return [f"not a readable PNG ({_short(error)})"]
    with open(path, "rb") as stream:
        stream.seek(-len(PNG_END), os.SEEK_END)
        if stream.read() != PNG_END:
            return ["truncated PNG (it does not end with an IEND chunk)"]
    return []


def check_pdf(path: Path) -> list[str]:
    """Check that ``path`` is a PDF that ends in %%EOF and whose pages pypdf can list (≥ 1).

    pypdf reads non-strictly, as PDF readers do, repairing what they repair; a file it cannot
    open or whose page tree it cannot read is corrupt. Content streams are not decoded, so a
    byte flipped inside one goes unnoticed (the checksum manifest guards the file from here on).
    """
    with open(path, "rb") as stream:
        stream.seek(0, os.SEEK_END)
        stream.seek(max(0, stream.tell() - PDF_TAIL_BYTES))
        if PDF_EOF_MARKER not in stream.read():
            return [f"truncated PDF (no %%EOF in its last {PDF_TAIL_BYTES} bytes)"]
        stream.seek(0)
        # Imported here: pypdf holds some 17 MB, which the orchestrator and every actor that
        # never meets a PDF (they import this module) would carry for nothing.
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError

        try:
            with _pypdf_warnings_off():
                pages = len(PdfReader(stream, strict=False).pages)
        except (PyPdfError, *PDF_ERRORS) as error:
            return [f"not a readable PDF ({_short(error)})"]
    return [] if pages else ["a PDF without pages"]


def check_json(path: Path) -> list[str]:
    """Check that ``path`` parses as JSON (UTF-8, as Vellum writes it)."""
    try:
        with open(path, "rb") as stream:
            json.load(stream)
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError both are
        return [f"not valid JSON ({_short(error)})"]
    return []


def check_utf8(path: Path) -> list[str]:
    """Check that ``path`` decodes as UTF-8 and holds more than a byte order mark.

    A leading BOM is allowed (the dom extractor writes one for a page that declared another
    charset, HTML Living Standard §13.2.3.2). Encoded surrogates count as invalid, as in
    Unicode's definition of UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(path, "rb") as stream:
        while chunk := stream.read(READ_CHUNK):
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as error:
                return [f"not valid UTF-8 (byte {offset - pending + error.start}: {error.reason})"]
            if offset == 0 and chunk == UTF8_BOM:  # the whole file: a read returns all it can
                return ["empty (only a byte order mark)"]
            offset += len(chunk)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return ["not valid UTF-8 (ends inside a character)"]
    return []


# The check of each format an extractor's ``Output`` may name.
FORMAT_CHECKS: dict[Format, FileCheck] = {
    Format.WARC: check_warc,
    Format.PNG: check_png,
    Format.PDF: check_pdf,
    Format.JSON: check_json,
    Format.UTF8: check_utf8,
}


# --- helpers -------------------------------------------------------------------------------------


class _Problems:
    """The problems of one file: the first MAX_PROBLEMS_PER_FILE, then how many more."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.more = 0

    def add(self, problem: str) -> None:
        if len(self.listed) < MAX_PROBLEMS_PER_FILE:
            self.listed.append(problem)
        else:
            self.more += 1

    @property
    def lines(self) -> list[str]:
        return self.listed + ([f"and {self.more} more problems"] if self.more else [])


def _short(error: BaseException | str, limit: int = MAX_DETAIL_CHARS) -> str:
    """Return a parser's message as one printable line of at most ``limit`` characters."""
    text = str(error)
    line = next((part.strip() for part in text.splitlines() if part.strip()), type(error).__name__)
    line = "".join(char if char.isprintable() else "?" for char in line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


_pypdf_logger = logging.getLogger("pypdf")
_pypdf_quiet_lock = threading.Lock()
_pypdf_quiet_users = 0
_pypdf_saved_level = logging.NOTSET


@contextmanager
def _pypdf_warnings_off() -> Iterator[None]:
    """Raise the "pypdf" logger to ERROR while a PDF is read.

    In non-strict mode pypdf logs each repair of a malformed file as a warning, which would
    reach the console; the file's verdict is given by what it raises instead. Counted, so that
    checks in several threads restore the level only when the last one ends.
    """
    global _pypdf_quiet_users, _pypdf_saved_level
    with _pypdf_quiet_lock:
        if _pypdf_quiet_users == 0:
            _pypdf_saved_level = _pypdf_logger.level
            _pypdf_logger.setLevel(max(logging.ERROR, _pypdf_saved_level))
        _pypdf_quiet_users += 1
    try:
        yield
    finally:
        with _pypdf_quiet_lock:
            _pypdf_quiet_users -= 1
            if _pypdf_quiet_users == 0:
                _pypdf_logger.setLevel(_pypdf_saved_level)
