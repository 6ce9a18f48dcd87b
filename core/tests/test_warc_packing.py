"""wget's WARC written uncompressed and packed by finalizing (issue 19; core/extractors/wget.py,
core/services/dedup.py, core/folder/revisits.py): the sealed snapshot holds a gzipped WARC of
one member per record with the same records, its result and crawl name and count it as stored,
and an attempt that crashed part-way is finished by the next one."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from core.choices import SnapshotStatus
from core.folder.formats import check_warc, check_warc_with_warcio
from core.folder.strict_warc import read_strict_warc
from core.models import Snapshot
from core.services.crawls import crawl_create
from core.services.dedup import snapshot_deduplicate
from core.tests.dedup_site import DedupSite
from core.tests.pipeline import archive_crawl
from crawls.models import Crawl, crawl_add_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

PLAIN, PACKED = "wget/warc/archive.warc", "wget/warc/archive.warc.gz"


def capture(dedup_site: DedupSite) -> Snapshot:
    crawl = crawl_create(data=f"{dedup_site.url('/index.html')}\n".encode(), source_name="u.txt")
    archive_crawl(crawl)
    snapshot = Snapshot.objects.get(crawl=crawl)
    assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
    return snapshot


def members(path: Path) -> list[bytes]:
    """The decompressed gzip members of ``path``, one by one."""
    data, found = path.read_bytes(), []
    while data:
        decompressor = zlib.decompressobj(31)
        found.append(decompressor.decompress(data))
        assert decompressor.eof
        data = decompressor.unused_data
    return found


def record_ids(path: Path) -> list[str]:
    with open(path, "rb") as stream:
        return [r.rec_headers.get_header("WARC-Record-ID") for r in ArchiveIterator(stream)]


def test_a_sealed_capture_holds_wgets_warc_packed_one_member_per_record(dedup_site) -> None:
    snapshot = capture(dedup_site)
    folder = snapshot.output_dir
    wget = snapshot.results.get(extractor="wget")

    assert not (folder / PLAIN).exists()
    parts = members(folder / PACKED)
    assert all(part.startswith(b"WARC/1.0\r\n") for part in parts)  # each member one record
    assert len(parts) == len(record_ids(folder / PACKED))
    assert check_warc_with_warcio(folder / PACKED) == []
    assert PACKED in wget.output_files and PLAIN not in wget.output_files
    # The result and its crawl count the WARC as stored, not as wget wrote it.
    stored = sum((folder / name).stat().st_size for name in wget.output_files)
    assert wget.output_size == stored
    assert Crawl.objects.get(pk=snapshot.crawl_id).bytes_written == sum(
        result.output_size for result in snapshot.results.all()
    )


def test_packing_keeps_every_record_byte_for_byte(dedup_site, tmp_path: Path) -> None:
    snapshot = capture(dedup_site)
    packed = snapshot.output_dir / PACKED
    plain = tmp_path / "archive.warc"
    plain.write_bytes(b"".join(members(packed)))  # the WARC as wget wrote it

    assert read_strict_warc(plain) is not None  # the quick reader takes it uncompressed too
    assert [r.header("WARC-Record-ID") for r in read_strict_warc(plain)] == record_ids(packed)
    assert check_warc(plain) == [] and check_warc_with_warcio(plain) == []


def test_an_attempt_that_crashed_after_packing_is_finished(dedup_site) -> None:
    snapshot = capture(dedup_site)
    folder = snapshot.output_dir
    wget = snapshot.results.get(extractor="wget")
    packed_size = (folder / PACKED).stat().st_size
    crawl_bytes = Crawl.objects.get(pk=snapshot.crawl_id).bytes_written
    # As a crash leaves it: packed, the uncompressed WARC not yet deleted, the result naming it.
    (folder / PLAIN).write_bytes(b"".join(members(folder / PACKED)))
    plain_size = (folder / PLAIN).stat().st_size
    wget.output_files = [PLAIN if name == PACKED else name for name in wget.output_files]
    wget.output_size += plain_size - packed_size
    type(wget).objects.filter(pk=wget.pk).update(
        output_files=wget.output_files, output_size=wget.output_size
    )
    crawl_add_bytes(snapshot.crawl_id, plain_size - packed_size)

    snapshot_deduplicate(snapshot=snapshot, results=[wget])
    snapshot_deduplicate(snapshot=snapshot, results=[wget])  # and again: nothing more changes

    wget.refresh_from_db()
    assert not (folder / PLAIN).exists()
    assert (folder / PACKED).stat().st_size == packed_size
    assert PACKED in wget.output_files and PLAIN not in wget.output_files
    assert Crawl.objects.get(pk=snapshot.crawl_id).bytes_written == crawl_bytes


def test_a_plain_warc_cut_short_is_not_taken_for_sound(tmp_path: Path, dedup_site) -> None:
    snapshot = capture(dedup_site)
    whole = b"".join(members(snapshot.output_dir / PACKED))
    cut = tmp_path / "archive.warc"
    cut.write_bytes(whole[: len(whole) - 100])

    assert read_strict_warc(cut) is None  # left to warcio, which says what is wrong
    assert check_warc(cut) != []
