"""Check that succeeded archive results left sound files, before their snapshot is sealed.

Finalizing's first step (DESIGN.md §2, Snapshot: "check integrity (outputs exist, are non-empty,
WARCs parse)"). A problem is one short line naming the file, such as
``missing: screenshot/screenshot.png`` or
``wget/warc/archive.warc.gz: WARC record 3 (response http://…) payload digest mismatch``; the
caller sends a result with problems back to backoff. Nothing here raises on a corrupt file: what a
parser says about it becomes a problem.

What is checked, per file listed in ``output_files`` (relative to the snapshot folder):

- It is a regular file inside the snapshot folder: no absolute path, no ``..``, no symbolic link
  (nor a linked folder leading out of the snapshot folder), no folder or device.
- The main output (``output``, relative to the extractor's folder) is a file that is not empty,
  unless the extractor's output is no file (``OUTPUT_KINDS``): the title extractor's is the title
  itself, and git's is the mirror's folder, which must be a folder.
- Files whose layout Vellum controls are checked by type (``CHECKS``) and must not be empty. Every
  other file may be empty (a log, a file in a git mirror, a requisite wget saved) and is checked
  for existence only: pages wget or yt-dlp saved, and favicons, are the site's own bytes, and a
  site that serves a broken image is no fault of the archive.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import stat
import struct
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Protocol

from PIL import Image, UnidentifiedImageError
from pypdf import PdfReader
from pypdf.errors import PyPdfError
from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import DecompressingBufferedReader
from warcio.exceptions import ArchiveLoadFailed
from warcio.limitreader import LimitReader
from warcio.recordloader import ArcWarcRecord
from warcio.utils import BUFF_SIZE

from core.extractors.dom import DOM_PATH
from core.extractors.headers import HEADERS_JSON
from core.extractors.htmltotext import OUTPUT_TXT
from core.extractors.outlinks import OUTLINKS_JSON
from core.extractors.pdf import OUTPUT_PDF
from core.extractors.readability import ARTICLE_JSON, CONTENT_HTML, CONTENT_TXT
from core.extractors.screenshot import SCREENSHOT_PNG
from core.extractors.singlefile import OUTPUT_HTML as SINGLEFILE_HTML
from core.extractors.wget import WARC_PATH

# Extractors whose ``output`` is not a file in their folder; any other's is.
VALUE, DIRECTORY = "value", "directory"
OUTPUT_KINDS = {"title": VALUE, "git": DIRECTORY}

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

# pypdf turns a malformed structure into its own errors, but also lets Python's own escape from
# deep inside its parser (fuzzing Chromium's PDFs gave TypeError, AttributeError and
# NotImplementedError for an unknown filter); all of them mean "this file cannot be read".
PDF_ERRORS = (
    PyPdfError,
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

Check = Callable[[Path], list[str]]


class RecordedOutputs(Protocol):
    """What is read of an ArchiveResult: its extractor's name and the files it recorded."""

    extractor: str
    output: str
    output_files: list[str]


def check_snapshot(folder: Path, results: Iterable[RecordedOutputs]) -> dict[str, list[str]]:
    """Check the outputs of succeeded ``results`` in the snapshot folder ``folder``.

    Return ``{extractor: problems}`` for the results with problems only (``{}`` when all are
    sound); see ``check_outputs``. The caller passes succeeded results only.
    """
    found: dict[str, list[str]] = {}
    for result in results:
        problems = check_outputs(
            folder,
            extractor=result.extractor,
            output=result.output or "",
            output_files=list(result.output_files or ()),
        )
        if problems:
            found[result.extractor] = problems
    return found


def check_outputs(
    folder: Path, *, extractor: str, output: str, output_files: list[str]
) -> list[str]:
    """Return the problems of one succeeded result's files (``[]`` when they are sound).

    ``folder`` is the snapshot folder; ``output_files`` are relative to it, ``output`` to
    ``folder/extractor``. Each file is read at most once, in chunks (a WARC is never held in
    memory). The rules are in this module's docstring.
    """
    problems: list[str] = []
    main = None
    kind = OUTPUT_KINDS.get(extractor)
    if kind != VALUE and not output:
        problems.append(f"{extractor}: no main output recorded")
    elif kind == DIRECTORY:
        problems += _check_directory(folder, _join(extractor, output))
    elif kind is None:
        main = _join(extractor, output)
    names = dict.fromkeys([*map(_normal, output_files), *([main] if main else [])])
    for name in names:
        problems += _check_file(folder, name, is_main=name == main)
    return problems


def _join(extractor: str, output: str) -> str:
    """Return the main output's path relative to the snapshot folder."""
    return _normal(f"{extractor}/{output}")


def _normal(name: str) -> str:
    """Return ``name`` with repeated and trailing slashes and ``.`` parts removed (``..`` kept)."""
    return PurePosixPath(name).as_posix() if name else name


def _check_file(folder: Path, name: str, *, is_main: bool) -> list[str]:
    """Return the problems of the listed file ``name``: where it is, its size, its type."""
    info, problem = _locate(folder, name)
    if problem:
        return [problem]
    check = _check_for(name)
    if info.st_size == 0 and (is_main or check is not None):
        return [f"empty: {name}"]
    if check is None:
        return []
    try:
        details = check(folder / name)
    except OSError as error:  # the disk, not the format: an I/O error or a vanished file
        details = [f"cannot be read ({error.strerror or error})"]
    return [f"{name}: {detail}" for detail in details]


def _check_directory(folder: Path, name: str) -> list[str]:
    """Return the problems of a main output that is a folder (git's mirror): it must be one."""
    info, problem = _locate(folder, name, regular=False)
    if problem:
        return [problem]
    return [] if stat.S_ISDIR(info.st_mode) else [f"{name}: not a folder"]


def _locate(
    folder: Path, name: str, *, regular: bool = True
) -> tuple[os.stat_result, None] | tuple[None, str]:
    """Return (``name``'s status, None) if it is inside ``folder`` and no symbolic link, else
    (None, the problem). With ``regular``, it must also be a regular file.

    lstat, not stat: a link is reported, never followed, and a FIFO is never opened (which
    would block).
    """
    relative = PurePosixPath(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        return None, f"{name or '(empty name)'}: outside the snapshot folder"
    path = folder / relative
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None, f"missing: {name}"
    except OSError as error:
        return None, f"{name}: cannot be read ({error.strerror or error})"
    if stat.S_ISLNK(info.st_mode):
        return None, f"{name}: a symbolic link, not a regular file"
    if regular and not stat.S_ISREG(info.st_mode):
        return None, f"{name}: not a regular file"
    # A linked folder on the way (wget/ -> /elsewhere) would lead out of the snapshot folder.
    if not path.resolve().is_relative_to(folder.resolve()):
        return None, f"{name}: outside the snapshot folder"
    return info, None


def _check_for(name: str) -> Check | None:
    """Return the type check of ``name`` (relative to the snapshot folder), or None."""
    return next((check for pattern, check in CHECKS if fnmatchcase(name, pattern)), None)


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
    """
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
        try:
            with _pypdf_warnings_off():
                pages = len(PdfReader(stream, strict=False).pages)
        except PDF_ERRORS as error:
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


# One line per type: a pattern of paths relative to the snapshot folder (fnmatch, "*" spans
# folders) and its check. Only files whose bytes Vellum or its tools produce in a known format.
CHECKS: tuple[tuple[str, Check], ...] = (
    (f"wget/{PurePosixPath(WARC_PATH).parent}/*.warc.gz", check_warc),
    (f"wget/{PurePosixPath(WARC_PATH).parent}/*.warc", check_warc),
    (f"screenshot/{SCREENSHOT_PNG}", check_png),
    (f"pdf/{OUTPUT_PDF}", check_pdf),
    (f"headers/{HEADERS_JSON}", check_json),
    (f"outlinks/{OUTLINKS_JSON}", check_json),
    (f"readability/{ARTICLE_JSON}", check_json),
    (DOM_PATH, check_utf8),
    (f"singlefile/{SINGLEFILE_HTML}", check_utf8),
    (f"readability/{CONTENT_HTML}", check_utf8),
    (f"readability/{CONTENT_TXT}", check_utf8),
    (f"htmltotext/{OUTPUT_TXT}", check_utf8),
    ("title/title.txt", check_utf8),
)


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
