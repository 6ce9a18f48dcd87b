"""A quick reader for WARCs of the strict shape Vellum's tools write, with warcio as the reference.

warcio parses each header line in Python, and finalizing reads each WARC of a snapshot three
times: the integrity check (core/folder/formats.py), the dedup scan (core/folder/revisits.py)
and the check of the WARC the scan's revisits were written to. This reader takes the shape that
wget and warcio's WARCWriter (the recorder, the rewriter) write, and nothing else:

- a gzip file of complete members, one WARC record in each (what replay needs too), and no
  byte after the last one; or the same records uncompressed, one after the other (what wget
  writes with ``--no-warc-compression``, core/extractors/wget.py);
- each record: a ``WARC/1.0`` or ``WARC/1.1`` line and header fields ending in an empty line,
  every line ending in CRLF, no continuation lines, a Content-Length of ASCII digits, then that
  many bytes of block and the CRLF CRLF that ends a record (WARC 1.1 §4, §5.3);
- an HTTP head where warcio reads one (a request, response or revisit of an http(s) URI with a
  block): a status or request line warcio's parser takes, CRLF lines, ending in an empty line;
- each WARC-Block-Digest and WARC-Payload-Digest (but a revisit's, which warcio does not check
  either) an ``sha1:`` or ``sha256:`` base32 value that matches, the payload taken after the
  HTTP head as warcio takes it.

Its work is zlib's, hashlib's and ``bytes.find``'s. Anything else, however small (a bare LF,
a header line of spaces, a byte outside ASCII in a head, a base16 digest, a member over
MAX_MEMBER_BYTES, a file over MAX_FILE_BYTES), gives None, and the caller reads the file with
warcio, which says what is wrong with it, if anything. So the reader accepts a part of what
warcio accepts and reports what warcio would: it never decides a verdict on its own.
core/tests/test_strict_warc.py holds it to that, record by record and over many corruptions of
real WARCs.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from warcio.recordloader import ArcWarcRecordLoader

# Larger files are left to warcio, which streams them. This reader holds the file and one
# decompressed member at a time: some MAX_FILE_BYTES + 2 * MAX_MEMBER_BYTES at most.
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_MEMBER_BYTES = 16 * 1024 * 1024  # decompressed, one record
GZIP_CHUNK = 64 * 1024  # compressed bytes given to zlib at a time
GZIP_MAGIC = b"\x1f\x8b"  # RFC 1952 §2.3.1
STARTS = (GZIP_MAGIC, b"WA")  # a gzip file, or an uncompressed WARC's "WARC/1.x" line
MAX_HEAD_BYTES = 64 * 1024  # of an uncompressed record's WARC headers, looked for its end in
# A Content-Length line of an uncompressed record's head, as _fields reads it (any case,
# ASCII digits): where the record ends. _record then checks the head whole.
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*([0-9]+)[ \t]*\r\n", re.IGNORECASE)
GZIP_WBITS = 31  # zlib's gzip framing: header, deflate data, CRC-32 and size checked at the end
CRLF, END_OF_HEAD = b"\r\n", b"\r\n\r\n"
RECORD_END = END_OF_HEAD  # after a record's block too (WARC 1.1 §4)
WARC_VERSIONS = (b"WARC/1.0", b"WARC/1.1")
# warcio's own lists (warcio/recordloader.py), so that this reader stays in step with them:
# the record types and URI schemes it reads an HTTP head of, and the status and request lines
# its parsers take (they match in any case and without the space: this reader asks for both).
HTTP_RECORDS = ArcWarcRecordLoader.HTTP_RECORDS
HTTP_SCHEMES = ArcWarcRecordLoader.HTTP_SCHEMES
STATUS_LINE_STARTS = tuple(f"{version} ".encode() for version in ArcWarcRecordLoader.HTTP_TYPES)
REQUEST_LINE_STARTS = tuple(f"{verb} ".encode() for verb in ArcWarcRecordLoader.HTTP_VERBS)
DIGEST_ALGORITHMS = ("sha1", "sha256")
DIGITS = re.compile(rb"[0-9]+")
# Bytes that Python's str methods take for whitespace and bytes methods do not: warcio decodes
# each head line and strips it as text, so a head holding one could end or read differently.
TEXT_ONLY_WHITESPACE = re.compile(rb"[\x1c-\x1f]")

# The last file read, by path and its bytes (a digest of them, above KEPT_BYTES), and what was
# read of it: finalizing checks a WARC (core/folder/formats.py), then scans it for dedup
# (core/folder/revisits.py).
_last_read: tuple[tuple[str, tuple[str, bytes]], tuple[StrictRecord, ...] | None] | None = None
# Files up to this size are known again by their bytes, compared whole (some 0.04 ms a megabyte,
# where hashing them took 2 ms); a larger one by a BLAKE2b digest, so that an actor does not
# keep a large file in memory between two snapshots.
KEPT_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class StrictRecord:
    """One record: where its gzip member is (``offset`` and ``length`` in bytes, as warcio's
    ``get_record_offset``/``get_record_length`` give them), its WARC-Type, its header fields
    (names in lower case, values as warcio gives them: a WARC-Target-URI without the ``<>``
    wget puts around it), the status code of its HTTP head (a response's, else None), and its
    payload (the block after the HTTP head; None without one) as length and SHA-256 (hex)."""

    offset: int
    length: int
    rec_type: str
    headers: Mapping[str, str]
    http_status: str | None
    payload_length: int | None
    payload_sha256: str | None

    def header(self, name: str) -> str:
        """The value of header field ``name`` (any case), or ``""``."""
        return self.headers.get(name.lower(), "")


class _NotStrict(Exception):
    """The file is not of the strict shape: warcio reads it."""


def read_strict_warc(path: Path) -> tuple[StrictRecord, ...] | None:
    """Return every record of the WARC at ``path`` in order, or None when it is not a sound
    WARC of the strict shape (the module's docstring): empty, not gzip, cut short, corrupt, a
    digest that does not match, or anything warcio would read differently. Raises OSError for
    the disk.

    The same bytes at the same path read again give the records read before: the bytes are
    compared with those of the last file read (up to KEPT_BYTES; a BLAKE2b digest of a larger
    one), far cheaper than reading the records again.
    """
    global _last_read
    with open(path, "rb") as stream:
        magic = stream.read(len(GZIP_MAGIC))
        if magic not in STARTS or os.fstat(stream.fileno()).st_size > MAX_FILE_BYTES:
            return None
        data = magic + stream.read()
    key = (os.fspath(path), _known_by(data))
    last = _last_read  # once: another thread may replace it meanwhile
    if last is not None and last[0] == key:
        return last[1]
    records = _read(memoryview(data), gzipped=magic == GZIP_MAGIC)
    _last_read = (key, records)
    return records


def _known_by(data: bytes) -> tuple[str, bytes]:
    """What a file's ``data`` is known by in ``_last_read``: the bytes themselves, or a BLAKE2b
    digest of them above KEPT_BYTES, each named (a small file's bytes never pass for a
    digest)."""
    if len(data) <= KEPT_BYTES:
        return "bytes", data
    return "blake2b", hashlib.blake2b(data, digest_size=32).digest()


def _read(data: memoryview, *, gzipped: bool = True) -> tuple[StrictRecord, ...] | None:
    """The records of the WARC file ``data``, gzipped or not, or None (see
    ``read_strict_warc``)."""
    take = _member if gzipped else _plain_record
    records = []
    offset = 0
    try:
        while offset < len(data):
            member, length = take(data, offset)
            records.append(_record(member, offset, length))
            offset += length
    except _NotStrict:
        return None
    return tuple(records) or None


def _plain_record(data: memoryview, offset: int) -> tuple[bytes, int]:
    """The uncompressed record at ``offset``: its bytes, up to and with the CRLF CRLF that ends
    it, found from its Content-Length (``_record`` checks the rest)."""
    whole = data.obj if isinstance(data.obj, bytes) else bytes(data)
    head_end = whole.find(END_OF_HEAD, offset, offset + MAX_HEAD_BYTES)
    if head_end < 0:
        raise _NotStrict
    declared = CONTENT_LENGTH.search(whole, offset, head_end + len(CRLF))
    if declared is None:
        raise _NotStrict
    length = head_end - offset + len(END_OF_HEAD) + int(declared[1]) + len(RECORD_END)
    if length > MAX_MEMBER_BYTES or offset + length > len(whole):
        raise _NotStrict
    return whole[offset : offset + length], length


def _member(data: memoryview, offset: int) -> tuple[bytes, int]:
    """Decompress the gzip member at ``offset``; return its bytes and its compressed length."""
    decompressor = zlib.decompressobj(GZIP_WBITS)
    parts, size, position = [], 0, offset
    try:
        while not decompressor.eof:
            chunk = data[position : position + GZIP_CHUNK]
            if not chunk:
                raise _NotStrict  # cut inside the member
            part = decompressor.decompress(chunk, MAX_MEMBER_BYTES + 1 - size)
            size += len(part)
            if decompressor.unconsumed_tail or size > MAX_MEMBER_BYTES:
                raise _NotStrict
            parts.append(part)
            position += len(chunk) - len(decompressor.unused_data)
    except zlib.error:
        raise _NotStrict from None
    return b"".join(parts), position - offset


def _record(member: bytes, offset: int, length: int) -> StrictRecord:
    """Read the one record ``member`` holds, checking its length and digests."""
    head_end = member.find(END_OF_HEAD)
    if head_end < 0:
        raise _NotStrict
    version, *lines = _lines(member[:head_end])
    if version not in WARC_VERSIONS:
        raise _NotStrict
    headers = _fields(lines)
    declared = headers.get("content-length", "")
    if not DIGITS.fullmatch(declared.encode()) or "warc-segment-number" in headers:
        raise _NotStrict
    block_start = head_end + len(END_OF_HEAD)
    block_end = block_start + int(declared)
    if member[block_end:] != RECORD_END:  # a record runs on, is cut short, or two share it
        raise _NotStrict
    rec_type = headers.get("warc-type", "")
    uri = headers.get("warc-target-uri")
    if uri is not None and uri.startswith("<") and uri.endswith(">"):
        uri = headers["warc-target-uri"] = uri[1:-1]  # wget's brackets, as warcio drops them
    if not rec_type or (uri is not None and " " in uri):
        raise _NotStrict  # warcio would percent-encode the spaces
    # warcio reads an HTTP head where one may be (recordloader.py's load_http_headers), and
    # fails on a record of those types without a target URI.
    may_have_http = rec_type in HTTP_RECORDS and block_end > block_start
    if may_have_http and uri is None:
        raise _NotStrict
    has_http = may_have_http and uri.startswith(HTTP_SCHEMES)
    status, payload_start = None, block_start
    if has_http:
        status, payload_start = _http_head(rec_type, member, block_start, block_end)
    view = memoryview(member)
    payload = view[payload_start:block_end]
    if rec_type != "revisit":  # warcio checks no digest of a revisit
        _check_digest(headers.get("warc-block-digest"), view[block_start:block_end])
        _check_digest(headers.get("warc-payload-digest"), payload)
    return StrictRecord(
        offset=offset,
        length=length,
        rec_type=rec_type,
        headers=MappingProxyType(headers),
        http_status=status if rec_type == "response" else None,
        payload_length=len(payload) if has_http else None,
        payload_sha256=hashlib.sha256(payload).hexdigest() if has_http else None,
    )


def _http_head(rec_type: str, member: bytes, start: int, end: int) -> tuple[str | None, int]:
    """Read the HTTP head of the block ``member[start:end]``: return a response's status code
    (None for a request or revisit) and where its payload starts."""
    head_end = member.find(END_OF_HEAD, start, end)
    if head_end < 0:
        raise _NotStrict
    first, *_headers = _lines(member[start:head_end])
    if rec_type == "request":
        if not first.startswith(REQUEST_LINE_STARTS):
            raise _NotStrict
        status = None
    else:
        if not first.startswith(STATUS_LINE_STARTS):
            raise _NotStrict
        _version, _space, rest = first.partition(b" ")
        status = rest.strip().split(b" ", 1)[0].decode("ascii")
    return status, head_end + len(END_OF_HEAD)


def _lines(head: bytes) -> list[bytes]:
    """The lines of a head that ends before its empty line; each must be ASCII, CRLF-ended, not
    blank (warcio ends a head at a line of spaces) and no continuation line."""
    if head.count(b"\n") != head.count(CRLF) or head.count(b"\r") != head.count(CRLF):
        raise _NotStrict
    if not head.isascii() or TEXT_ONLY_WHITESPACE.search(head):
        raise _NotStrict
    lines = head.split(CRLF)
    if any(not line.rstrip() or line[:1] in (b" ", b"\t") for line in lines):
        raise _NotStrict
    return lines


def _fields(lines: list[bytes]) -> dict[str, str]:
    """Header fields by lower-case name, as warcio parses them; one that repeats is refused
    (warcio takes the first, and a reader of ours must not differ)."""
    fields: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon:
            raise _NotStrict
        key = name.rstrip(b" \t").decode("ascii").lower()  # ASCII: _lines made sure
        text = value.strip().decode("ascii")
        if key in fields:
            raise _NotStrict
        fields[key] = text
    return fields


def _check_digest(value: str | None, data: memoryview) -> None:
    """Refuse a digest this reader cannot compute exactly as warcio does, or that differs."""
    if value is None:
        return
    algorithm, colon, expected = value.partition(":")
    if not colon or algorithm not in DIGEST_ALGORITHMS:
        raise _NotStrict
    actual = base64.b32encode(hashlib.new(algorithm, data).digest()).decode("ascii")
    if actual != expected:
        raise _NotStrict
