"""WARC ``revisit`` records: a response whose payload another record holds, written without it.

The identical-payload-digest profile (WARC/1.1 §6.7.2; ISO 28500 §6.7.2 for WARC/1.0) keeps a
response's WARC and HTTP headers and drops its payload; ``WARC-Refers-To`` (the original's
WARC-Record-ID), ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date`` say where the payload
is, as pywb and Browsertrix write them. This module rewrites a WARC's records three ways
(``rewrite_warc``), record by record and byte for byte otherwise:

- ``ToRevisit``: a response becomes a revisit of an original elsewhere;
- ``Repoint``: a revisit refers to another original holding the same payload;
- ``ToResponse``: a revisit becomes its response again, its payload copied from the original.

A response made a revisit and back is the same record: its header lines keep their order and
values (the revisit's own fields are appended, and removed again), its block is its HTTP
headers as received followed by the same payload, so even its WARC-Block-Digest comes back.

The WARCs rewritten are gzipped with one gzip member per record (ISO 28500 Annex D; warcio
writes them so), or uncompressed (wget's, core/extractors/wget.py): ``rewrite_warc`` writes one
of those as gzipped members, its changes made on the way, so that only what stays in it is
ever compressed. ``scan_warc`` returns None for any other, which is then left as it is. Nothing here
touches the database: core/services/dedup.py decides what to rewrite.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser

from archive.privacy import FILE_MODE
from core.folder.formats import check_warc
from core.folder.manifest import TEMP_PREFIX
from core.folder.strict_warc import GZIP_MAGIC, RECORD_END, StrictRecord, read_strict_warc

# WARC/1.1 §6.7.2 names the profile by version (warcio's RecordBuilder uses the same URIs).
PROFILES = {
    "WARC/1.0": "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest",
    "WARC/1.1": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
}
REFERS_FIELDS = ("WARC-Refers-To", "WARC-Refers-To-Target-URI", "WARC-Refers-To-Date")
REVISIT_FIELDS = ("WARC-Profile", *REFERS_FIELDS)
CHUNK = 1024 * 1024
COMPRESS_LEVEL = 6  # zlib's default: what wget writes, and fast for a large payload


class RevisitError(Exception):
    """A WARC that cannot be rewritten as asked (a record not found, a payload that does not
    match its digest); ``str()`` names the file and the record."""


@dataclass(frozen=True)
class Payload:
    """A response record's payload as stored: SHA-256 (hex), length in bytes, the
    WARC-Payload-Digest written with it ("" when none) and whether WARC-Truncated marks it."""

    sha256: str
    length: int
    digest: str
    truncated: bool


@dataclass(frozen=True)
class RecordInfo:
    """One record of a WARC: its type, WARC-Record-ID, WARC-Target-URI (without the angle
    brackets wget writes around it), WARC-Date, its gzip member's ``offset`` and ``length``
    in the file, the payload of a response (else None), and a revisit's WARC-Refers-To."""

    rec_type: str
    record_id: str
    target_uri: str
    warc_date: str
    offset: int
    length: int
    payload: Payload | None
    refers_to: str


@dataclass(frozen=True)
class Original:
    """The record a revisit refers to: its WARC-Record-ID, WARC-Target-URI and WARC-Date."""

    record_id: str
    target_uri: str
    warc_date: str


@dataclass(frozen=True)
class ToRevisit:
    """Make a response a revisit of ``original`` (which holds the same payload)."""

    original: Original


@dataclass(frozen=True)
class Repoint:
    """Make a revisit refer to ``original`` instead (which holds the same payload)."""

    original: Original


@dataclass(frozen=True)
class ToResponse:
    """Make a revisit its response again, with the payload of record ``record_id`` of the
    gzipped WARC ``warc``, whose SHA-256 must be ``sha256``."""

    warc: Path
    record_id: str
    sha256: str


Change = ToRevisit | Repoint | ToResponse


def scan_warc(path: Path) -> list[RecordInfo] | None:
    """Return every record of the WARC at ``path``, in order, with each response's payload
    hashed; None when it cannot be rewritten: several records in one gzip member, or
    unreadable (the integrity check says what is wrong with it).

    A WARC of the strict shape Vellum's tools write is read by core/folder/strict_warc.py (right
    after the integrity check read it, for the price of hashing its bytes); any other by warcio.
    """
    strict = read_strict_warc(path)
    if strict is not None:
        return [_record_info(record) for record in strict]
    return _scan_with_warcio(path)


def _scan_with_warcio(path: Path) -> list[RecordInfo] | None:
    """``scan_warc`` by warcio alone: the reference the strict reader is held to."""
    records: list[RecordInfo] = []
    try:
        with open(path, "rb") as stream:
            iterator = ArchiveIterator(stream)
            for record in iterator:
                headers = record.rec_headers
                payload = _payload(record) if record.rec_type == "response" else None
                offset, length = iterator.get_record_offset(), iterator.get_record_length()
                if records and offset <= records[-1].offset:
                    return None  # records share a gzip member: no record can be cut out
                if records:  # it runs to where this one starts (warcio's length of an
                    # uncompressed record leaves out the CRLF CRLF that ends it)
                    records[-1] = replace(records[-1], length=offset - records[-1].offset)
                records.append(
                    RecordInfo(
                        rec_type=record.rec_type,
                        record_id=headers.get_header("WARC-Record-ID") or "",
                        target_uri=headers.get_header("WARC-Target-URI") or "",
                        warc_date=headers.get_header("WARC-Date") or "",
                        offset=offset,
                        length=length,
                        payload=payload,
                        refers_to=headers.get_header("WARC-Refers-To") or "",
                    )
                )
        if records:
            last = records[-1]
            records[-1] = replace(last, length=path.stat().st_size - last.offset)
    except (ArchiveLoadFailed, OSError, EOFError, ValueError, gzip.BadGzipFile):
        return None
    return records


def _record_info(record: StrictRecord) -> RecordInfo:
    """What ``scan_warc`` gives of a record the strict reader read."""
    payload = None
    if record.rec_type == "response" and record.payload_sha256 is not None:
        payload = Payload(
            sha256=record.payload_sha256,
            length=record.payload_length,
            digest=record.header("WARC-Payload-Digest"),
            truncated=bool(record.header("WARC-Truncated")),
        )
    return RecordInfo(
        rec_type=record.rec_type,
        record_id=record.header("WARC-Record-ID"),
        target_uri=record.header("WARC-Target-URI"),
        warc_date=record.header("WARC-Date"),
        offset=record.offset,
        length=record.length,
        payload=payload,
        refers_to=record.header("WARC-Refers-To"),
    )


def _payload(record) -> Payload | None:
    """Hash the payload of a response record (read to its end); None without HTTP headers."""
    if record.http_headers is None:
        return None
    digest = hashlib.sha256()
    length = 0
    while chunk := record.raw_stream.read(CHUNK):
        digest.update(chunk)
        length += len(chunk)
    headers = record.rec_headers
    return Payload(
        sha256=digest.hexdigest(),
        length=length,
        digest=headers.get_header("WARC-Payload-Digest") or "",
        truncated=bool(headers.get_header("WARC-Truncated")),
    )


def rewrite_warc(
    path: Path,
    changes: dict[str, Change],
    *,
    output: Path | None = None,
    records: list[RecordInfo] | None = None,
) -> int:
    """Write the WARC at ``path`` with the records named in ``changes`` (by WARC-Record-ID)
    changed as each says; return how many were changed. ``records`` is ``scan_warc(path)``
    when the caller has it, of the file as it still is: it is then not read a second time.

    The result is always gzipped, one member per record: an uncompressed ``path`` is packed
    (its unchanged records compressed as they are), which is why ``output`` then names
    another file (``<name>.warc.gz``).

    Every other record is copied byte for byte; a change that no longer applies (a response
    already a revisit, a revisit already whole) is passed over, so a repeated call changes
    nothing. The result goes to ``output`` (default: ``path`` itself), replaced atomically and
    only once it reads back as a sound WARC (core/folder/formats.py); nothing is written when
    nothing changes. Raises RevisitError when ``path`` cannot be rewritten or a payload source
    is missing or differs, OSError for the disk.
    """
    if records is None:
        records = scan_warc(path)
    if records is None:
        raise RevisitError(f"{path.name}: not a WARC of gzipped records, cannot be rewritten")
    target = output or path
    changed = 0
    sources = _Sources()
    fd, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".warc.gz", dir=target.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as stream:
            packing = stream.read(len(GZIP_MAGIC)) != GZIP_MAGIC
            for info in records:
                change = changes.get(info.record_id)
                if change is not None and _applies(change, info):
                    _write_changed(out, stream, info, change, sources)
                    changed += 1
                else:
                    stream.seek(info.offset)
                    _copy(stream, out, info.length, compress=packing)
            out.flush()
            os.fsync(out.fileno())
        if not changed and output is None and not packing:
            temp.unlink()
            return 0
        problems = check_warc(temp)
        if problems:
            raise RevisitError(f"{path.name}: rewritten WARC does not verify: {problems[0]}")
        os.chmod(temp, FILE_MODE)
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return changed


def _applies(change: Change, info: RecordInfo) -> bool:
    if isinstance(change, ToRevisit):
        return info.rec_type == "response" and info.payload is not None
    if isinstance(change, Repoint):
        return info.rec_type == "revisit" and info.refers_to != change.original.record_id
    return info.rec_type == "revisit"


def _write_changed(out, stream, info: RecordInfo, change: Change, sources: _Sources) -> None:
    """Write the record ``info`` of ``stream`` changed by ``change`` as one gzip member."""
    member = _open_member(stream, info.offset)
    headers, _size = _read_warc_headers(member)
    block_length = int(headers.get_header("Content-Length") or 0)
    if isinstance(change, ToRevisit):
        http = member.read(block_length - info.payload.length)
        _set_revisit(headers, change.original)
        _write_record(out, headers, http, None, 0)
    elif isinstance(change, Repoint):
        http = member.read(block_length)
        _set_refers(headers, change.original)
        _write_record(out, headers, http, None, 0)
    else:
        http = member.read(block_length)
        source = sources.payload(change)
        headers.replace_header("WARC-Type", "response")
        for name in REVISIT_FIELDS:
            headers.remove_header(name)
        _write_record(out, headers, http, source, source.length)


def _set_revisit(headers: StatusAndHeaders, original: Original) -> None:
    headers.replace_header("WARC-Type", "revisit")
    headers.replace_header("WARC-Profile", PROFILES.get(headers.protocol, PROFILES["WARC/1.1"]))
    _set_refers(headers, original)


def _set_refers(headers: StatusAndHeaders, original: Original) -> None:
    values = (original.record_id, original.target_uri, original.warc_date)
    for name, value in zip(REFERS_FIELDS, values, strict=True):
        headers.replace_header(name, value)


def _write_record(
    out, headers: StatusAndHeaders, http: bytes, payload: _PayloadSource | None, length: int
) -> None:
    """Write one record as a gzip member: ``headers`` with its Content-Length and
    WARC-Block-Digest made for a block of ``http`` followed by ``length`` bytes of
    ``payload``."""
    algorithm = _digest_algorithm(headers.get_header("WARC-Block-Digest"))
    block = hashlib.new(algorithm, http)
    if payload is not None:
        for chunk in payload.chunks():
            block.update(chunk)
    digest = base64.b32encode(block.digest()).decode()
    headers.replace_header("WARC-Block-Digest", f"{algorithm}:{digest}")
    headers.replace_header("Content-Length", str(len(http) + length))
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=COMPRESS_LEVEL, mtime=0) as member:
        member.write(headers.to_bytes(encoding="utf-8"))
        member.write(http)
        if payload is not None:
            for chunk in payload.chunks():
                member.write(chunk)
        member.write(RECORD_END)


def _digest_algorithm(label: str | None) -> str:
    """The algorithm of a ``<algorithm>:<digest>`` label that hashlib knows, else sha1 (what
    wget and warcio write)."""
    name = (label or "").partition(":")[0].strip().lower().replace("-", "")
    return name if name in hashlib.algorithms_guaranteed else "sha1"


def _open_member(stream, offset: int):
    """The decompressed record starting at ``offset`` (read no further than it needs): its
    gzip member, or in an uncompressed WARC the file itself from there."""
    stream.seek(offset)
    gzipped = stream.read(len(GZIP_MAGIC)) == GZIP_MAGIC
    stream.seek(offset)
    return gzip.GzipFile(fileobj=stream, mode="rb") if gzipped else stream


def _read_warc_headers(member) -> tuple[StatusAndHeaders, int]:
    """Read a record's WARC header lines up to the empty line that ends them; return them
    parsed, and how many bytes they took."""
    lines = []
    while True:
        line = member.readline()
        if not line:
            raise RevisitError("a record ends inside its WARC headers")
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
    raw = b"".join(lines)
    parser = StatusAndHeadersParser(list(PROFILES), verify=False)
    return parser.parse(io.BytesIO(raw)), len(raw)


def _copy(stream, out, length: int, *, compress: bool = False) -> None:
    """Copy ``length`` bytes of ``stream`` (one record) to ``out``, as they are or, with
    ``compress``, as one gzip member of its own."""
    if compress:
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=COMPRESS_LEVEL, mtime=0) as member:
            _copy(stream, member, length)
        return
    while length > 0:
        chunk = stream.read(min(CHUNK, length))
        if not chunk:
            raise RevisitError("the WARC ends inside a record")
        out.write(chunk)
        length -= len(chunk)


@dataclass
class _PayloadSource:
    """The payload of one original record, read from its WARC each time it is asked for."""

    warc: Path
    offset: int
    skip: int  # bytes of WARC headers and HTTP headers before the payload, decompressed
    length: int

    def chunks(self) -> Iterator[bytes]:
        with open(self.warc, "rb") as stream:
            member = _open_member(stream, self.offset)
            _read_exactly(member, self.skip)
            left = self.length
            while left > 0:
                chunk = member.read(min(CHUNK, left))
                if not chunk:
                    raise RevisitError(f"{self.warc.name}: an original record is cut short")
                left -= len(chunk)
                yield chunk


def _read_exactly(member, count: int) -> None:
    while count > 0:
        chunk = member.read(min(CHUNK, count))
        if not chunk:
            raise RevisitError("an original record is cut short")
        count -= len(chunk)


class _Sources:
    """Original records by (WARC, record id), each WARC scanned once."""

    def __init__(self) -> None:
        self._scans: dict[Path, dict[str, RecordInfo]] = {}

    def payload(self, change: ToResponse) -> _PayloadSource:
        warc = change.warc
        if warc not in self._scans:
            records = scan_warc(warc) if warc.is_file() else None
            if records is None:
                raise RevisitError(f"{warc}: the original's WARC is missing or unreadable")
            self._scans[warc] = {info.record_id: info for info in records}
        info = self._scans[warc].get(change.record_id)
        if info is None or info.payload is None:
            raise RevisitError(f"{warc.name}: no response record {change.record_id}")
        if info.payload.sha256 != change.sha256:
            raise RevisitError(f"{warc.name}: record {change.record_id} holds another payload")
        with open(warc, "rb") as stream:
            headers, header_bytes = _read_warc_headers(_open_member(stream, info.offset))
        block = int(headers.get_header("Content-Length") or 0)
        skip = header_bytes + block - info.payload.length
        return _PayloadSource(warc=warc, offset=info.offset, skip=skip, length=info.payload.length)
