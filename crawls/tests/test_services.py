"""Crawl workflows (core/services/crawls.py): creating a crawl from input, and ticking it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot, Tag
from core.services.crawls import CrawlOptions, crawl_create, crawl_seal, crawl_tick
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from crawls.seeds import InputError

pytestmark = pytest.mark.django_db

INPUT = b"\xef\xbb\xbf# reading list\r\nHTTP://A.Example/one#x\r\n\r\nhttp://b.example\r\n"


@pytest.fixture
def data_dir(settings, tmp_path: Path) -> Path:
    """A DATA_DIR of this test's own, so that saved sources can be counted."""
    settings.DATA_DIR = tmp_path
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.ARCHIVE_DIR = tmp_path / "archive"
    return tmp_path


def source_files(data_dir: Path) -> list[Path]:
    folder = data_dir / "sources"
    return sorted(folder.iterdir()) if folder.exists() else []


def reloaded(crawl: Crawl) -> Crawl:
    return Crawl.objects.get(pk=crawl.pk)


# --- crawl_create --------------------------------------------------------------------------------


def test_create_queues_a_crawl_of_normalized_seeds(data_dir: Path) -> None:
    user = baker.make("auth.User")

    crawl = crawl_create(
        data=INPUT,
        source_name="urls.txt",
        options=CrawlOptions(depth=2, any_host=True, priority=4),
        created_by=user,
    )

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.QUEUED
    assert crawl.seed_list() == ["http://a.example/one", "http://b.example/"]
    assert crawl.depth == 2
    assert crawl.any_host is True
    assert crawl.priority == 4
    assert crawl.created_by == user
    assert Crawl.objects.due().filter(pk=crawl.pk).exists()


def test_create_keeps_the_input_byte_for_byte(data_dir: Path) -> None:
    crawl = crawl_create(data=INPUT, source_name="my list.txt")

    [saved] = source_files(data_dir)
    assert saved.read_bytes() == INPUT
    assert crawl.source_file == saved.relative_to(data_dir).as_posix()
    assert crawl.source_file.startswith("sources/")
    assert "my-list" in saved.name
    assert not any(p.name.startswith(".tmp-") for p in (data_dir / "sources").iterdir())


def test_each_crawl_keeps_its_own_source(data_dir: Path) -> None:
    first = crawl_create(data=b"http://a.example/\n", source_name="stdin")
    second = crawl_create(data=b"http://b.example/\n", source_name="stdin")

    assert first.source_file != second.source_file
    assert (data_dir / second.source_file).read_bytes() == b"http://b.example/\n"


def test_create_splits_tags_on_commas_and_keeps_each_once(data_dir: Path) -> None:
    Tag.objects.create(name="news")

    crawl = crawl_create(
        data=b"http://a.example/",
        source_name="command line",
        options=CrawlOptions(tags=["news, tech", "news", " , ", "art,tech"]),
    )

    assert sorted(crawl.tags.values_list("name", flat=True)) == ["art", "news", "tech"]
    assert Tag.objects.filter(name="news").count() == 1


@pytest.mark.parametrize("depth", [-1, 11, 100])
def test_create_refuses_a_depth_out_of_range(data_dir: Path, depth: int) -> None:
    with pytest.raises(InputError, match=f"depth must be between 0 and 10, not {depth}"):
        crawl_create(
            data=b"http://a.example/\n", source_name="urls.txt", options=CrawlOptions(depth=depth)
        )

    assert not Crawl.objects.exists()
    assert source_files(data_dir) == []


@pytest.mark.parametrize("depth", [0, 10])
def test_create_accepts_the_depth_limits(data_dir: Path, depth: int) -> None:
    crawl = crawl_create(
        data=b"http://a.example/\n", source_name="urls.txt", options=CrawlOptions(depth=depth)
    )

    assert crawl.depth == depth


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "urls.txt contains no URLs"),
        (b"# nothing\n", "urls.txt contains no URLs"),
        (b"\x00\x01binary", "urls.txt is binary data"),
        (b"http://a.example/\xff", "urls.txt is not UTF-8 text"),
        (b"javascript:alert(1)\nftp://a.example/\n", "urls.txt line 1:.*; urls.txt line 2:"),
    ],
)
def test_create_refuses_bad_input_and_saves_nothing(
    data_dir: Path, data: bytes, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        crawl_create(data=data, source_name="urls.txt", options=CrawlOptions(tags=["news"]))

    assert not Crawl.objects.exists()
    assert not Tag.objects.exists()
    assert source_files(data_dir) == []


def test_create_queues_the_valid_entries_of_a_partly_broken_file_and_counts_the_rest(
    data_dir: Path,
) -> None:
    data = b"http://a.example/\njavascript:alert(1)\nhttp://b.example/\n"

    crawl = crawl_create(data=data, source_name="urls.txt")

    assert crawl.seed_list() == ["http://a.example/", "http://b.example/"]
    assert crawl.input_report == {
        "format": "text",
        "accepted": 2,
        "rejected": 1,
        "tags_left_out": 0,
        "problems": [
            "urls.txt line 2: 'javascript:alert(1)': only http and https URLs can be archived, "
            "not javascript:"
        ],
    }


def test_create_strict_refuses_the_whole_input_for_one_bad_entry(data_dir: Path) -> None:
    with pytest.raises(InputError, match="command line line 2:"):
        crawl_create(
            data=b"http://a.example/\nftp://b.example/", source_name="command line", strict=True
        )

    assert not Crawl.objects.exists()


def test_titles_and_tags_from_the_input_reach_the_root_snapshots(data_dir: Path) -> None:
    data = b'[{"url": "http://a.example/", "title": "Chosen", "tags": ["docs", "py"]}, "http://b.example/"]'
    crawl = crawl_create(data=data, source_name="links.json", options=CrawlOptions(tags=["batch"]))

    crawl_tick(crawl=crawl)

    a, b = crawl.snapshots.order_by("url")
    assert (a.title, sorted(a.tags.values_list("name", flat=True))) == (
        "Chosen",
        ["batch", "docs", "py"],
    )
    assert (b.title, list(b.tags.values_list("name", flat=True))) == ("", ["batch"])


@pytest.mark.parametrize("tag", ["x" * 101, "tab\tinside", "new\nline"])
def test_create_refuses_an_invalid_tag(data_dir: Path, tag: str) -> None:
    with pytest.raises(InputError, match="invalid tag"):
        crawl_create(
            data=b"http://a.example/", source_name="urls.txt", options=CrawlOptions(tags=[tag])
        )

    assert not Crawl.objects.exists()
    assert source_files(data_dir) == []


# --- crawl_tick: starting ------------------------------------------------------------------------


def queued_crawl(data_dir: Path, **options) -> Crawl:
    data = b"http://a.example/\nhttp://b.example/\nhttp://c.example/\n"
    options = CrawlOptions(tags=["news", "tech"], **options)
    return crawl_create(data=data, source_name="urls.txt", options=options)


def test_tick_starts_a_queued_crawl_with_one_root_snapshot_per_seed(data_dir: Path) -> None:
    crawl = queued_crawl(data_dir, priority=3)
    before = timezone.now()

    crawl_tick(crawl=crawl)

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.STARTED
    assert crawl.retry_at > timezone.now()
    snapshots = crawl.snapshots.order_by("url")
    assert [s.url for s in snapshots] == [
        "http://a.example/",
        "http://b.example/",
        "http://c.example/",
    ]
    for snapshot in snapshots:
        assert snapshot.status == SnapshotStatus.QUEUED
        assert snapshot.depth == 0
        assert snapshot.parent is None
        assert snapshot.priority == 3
        assert before <= snapshot.retry_at <= timezone.now()
        assert sorted(snapshot.tags.values_list("name", flat=True)) == ["news", "tech"]
    assert Snapshot.objects.due().count() == 3


@pytest.mark.parametrize("hold_from", [CrawlStatus.QUEUED, CrawlStatus.STARTED])
def test_hold_release_and_tick_again_makes_no_duplicates(data_dir: Path, hold_from: str) -> None:
    crawl = queued_crawl(data_dir)
    if hold_from == CrawlStatus.STARTED:
        crawl_tick(crawl=crawl)
    crawl.hold()
    crawl.save()

    crawl_tick(crawl=crawl)  # a held crawl is left alone
    assert reloaded(crawl).status == CrawlStatus.HELD
    expected = 3 if hold_from == CrawlStatus.STARTED else 0
    assert crawl.snapshots.count() == expected

    crawl.release()
    crawl.save()
    crawl_tick(crawl=crawl)

    assert reloaded(crawl).status == CrawlStatus.STARTED
    assert crawl.snapshots.count() == 3
    assert Snapshot.tags.through.objects.filter(snapshot__crawl=crawl).count() == 6


# --- crawl_tick: waiting and sealing -------------------------------------------------------------


def started_crawl(**fields) -> Crawl:
    return baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/", **fields)


def test_tick_of_a_started_crawl_with_active_snapshots_only_waits(settings) -> None:
    settings.POLL_INTERVAL = 5
    crawl = started_crawl(retry_at=timezone.now() - timedelta(minutes=1))
    baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.SEALED)
    baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.FINALIZING)

    crawl_tick(crawl=crawl)

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.STARTED
    assert 4 <= (crawl.retry_at - timezone.now()).total_seconds() <= 5
    assert crawl.report == {}
    assert crawl.end_ts is None


def test_tick_seals_a_crawl_whose_snapshots_are_final_with_a_report() -> None:
    crawl = started_crawl(start_ts=timezone.now() - timedelta(seconds=30))
    good = baker.make(Snapshot, crawl=crawl, url="http://a.example/", status="sealed")
    bad = baker.make(Snapshot, crawl=crawl, url="http://b.example/", status="sealed")
    broken = baker.make(
        Snapshot,
        crawl=crawl,
        url="http://c.example/",
        status="failed",
        error="finalizing failed: disk full",
    )
    for snapshot, extractor, status, error in [
        (good, "title", ResultStatus.SUCCEEDED, ""),
        (good, "wget", ResultStatus.SUCCEEDED, ""),
        (bad, "title", ResultStatus.SKIPPED, "page has no <title>"),
        (bad, "wget", ResultStatus.FAILED, "HTTP 404 from http://b.example/"),
        (bad, "favicon", ResultStatus.FAILED, "attempts exhausted (3): HTTP 503"),
        (broken, "title", ResultStatus.SUCCEEDED, ""),
    ]:
        baker.make(
            ArchiveResult, snapshot=snapshot, extractor=extractor, status=status, error=error
        )

    crawl_tick(crawl=crawl)

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.SEALED
    assert crawl.retry_at is None
    assert crawl.end_ts is not None
    report = crawl.report
    assert report["snapshots"] == {"sealed": 2, "failed": 1}
    assert report["results"] == {"succeeded": 3, "skipped": 1, "failed": 2}
    assert report["failures"] == [
        {"url": "http://c.example/", "extractor": None, "error": "finalizing failed: disk full"},
        {
            "url": "http://b.example/",
            "extractor": "favicon",
            "error": "attempts exhausted (3): HTTP 503",
        },
        {
            "url": "http://b.example/",
            "extractor": "wget",
            "error": "HTTP 404 from http://b.example/",
        },
    ]
    assert report["duration_seconds"] >= 30


def test_report_gives_the_reason_of_a_snapshot_that_failed_finalizing() -> None:
    crawl = started_crawl()
    broken = baker.make(
        Snapshot,
        crawl=crawl,
        url="http://c.example/",
        status="failed",
        error="finalizing failed: [Errno 28] No space left on device",
    )
    baker.make(ArchiveResult, snapshot=broken, extractor="title", status="succeeded")

    crawl_tick(crawl=crawl)

    failures = reloaded(crawl).report["failures"]
    assert any(
        failure["url"] == broken.url and failure["error"] == broken.error for failure in failures
    )


def test_tick_seals_a_crawl_without_snapshots() -> None:
    crawl = started_crawl()

    crawl_tick(crawl=crawl)

    report = reloaded(crawl).report
    assert reloaded(crawl).status == CrawlStatus.SEALED
    assert report["snapshots"] == {}
    assert report["failures"] == []


def test_tick_leaves_a_sealed_crawl_alone() -> None:
    crawl = baker.make(
        Crawl,
        status=CrawlStatus.SEALED,
        seeds="http://a.example/",
        report={"kept": True},
        retry_at=None,
    )

    crawl_tick(crawl=crawl)

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.SEALED
    assert crawl.report == {"kept": True}
    assert not crawl.snapshots.exists()


def test_seal_checks_again_under_the_lock_and_refuses_when_a_snapshot_came_back() -> None:
    """crawl_tick saw every snapshot final; a re-archive queued one before the seal's lock."""
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/")
    baker.make(Snapshot, crawl=crawl, url="http://a.example/", status=SnapshotStatus.QUEUED)

    sealed = crawl_seal(crawl=crawl)

    assert sealed is False
    assert Crawl.objects.get(pk=crawl.pk).status == CrawlStatus.STARTED
