"""Snapshot and archive-result workflows (core/services/snapshots.py), with the real extractors.

Extractors run for real (curl, wget) against the live test site (core/tests/site.py); a second
small server below serves what the live site cannot (paths in Latin-1).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.registry import default_profile
from core.folder.manifest import MANIFEST_NAME, read_manifest, verify_manifest
from core.folder.pywacz_worker import shared_worker
from core.folder.signing import key_fingerprint, public_key_pem, verify_signature
from core.models import ArchiveResult, Snapshot
from core.services.finalizing import snapshot_finalize
from core.services.results import result_tick
from core.services.snapshots import (
    snapshot_check_results,
    snapshot_queue_outlinks,
    snapshot_screen_outlinks,
    snapshot_start,
    snapshot_tick,
    snapshot_wake,
)
from core.tests.site import PIXEL_PNG, RETRY_AFTER_SECONDS, LiveSite
from core.tests.warcs import write_warc
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db

INDEX_TITLE = "Vellum Test Home"


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path: Path) -> Path:
    """A DATA_DIR of this test's own; three attempts per result, as in production."""
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.MAX_ATTEMPTS = 3
    return settings.ARCHIVE_DIR


def make_crawl(url: str = "http://a.example/", **fields) -> Crawl:
    return baker.make(Crawl, status=CrawlStatus.STARTED, seeds=url, **fields)


def make_snapshot(
    url: str = "http://a.example/",
    status: str = SnapshotStatus.STARTED,
    crawl: Crawl | None = None,
    **fields,
) -> Snapshot:
    return baker.make(Snapshot, crawl=crawl or make_crawl(url), url=url, status=status, **fields)


def make_result(snapshot: Snapshot, extractor: str, status: str = ResultStatus.QUEUED, **fields):
    fields.setdefault("retry_at", timezone.now())
    return baker.make(
        ArchiveResult, snapshot=snapshot, extractor=extractor, status=status, **fields
    )


def ticked(result: ArchiveResult) -> ArchiveResult:
    """Run one ``result_tick`` and return the result as stored."""
    result_tick(result=result)
    return ArchiveResult.objects.get(pk=result.pk)


def run_again(snapshot: Snapshot, extractor: str) -> ArchiveResult:
    """Replace the final result of ``extractor`` with a fresh queued one (a re-archive)."""
    ArchiveResult.objects.filter(snapshot=snapshot, extractor=extractor).delete()
    return make_result(snapshot, extractor)


def names_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def temporary_left(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".tmp-*")]


# --- snapshot_start ------------------------------------------------------------------------------


def test_start_creates_one_queued_result_per_extractor_of_the_profile() -> None:
    snapshot = make_snapshot(status=SnapshotStatus.QUEUED, priority=2)
    before = timezone.now()

    snapshot_start(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.STARTED
    assert snapshot.retry_at > timezone.now()
    results = list(snapshot.results.order_by("pk"))
    assert [r.extractor for r in results] == default_profile()
    assert len(results) == 6
    poll = timedelta(seconds=settings.POLL_INTERVAL)
    for result in results:
        assert result.status == ResultStatus.QUEUED
        assert result.priority == 2
        assert result.attempts == 0
        if result.depends_on:  # due when what it waits for ends, at its next poll at the latest
            assert before + poll <= result.retry_at <= timezone.now() + poll
        else:
            assert before <= result.retry_at <= timezone.now()
    assert {r.extractor for r in results if r.depends_on} >= {"title"}


@pytest.mark.parametrize("package", [True, False])
def test_start_warms_up_the_wacz_worker_only_when_snapshots_are_packaged(settings, package) -> None:
    settings.PACKAGE_WACZ = package
    worker = shared_worker()
    worker.close()
    snapshot = make_snapshot(status=SnapshotStatus.QUEUED)
    try:
        snapshot_start(snapshot=snapshot)

        running = worker.process is not None and worker.process.poll() is None
        assert running is package
    finally:
        worker.close()


def test_start_honours_settings_extractors(settings) -> None:
    settings.EXTRACTORS = ["title"]
    snapshot = make_snapshot(status=SnapshotStatus.QUEUED)

    snapshot_start(snapshot=snapshot)

    assert list(snapshot.results.values_list("extractor", flat=True)) == ["title"]


def test_start_keeps_registry_order_whatever_the_settings_order(settings) -> None:
    settings.EXTRACTORS = ["outlinks", "title", "wget"]
    snapshot = make_snapshot(status=SnapshotStatus.QUEUED)

    snapshot_start(snapshot=snapshot)

    extractors = list(snapshot.results.order_by("pk").values_list("extractor", flat=True))
    assert extractors == ["wget", "title", "outlinks"]


def test_start_with_an_unknown_extractor_changes_nothing(settings) -> None:
    settings.EXTRACTORS = ["title", "screenshots"]
    snapshot = make_snapshot(status=SnapshotStatus.QUEUED)

    with pytest.raises(KeyError, match="unknown extractor 'screenshots'"):
        snapshot_start(snapshot=snapshot)

    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.QUEUED
    assert not ArchiveResult.objects.exists()


# --- snapshot_check_results and finalizing -------------------------------------------------------


def test_check_results_waits_while_a_result_is_active(settings) -> None:
    settings.POLL_INTERVAL = 5
    snapshot = make_snapshot(retry_at=timezone.now())
    make_result(snapshot, "title", ResultStatus.SUCCEEDED)
    make_result(snapshot, "wget", ResultStatus.BACKOFF)

    snapshot_check_results(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.STARTED
    assert 4 <= (snapshot.retry_at - timezone.now()).total_seconds() <= 5
    assert not snapshot.output_dir.exists()


def finished_snapshot() -> Snapshot:
    """A started snapshot whose results are all final, with their files on disk."""
    crawl = make_crawl(tags=[baker.make("core.Tag", name="news")])
    snapshot = make_snapshot("http://a.example/", crawl=crawl, tags=list(crawl.tags.all()))
    folder = snapshot.output_dir
    files = {
        "title/title.txt": f"{INDEX_TITLE}\n",
        "wget/a.example/index.html": "<html><title>x</title></html>",
        # Left by attempts that crashed: never part of the snapshot.
        ".tmp-wget-2/a.example/index.html": "half",
        ".tmp-old-favicon/favicon.ico": "stale",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / ".tmp-abc123").write_text("a half-written index")
    write_warc(folder / "wget/warc/archive.warc.gz", "http://a.example/")
    make_result(
        snapshot,
        "wget",
        ResultStatus.SUCCEEDED,
        output="a.example/index.html",
        output_files=["wget/a.example/index.html", "wget/warc/archive.warc.gz"],
        cmd=["/usr/bin/wget", "http://a.example/"],
        exit_code=0,
        attempts=1,
    )
    make_result(
        snapshot,
        "title",
        ResultStatus.SUCCEEDED,
        output=INDEX_TITLE,
        output_files=["title/title.txt"],
        attempts=1,
    )
    make_result(
        snapshot,
        "favicon",
        ResultStatus.FAILED,
        attempts=3,
        error="attempts exhausted (3): HTTP 503",
    )
    make_result(snapshot, "outlinks", ResultStatus.SKIPPED, error="curl not found")
    return snapshot


def test_check_results_finalizes_and_seals_when_every_result_is_final() -> None:
    snapshot = finished_snapshot()
    folder = snapshot.output_dir

    snapshot_check_results(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.retry_at is None
    assert snapshot.error == ""
    assert snapshot.title == INDEX_TITLE
    assert temporary_left(folder) == []
    assert verify_manifest(folder) == []
    manifest = (folder / MANIFEST_NAME).read_bytes()
    assert snapshot.manifest_sha256 == hashlib.sha256(manifest).hexdigest()
    assert set(read_manifest(folder)) == {
        "index.json",
        "snapshot.wacz",
        "title/title.txt",
        "wget/a.example/index.html",
        "wget/warc/archive.warc.gz",
    }
    assert verify_signature(folder) == []
    assert snapshot.signed_by == key_fingerprint(public_key_pem())


def test_index_json_describes_the_snapshot_and_every_result() -> None:
    snapshot = finished_snapshot()

    snapshot_check_results(snapshot=snapshot)

    index = json.loads((snapshot.output_dir / "index.json").read_text(encoding="utf-8"))
    assert index["vellum_index_version"] == 4
    assert index["crawl"]["id"] == snapshot.crawl_id
    assert "seeds" not in index["crawl"]  # the depth-0 snapshots are the seeds
    assert index["crawl"]["depth"] == snapshot.crawl.depth
    assert index["snapshot"]["id"] == str(snapshot.pk)
    assert index["snapshot"]["url"] == "http://a.example/"
    assert index["snapshot"]["title"] == INDEX_TITLE
    assert index["snapshot"]["crawl_id"] == snapshot.crawl_id
    assert index["snapshot"]["depth"] == 0
    assert index["snapshot"]["parent_id"] is None
    assert index["snapshot"]["tags"] == ["news"]
    results = {r["extractor"]: r for r in index["results"]}
    assert [r["extractor"] for r in index["results"]] == ["wget", "title", "favicon", "outlinks"]
    assert results["wget"]["status"] == "succeeded"
    assert results["wget"]["output"] == "a.example/index.html"
    assert results["wget"]["output_files"] == [
        "wget/a.example/index.html",
        "wget/warc/archive.warc.gz",
    ]
    assert results["wget"]["cmd"] == ["/usr/bin/wget", "http://a.example/"]
    assert results["title"]["output"] == INDEX_TITLE
    assert results["favicon"]["status"] == "failed"
    assert results["favicon"]["attempts"] == 3
    assert results["favicon"]["error"] == "attempts exhausted (3): HTTP 503"
    assert results["outlinks"]["status"] == "skipped"
    assert results["outlinks"]["error"] == "curl not found"
    assert results["wget"]["history"] == []


def test_title_is_kept_when_the_title_result_did_not_succeed() -> None:
    snapshot = make_snapshot(title="Given by hand")
    make_result(snapshot, "title", ResultStatus.FAILED, output="ignored")

    snapshot_check_results(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.title == "Given by hand"


def block_folder(snapshot: Snapshot) -> None:
    """Put a regular file where the snapshot folder must go, so creating the folder fails."""
    snapshot.output_dir.parent.mkdir(parents=True, exist_ok=True)
    snapshot.output_dir.write_text("in the way")


def test_finalize_error_is_retried_with_backoff() -> None:
    snapshot = make_snapshot()
    make_result(snapshot, "title", ResultStatus.SUCCEEDED, output="T")
    block_folder(snapshot)

    snapshot_check_results(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.FINALIZING
    assert snapshot.attempts == 1
    assert snapshot.error.startswith("finalizing failed: ")
    assert str(snapshot.output_dir) in snapshot.error
    assert snapshot.retry_at > timezone.now()
    assert snapshot.manifest_sha256 == ""


def test_finalize_fails_after_max_attempts() -> None:
    snapshot = make_snapshot()
    make_result(snapshot, "title", ResultStatus.SUCCEEDED, output="T")
    block_folder(snapshot)

    snapshot_check_results(snapshot=snapshot)
    for _ in range(2):
        snapshot = Snapshot.objects.get(pk=snapshot.pk)
        assert snapshot.status == SnapshotStatus.FINALIZING
        snapshot_tick(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.FAILED
    assert snapshot.error.startswith("finalizing failed: ")
    assert snapshot.retry_at is None
    assert snapshot.end_ts is not None


def test_a_finalizing_worker_that_died_uses_up_its_attempt(settings) -> None:
    """Each claim of a finalizing snapshot counts an attempt before it runs, so a snapshot whose
    worker dies every time (lease expired, never sealed or failed) ends failed, not looping."""
    snapshot = make_snapshot(status=SnapshotStatus.FINALIZING, attempts=settings.MAX_ATTEMPTS)
    make_result(snapshot, "title", ResultStatus.SUCCEEDED, output="T")

    snapshot_tick(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.FAILED
    assert snapshot.error == (
        "attempts exhausted (3): worker stopped before finishing (lease expired)"
    )


def test_a_finalizing_snapshot_with_attempts_left_seals(settings) -> None:
    snapshot = make_snapshot(status=SnapshotStatus.FINALIZING, attempts=settings.MAX_ATTEMPTS - 1)
    make_result(snapshot, "title", ResultStatus.SUCCEEDED, output="T")

    snapshot_tick(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.attempts == settings.MAX_ATTEMPTS


def test_finalize_succeeds_once_the_problem_is_gone() -> None:
    snapshot = make_snapshot()
    make_result(snapshot, "title", ResultStatus.SUCCEEDED, output="T")
    block_folder(snapshot)
    snapshot_check_results(snapshot=snapshot)
    snapshot.output_dir.unlink()

    snapshot_tick(snapshot=Snapshot.objects.get(pk=snapshot.pk))

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.error == ""
    assert verify_manifest(snapshot.output_dir) == []


def test_snapshot_tick_follows_the_state() -> None:
    snapshot = make_snapshot(status=SnapshotStatus.QUEUED)
    snapshot_tick(snapshot=snapshot)
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.STARTED

    for result in snapshot.results.all():
        result.start()
        result.skip(reason="disabled")
        result.save()
    snapshot_tick(snapshot=Snapshot.objects.get(pk=snapshot.pk))

    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.SEALED


# --- result_tick with the real extractors --------------------------------------------------------


def test_title_succeeds_and_its_files_move_into_place(live_site: LiveSite) -> None:
    snapshot = make_snapshot(live_site.url("/"))
    result = make_result(snapshot, "title")

    result = ticked(result)

    assert result.status == ResultStatus.SUCCEEDED, result.error
    assert result.output == INDEX_TITLE
    assert result.attempts == 1
    assert result.retry_at is None
    assert os.path.basename(result.cmd[0]) == "curl"
    assert result.cmd[-1] == live_site.url("/")
    assert result.cmd_version.startswith("curl ")
    assert result.exit_code == 0
    folder = snapshot.output_dir
    assert result.output_files == ["title/curl.log", "title/title.txt"]
    assert names_in(folder) == {"title/curl.log", "title/title.txt"}
    assert (folder / "title/title.txt").read_text() == f"{INDEX_TITLE}\n"
    assert result.output_size == sum((folder / name).stat().st_size for name in names_in(folder))
    assert temporary_left(folder) == []


def test_a_second_success_replaces_the_previous_output(live_site: LiveSite) -> None:
    snapshot = make_snapshot(live_site.url("/page2.html"))
    ticked(make_result(snapshot, "title"))
    (snapshot.output_dir / "title" / "stale.txt").write_text("from before")

    result = ticked(run_again(snapshot, "title"))

    assert result.status == ResultStatus.SUCCEEDED
    assert result.output == "Page Two"
    assert names_in(snapshot.output_dir) == {"title/curl.log", "title/title.txt"}
    assert temporary_left(snapshot.output_dir) == []


@pytest.mark.parametrize("extractor", ["title", "wget"])
def test_a_404_fails_and_keeps_the_attempt_log(live_site: LiveSite, extractor: str) -> None:
    url = live_site.url("/missing.html")
    snapshot = make_snapshot(url)

    result = ticked(make_result(snapshot, extractor))

    assert result.status == ResultStatus.FAILED
    assert "404" in result.error
    assert url in result.error
    assert result.attempts == 1
    assert result.retry_at is None
    folder = snapshot.output_dir
    log = folder / "logs" / f"{extractor}.1.log"
    assert log.is_file()
    assert url in log.read_text()
    assert not (folder / extractor).exists()
    assert temporary_left(folder) == []


def test_a_503_with_retry_after_backs_off_then_exhausts_attempts(
    live_site: LiveSite, settings
) -> None:
    settings.BACKOFF_CAP = 60
    snapshot = make_snapshot(live_site.url("/server-error"))
    result = make_result(snapshot, "title")

    before = timezone.now()
    result = ticked(result)

    assert result.status == ResultStatus.BACKOFF
    assert result.attempts == 1
    assert "HTTP 503" in result.error
    assert result.retry_at >= before + timedelta(seconds=RETRY_AFTER_SECONDS)
    assert result.retry_at <= timezone.now() + timedelta(seconds=60)
    assert result.cmd_version.startswith("curl ")
    assert result.end_ts is None

    result = ticked(result)
    assert result.status == ResultStatus.BACKOFF
    assert result.attempts == 2

    result = ticked(result)
    assert result.status == ResultStatus.FAILED
    assert result.attempts == 3
    assert result.error.startswith("attempts exhausted (3): HTTP 503")
    assert result.retry_at is None
    logs = names_in(snapshot.output_dir / "logs")
    assert logs == {"title.1.log", "title.2.log", "title.3.log"}


def test_backoff_never_exceeds_the_cap_even_with_retry_after(live_site: LiveSite, settings) -> None:
    settings.BACKOFF_CAP = 2
    snapshot = make_snapshot(live_site.url("/server-error"))

    result = ticked(make_result(snapshot, "title"))

    assert result.status == ResultStatus.BACKOFF
    assert result.retry_at <= timezone.now() + timedelta(seconds=2)


def test_a_timeout_is_a_temporary_error(live_site: LiveSite, settings) -> None:
    settings.EXTRACTOR_TIMEOUT = 1
    snapshot = make_snapshot(live_site.url("/slow"))
    started = time.monotonic()

    result = ticked(make_result(snapshot, "title"))

    assert time.monotonic() - started < 10
    assert result.status == ResultStatus.BACKOFF
    assert "timed out" in result.error
    assert (snapshot.output_dir / "logs" / "title.1.log").is_file()


@pytest.mark.parametrize(("extractor", "binary"), [("title", "curl"), ("wget", "wget")])
def test_a_missing_binary_skips_the_result(
    live_site: LiveSite,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    extractor: str,
    binary: str,
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    snapshot = make_snapshot(live_site.url("/"))

    result = ticked(make_result(snapshot, extractor))

    assert result.status == ResultStatus.SKIPPED
    assert result.error == f"{binary} not found"
    assert result.retry_at is None
    assert not (snapshot.output_dir / extractor).exists()


def test_a_page_that_is_not_html_skips_the_title(live_site: LiveSite) -> None:
    snapshot = make_snapshot(live_site.url("/data.json"))

    result = ticked(make_result(snapshot, "title"))

    assert result.status == ResultStatus.SKIPPED
    assert result.error == "not HTML (application/json)"


def lease_expired(result: ArchiveResult) -> ArchiveResult:
    """Return ``result`` as an actor finds it after the worker that started it died."""
    ArchiveResult.objects.filter(pk=result.pk).update(
        retry_at=timezone.now() - timedelta(seconds=1)
    )
    recovered = ArchiveResult.objects.get(pk=result.pk)
    assert ArchiveResult.objects.due().filter(pk=result.pk).exists()
    return recovered


def test_a_result_left_started_is_recovered_into_backoff(live_site: LiveSite) -> None:
    snapshot = make_snapshot(live_site.url("/"))
    result = make_result(snapshot, "title")
    result.start()
    result.save()

    result = ticked(lease_expired(result))

    assert result.status == ResultStatus.BACKOFF
    assert result.attempts == 1
    assert "lease expired" in result.error
    assert result.retry_at > timezone.now()
    assert not snapshot.output_dir.exists()  # nothing ran

    result = ticked(result)  # the next attempt runs for real
    assert result.status == ResultStatus.SUCCEEDED
    assert result.attempts == 2


def test_a_result_left_started_on_its_last_attempt_fails(live_site: LiveSite) -> None:
    snapshot = make_snapshot(live_site.url("/"))
    result = make_result(snapshot, "title", ResultStatus.BACKOFF, attempts=2)
    result.start()
    result.save()

    result = ticked(lease_expired(result))

    assert result.status == ResultStatus.FAILED
    assert result.attempts == 3
    assert result.error.startswith("attempts exhausted (3): ")
    assert "lease expired" in result.error
    assert result.retry_at is None


def test_a_whole_snapshot_with_every_extractor(live_site: LiveSite) -> None:
    snapshot = make_snapshot(live_site.url("/"), status=SnapshotStatus.QUEUED)
    snapshot_start(snapshot=snapshot)
    for result in ArchiveResult.objects.filter(snapshot=snapshot):
        result_tick(result=result)

    snapshot_check_results(snapshot=Snapshot.objects.get(pk=snapshot.pk))

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.title == INDEX_TITLE
    states = dict(snapshot.results.values_list("extractor", "status"))
    assert states == {name: ResultStatus.SUCCEEDED for name in default_profile()}
    assert verify_manifest(snapshot.output_dir) == []
    assert temporary_left(snapshot.output_dir) == []


# --- outlinks ------------------------------------------------------------------------------------


ANY_HOST_PAGE = "outlinks-any-host.html"


def write_any_host_page(site: LiveSite) -> None:
    """Add a page whose links need normalizing to the live site (idempotent)."""
    (site.root / ANY_HOST_PAGE).write_text(
        "<html><head><title>Links</title></head><body>"
        '<a href="HTTP://Example.INVALID:80/a b#frag">elsewhere</a>'
        '<a href="/page2.html">here</a>'
        '<a href="ftp://example.invalid/file">not followed</a>'
        "</body></html>"
    )


def outlinks_snapshot(
    site: LiveSite, path: str = "/", *, depth: int = 0, crawl_depth: int = 1, any_host: bool = False
) -> Snapshot:
    url = site.url(path)
    crawl = make_crawl(
        url,
        depth=crawl_depth,
        any_host=any_host,
        priority=4,
        tags=[baker.make("core.Tag", name="news"), baker.make("core.Tag", name="tech")],
    )
    return make_snapshot(url, crawl=crawl, depth=depth, priority=4)


def children_of(snapshot: Snapshot) -> list[Snapshot]:
    return list(Snapshot.objects.filter(parent=snapshot).order_by("url"))


def test_outlinks_queue_same_host_children(live_site: LiveSite) -> None:
    root = outlinks_snapshot(live_site)
    before = timezone.now()

    result = ticked(make_result(root, "outlinks"))

    assert result.status == ResultStatus.SUCCEEDED, result.error
    assert result.output == "outlinks.json"
    children = children_of(root)
    assert [c.url for c in children] == [
        live_site.url("/missing.html"),
        live_site.url("/page2.html"),
        live_site.url("/page3.html"),
    ]
    for child in children:
        assert child.crawl_id == root.crawl_id
        assert child.depth == 1
        assert child.status == SnapshotStatus.QUEUED
        assert child.priority == 4
        assert before <= child.retry_at <= timezone.now()
        assert sorted(child.tags.values_list("name", flat=True)) == ["news", "tech"]
    assert root.crawl.snapshots.count() == 4
    saved = json.loads((root.output_dir / "outlinks" / "outlinks.json").read_text())
    assert "http://example.invalid/x" in saved  # recorded, just not followed


def test_outlinks_follow_other_hosts_when_the_crawl_allows(live_site: LiveSite) -> None:
    write_any_host_page(live_site)
    root = outlinks_snapshot(live_site, f"/{ANY_HOST_PAGE}", any_host=True)

    result = ticked(make_result(root, "outlinks"))

    assert result.status == ResultStatus.SUCCEEDED, result.error
    assert [c.url for c in children_of(root)] == [
        live_site.url("/page2.html"),
        "http://example.invalid/a%20b",
    ]


def test_outlinks_of_the_index_with_any_host(live_site: LiveSite) -> None:
    root = outlinks_snapshot(live_site, any_host=True)

    ticked(make_result(root, "outlinks"))

    urls = [c.url for c in children_of(root)]
    assert "http://example.invalid/x" in urls
    assert len(urls) == 4


def test_outlinks_at_the_crawl_depth_queue_nothing(live_site: LiveSite) -> None:
    root = outlinks_snapshot(live_site, depth=1, crawl_depth=1)

    result = ticked(make_result(root, "outlinks"))

    assert result.status == ResultStatus.SUCCEEDED
    assert children_of(root) == []
    assert root.crawl.snapshots.count() == 1


def test_outlinks_of_a_depth_zero_crawl_queue_nothing(live_site: LiveSite) -> None:
    root = outlinks_snapshot(live_site, crawl_depth=0)

    ticked(make_result(root, "outlinks"))

    assert children_of(root) == []


def test_outlinks_twice_make_no_duplicates(live_site: LiveSite) -> None:
    root = outlinks_snapshot(live_site)
    ticked(make_result(root, "outlinks"))
    first = {c.pk for c in children_of(root)}

    result = ticked(run_again(root, "outlinks"))

    assert result.status == ResultStatus.SUCCEEDED
    assert {c.pk for c in children_of(root)} == first
    assert root.crawl.snapshots.count() == 4
    screened = snapshot_screen_outlinks(snapshot=root, urls=[live_site.url("/page2.html")])
    assert snapshot_queue_outlinks(snapshot=root, screened=screened) == 0


def test_outlinks_skip_a_url_already_in_the_crawl(live_site: LiveSite) -> None:
    root = outlinks_snapshot(live_site)
    other_root = make_snapshot(live_site.url("/page2.html"), crawl=root.crawl)

    ticked(make_result(root, "outlinks"))

    assert Snapshot.objects.get(pk=other_root.pk).parent is None
    assert len(children_of(root)) == 2


def test_queue_outlinks_normalizes_and_drops_invalid_links() -> None:
    root = make_snapshot("http://a.example/", crawl=make_crawl(depth=2))

    screened = snapshot_screen_outlinks(
        snapshot=root,
        urls=[
            "HTTP://A.EXAMPLE:80/x#y",
            "http://a.example/x",
            "javascript:void(0)",
            "http://a.example:8080/other-port",
            "http://b.example/",
            "not a url",
        ],
    )
    queued = snapshot_queue_outlinks(snapshot=root, screened=screened)

    assert queued == 1
    assert [c.url for c in children_of(root)] == ["http://a.example/x"]


# --- paths that are not UTF-8 --------------------------------------------------------------------


class Latin1Handler(BaseHTTPRequestHandler):
    """Answer any path with a small HTML page; "/" shows an image at a Latin-1 encoded path."""

    def do_GET(self) -> None:
        if self.path.endswith(".png"):
            body, kind = PIXEL_PNG, "image/png"
        elif self.path == "/":
            body, kind = b'<html><title>Home</title><img src="/caf%E9.png"></html>', "text/html"
        else:
            body, kind = b"<html><title>Caf\xe9</title></html>", "text/html; charset=iso-8859-1"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


@pytest.fixture(scope="module")
def latin1_site() -> Iterator[str]:
    """Serve Latin1Handler on 127.0.0.1; yield its base URL (no trailing slash)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Latin1Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_wget_archives_a_page_at_a_latin1_encoded_path(latin1_site: str) -> None:
    snapshot = make_snapshot(f"{latin1_site}/caf%E9.html")

    result = ticked(make_result(snapshot, "wget"))

    assert result.status == ResultStatus.SUCCEEDED, result.error


def test_a_requisite_at_a_latin1_path_does_not_break_finalizing(latin1_site: str) -> None:
    snapshot = make_snapshot(f"{latin1_site}/")
    result = ticked(make_result(snapshot, "wget"))
    assert result.status == ResultStatus.SUCCEEDED, result.error

    snapshot_check_results(snapshot=snapshot)

    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.SEALED


# --- waking a parent when its last child is final -------------------------------------------------


def test_wake_makes_a_waiting_snapshot_due_now(settings) -> None:
    settings.POLL_INTERVAL = 5
    waiting = make_snapshot(retry_at=timezone.now() + timedelta(seconds=4))

    assert snapshot_wake(snapshot_id=waiting.pk)

    assert Snapshot.objects.get(pk=waiting.pk).retry_at <= timezone.now()


def test_wake_never_touches_a_snapshot_under_lease(settings) -> None:
    settings.POLL_INTERVAL = 5
    lease_end = timezone.now() + timedelta(seconds=settings.LEASE_SECONDS)
    leased = make_snapshot(retry_at=lease_end)

    assert not snapshot_wake(snapshot_id=leased.pk)

    assert Snapshot.objects.get(pk=leased.pk).retry_at == lease_end


def test_the_last_final_result_wakes_its_snapshot_and_not_before(settings, live_site) -> None:
    settings.POLL_INTERVAL = 5
    settings.EXTRACTORS = ["title"]
    snapshot = make_snapshot(live_site.url("/"), retry_at=timezone.now() + timedelta(seconds=4))
    title = make_result(snapshot, "title")
    other = make_result(snapshot, "headers")

    ticked(title)
    assert Snapshot.objects.get(pk=snapshot.pk).retry_at > timezone.now()  # headers still to do

    ticked(other)
    assert Snapshot.objects.get(pk=snapshot.pk).retry_at <= timezone.now()


def test_sealing_the_last_snapshot_wakes_its_crawl(settings) -> None:
    settings.POLL_INTERVAL = 5
    crawl = make_crawl(retry_at=timezone.now() + timedelta(seconds=4))
    make_snapshot("http://a.example/1", SnapshotStatus.SEALED, crawl)
    last = make_snapshot("http://a.example/2", SnapshotStatus.FINALIZING, crawl)

    snapshot_finalize(snapshot=last)

    assert Snapshot.objects.get(pk=last.pk).status == SnapshotStatus.SEALED
    assert Crawl.objects.get(pk=crawl.pk).retry_at <= timezone.now()
