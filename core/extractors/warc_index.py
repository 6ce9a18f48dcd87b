"""What a WARC holds, read once per process: each record's type, target URI, offset and, for a
response, its HTTP status.

A snapshot's extractors read wget's WARC one after the other in one actor (its readers come
with it as companions, orchestrator/work.py): wget lists what it failed to fetch
(core/extractors/requisites.py), title and the other page readers take the page, favicon the
page and then its icon. Each used to read the WARC from its start with warcio, parsing every
record's HTTP head on the way; favicon, asking for an icon wget never fetched, read it to its
end. Now the first of them reads it once, with warcio parsing only the WARC headers and the
status line of each response, and the others look up what they need and read that record
alone (``open_record``, from its offset, as a CDX index is used: warcio parses it in full).

An index is kept for the file it was read from, known by device, inode, size and modification
time: wget's WARC, moved from its work folder into place, is the same file; a WARC rewritten since
(scrubbed of a secret, packed by finalizing) is another, and is read again.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord

# Indexes kept per process: the WARC of the snapshot an actor works on, and perhaps the one
# before (an index is some 100 bytes a record).
KEPT = 4


@dataclass(frozen=True)
class IndexedRecord:
    """One WARC record: its ``WARC-Type`` and ``WARC-Target-URI`` ("" without), the offset of
    its first byte in the file (of its gzip member, in a compressed WARC) and, for a response
    whose block starts with an HTTP status line, that status (else None)."""

    type: str
    uri: str
    offset: int
    status: int | None = None


@dataclass(frozen=True)
class WarcIndex:
    """The records of one WARC in file order, and ``error``: why reading stopped before its end
    (what follows a record is no record: garbage, a corrupt gzip member), else None. The
    records before the error are listed; a caller that finds what it wants among them need not
    care. A file cut short inside its last record reads as whole, that record as far as it
    goes (warcio, as before this index, says nothing of it): the integrity check at
    finalizing is what finds it (core/folder/formats.py)."""

    path: Path
    records: tuple[IndexedRecord, ...]
    error: ArchiveLoadFailed | None = None

    @contextmanager
    def open_record(self, record: IndexedRecord) -> Iterator[ArcWarcRecord]:
        """Read ``record`` with warcio (its WARC and HTTP headers parsed, its content stream
        to read within the ``with``), from its offset. Raises OSError or ArchiveLoadFailed."""
        with open(self.path, "rb") as stream:
            stream.seek(record.offset)
            for found in ArchiveIterator(stream):
                yield found
                return
        raise ArchiveLoadFailed(f"{self.path}: no record at offset {record.offset}")


_kept: OrderedDict[tuple[int, int, int, int], WarcIndex] = OrderedDict()  # oldest first


def warc_index(path: Path) -> WarcIndex:
    """Return the index of the WARC at ``path`` (compressed or not), read now or earlier in
    this process from the same file. Raises OSError when it cannot be opened."""
    identity = file_identity(path)
    kept = _kept.get(identity)
    if kept is not None:
        _kept.move_to_end(identity)
        return WarcIndex(Path(path), kept.records, kept.error)
    index = _read_index(Path(path))
    _kept[identity] = index
    while len(_kept) > KEPT:
        _kept.popitem(last=False)
    return index


def file_identity(path: Path) -> tuple[int, int, int, int]:
    """The file at ``path`` as this module knows it: device, inode, size in bytes and
    modification time in nanoseconds (the same after a rename, another after a rewrite).
    Raises OSError."""
    info = os.stat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _read_index(path: Path) -> WarcIndex:
    records: list[IndexedRecord] = []
    with open(path, "rb") as stream:
        iterator = ArchiveIterator(stream, no_record_parse=True)
        try:
            for record in iterator:
                uri = record.rec_headers.get_header("WARC-Target-URI") or ""
                status = _status(record) if record.rec_type == "response" else None
                offset = iterator.get_record_offset()
                records.append(IndexedRecord(record.rec_type or "", uri, offset, status))
        except ArchiveLoadFailed as error:
            return WarcIndex(path, tuple(records), error)
    return WarcIndex(path, tuple(records))


def _status(record: ArcWarcRecord) -> int | None:
    """The status code of the HTTP status line that opens ``record``'s block (RFC 9112 §4:
    ``HTTP/1.1 200 OK``), or None when the block opens with something else. warcio reads the
    rest of the block past it."""
    parts = record.raw_stream.readline(1024).split(None, 2)
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
        return int(parts[1])
    return None
