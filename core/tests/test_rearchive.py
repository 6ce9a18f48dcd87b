"""Running a finished snapshot again: re-archive (core.services.rearchive.snapshot_rearchive),
retrying its failures (snapshot_retry_failed, ``manage.py retry``), and per-extractor attempt
limits.

A re-archive keeps one result per extractor (the database constraint) and starts a new run on
each; the earlier run's record stays in the result's ``history`` and its files move to
``history/<run>/`` in the snapshot folder, still covered by the manifest.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.folder.manifest import verify_manifest
from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_tick
from core.services.rearchive import snapshot_rearchive, snapshot_retry_failed
from core.services.results import result_tick
from core.services.snapshots import snapshot_tick
from core.tests.site import LiveSite
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db

EXTRACTORS = ["headers", "title"]


@pytest.fixture(autouse=True)
def own_data_dir(settings, tmp_path) -> None:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.EXTRACTORS = EXTRACTORS


def archive_fully(snapshot: Snapshot) -> Snapshot:
    """Tick ``snapshot`` and its results in this process until it is final."""
    for _ in range(20):
        snapshot = Snapshot.objects.get(pk=snapshot.pk)
        if snapshot.status in SnapshotStatus.final():
            return snapshot
        snapshot_tick(snapshot=snapshot)
        for result in ArchiveResult.objects.filter(snapshot=snapshot).active():
            result_tick(result=result)
    raise AssertionError(f"snapshot {snapshot.pk} did not finish: {snapshot.status}")


def sealed_snapshot(live_site: LiveSite) -> Snapshot:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds=live_site.url("/"))
    snapshot = baker.make(Snapshot, crawl=crawl, url=live_site.url("/"), retry_at=timezone.now())
    snapshot = archive_fully(snapshot)
    assert snapshot.status == SnapshotStatus.SEALED
    return snapshot


def test_rearchive_runs_every_extractor_again_and_keeps_the_earlier_run(
    live_site: LiveSite,
) -> None:
    snapshot = sealed_snapshot(live_site)
    folder = snapshot.output_dir
    first = {r.extractor: r for r in snapshot.results.all()}
    first_headers = (folder / "headers" / "headers.json").read_bytes()

    moved_to = snapshot_rearchive(snapshot=snapshot)

    assert moved_to.startswith("history/")
    assert (folder / moved_to / "headers" / "headers.json").read_bytes() == first_headers
    assert (folder / moved_to / "index.json").is_file()
    assert not (folder / "headers").exists()
    queued = Snapshot.objects.get(pk=snapshot.pk)
    assert queued.status == SnapshotStatus.QUEUED
    assert {r.status for r in queued.results.all()} == {ResultStatus.QUEUED}

    again = archive_fully(queued)

    assert again.status == SnapshotStatus.SEALED
    results = {r.extractor: r for r in again.results.all()}
    assert sorted(results) == sorted(EXTRACTORS)  # still one result per extractor
    assert ArchiveResult.objects.filter(snapshot=snapshot).count() == len(EXTRACTORS)
    headers = results["headers"]
    assert headers.status == ResultStatus.SUCCEEDED
    assert headers.start_ts > first["headers"].end_ts
    assert len(headers.history) == 1
    earlier = headers.history[0]
    assert earlier["status"] == ResultStatus.SUCCEEDED
    assert earlier["start_ts"] == first["headers"].start_ts.isoformat()
    assert earlier["output_files"] == [
        f"{moved_to}/{path}" for path in first["headers"].output_files
    ]
    assert f"{moved_to}/headers/headers.json" in earlier["output_files"]
    assert (folder / "headers" / "headers.json").is_file()
    assert verify_manifest(folder) == []
    manifest = (folder / "manifest-sha256.txt").read_text()
    assert f"{moved_to}/headers/headers.json" in manifest
    index = json.loads((folder / "index.json").read_text())
    by_name = {r["extractor"]: r for r in index["results"]}
    assert by_name["headers"]["history"] == headers.history


def test_a_second_rearchive_keeps_both_earlier_runs(live_site: LiveSite) -> None:
    snapshot = sealed_snapshot(live_site)
    first_run = snapshot_rearchive(snapshot=snapshot)
    snapshot = archive_fully(snapshot)

    second_run = snapshot_rearchive(snapshot=snapshot)
    snapshot = archive_fully(snapshot)

    assert first_run != second_run
    title = snapshot.results.get(extractor="title")
    assert [run["output_dir"] for run in title.history] == [
        f"{first_run}/title",
        f"{second_run}/title",
    ]
    for run in (first_run, second_run):
        assert (snapshot.output_dir / run / "title").is_dir()
    assert verify_manifest(snapshot.output_dir) == []


def test_rearchive_after_a_crash_between_moving_and_saving_loses_nothing(
    live_site: LiveSite,
) -> None:
    """The files moved but the database never heard of it: asking again finishes the job."""
    snapshot = sealed_snapshot(live_site)
    folder = snapshot.output_dir
    run = f"history/{snapshot.start_ts.strftime('%Y%m%dT%H%M%S.%fZ')}"
    (folder / run).mkdir(parents=True)
    (folder / "headers").rename(folder / run / "headers")  # what the crash left

    moved_to = snapshot_rearchive(snapshot=Snapshot.objects.get(pk=snapshot.pk))

    assert moved_to == run
    assert (folder / run / "headers" / "headers.json").is_file()
    assert (folder / run / "title").is_dir()
    headers = ArchiveResult.objects.get(snapshot=snapshot, extractor="headers")
    assert f"{run}/headers/headers.json" in headers.history[0]["output_files"]


@pytest.mark.parametrize("active", SnapshotStatus.active())
def test_rearchive_of_a_snapshot_in_progress_is_refused_and_moves_nothing(active: str) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/")
    snapshot = baker.make(Snapshot, crawl=crawl, status=active, url="http://a.example/")
    baker.make(ArchiveResult, snapshot=snapshot, extractor="title", status=ResultStatus.SUCCEEDED)
    (snapshot.output_dir / "title").mkdir(parents=True)

    with pytest.raises(TransitionNotAllowed):
        snapshot_rearchive(snapshot=snapshot)

    assert (snapshot.output_dir / "title").is_dir()
    assert not (snapshot.output_dir / "history").exists()
    assert Snapshot.objects.get(pk=snapshot.pk).status == active


def test_rearchive_reopens_a_sealed_crawl_which_seals_again(live_site: LiveSite) -> None:
    snapshot = sealed_snapshot(live_site)
    crawl = Crawl.objects.get(pk=snapshot.crawl_id)
    crawl_tick(crawl=crawl)
    crawl = Crawl.objects.get(pk=crawl.pk)
    assert crawl.status == CrawlStatus.SEALED

    snapshot_rearchive(snapshot=snapshot)

    crawl = Crawl.objects.get(pk=crawl.pk)
    assert crawl.status == CrawlStatus.STARTED
    archive_fully(snapshot)
    crawl_tick(crawl=Crawl.objects.get(pk=crawl.pk))
    crawl = Crawl.objects.get(pk=crawl.pk)
    assert crawl.status == CrawlStatus.SEALED
    assert crawl.report["snapshots"] == {SnapshotStatus.SEALED: 1}


def test_max_attempts_can_be_set_per_extractor(live_site: LiveSite, settings) -> None:
    settings.MAX_ATTEMPTS = 3
    settings.EXTRACTOR_OPTIONS = {"title": {"max_attempts": 1}}
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds=live_site.url("/server-error"))
    snapshot = baker.make(
        Snapshot, crawl=crawl, url=live_site.url("/server-error"), status=SnapshotStatus.STARTED
    )
    title = baker.make(ArchiveResult, snapshot=snapshot, extractor="title")
    headers = baker.make(ArchiveResult, snapshot=snapshot, extractor="headers")

    result_tick(result=title)
    result_tick(result=headers)

    title = ArchiveResult.objects.get(pk=title.pk)
    assert title.status == ResultStatus.FAILED
    assert title.error.startswith("attempts exhausted (1): HTTP 503")
    assert ArchiveResult.objects.get(pk=headers.pk).status == ResultStatus.BACKOFF


def snapshot_with_a_failure(live_site: LiveSite) -> Snapshot:
    """A sealed snapshot whose title failed (HTTP 503 until attempts ran out)."""
    crawl = baker.make(Crawl, status=CrawlStatus.SEALED, seeds=live_site.url("/"), retry_at=None)
    snapshot = baker.make(
        Snapshot, crawl=crawl, url=live_site.url("/"), status=SnapshotStatus.SEALED, retry_at=None
    )
    baker.make(
        ArchiveResult, snapshot=snapshot, extractor="headers", status=ResultStatus.SUCCEEDED,
        output="headers.json", retry_at=None,
    )  # fmt: skip
    baker.make(
        ArchiveResult, snapshot=snapshot, extractor="title", status=ResultStatus.FAILED,
        attempts=3, error="attempts exhausted (3): HTTP 503", retry_at=None,
    )  # fmt: skip
    return snapshot


def test_retry_failed_runs_only_the_failed_results_and_seals_again(live_site: LiveSite) -> None:
    snapshot = snapshot_with_a_failure(live_site)

    retried = snapshot_retry_failed(snapshot=snapshot)

    assert retried == 1
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.STARTED
    assert Crawl.objects.get(pk=snapshot.crawl_id).status == CrawlStatus.STARTED
    states = dict(snapshot.results.values_list("extractor", "status"))
    assert states == {"headers": ResultStatus.SUCCEEDED, "title": ResultStatus.QUEUED}
    snapshot = archive_fully(snapshot)
    assert snapshot.status == SnapshotStatus.SEALED
    title = snapshot.results.get(extractor="title")
    assert (title.status, title.attempts, title.output) == (
        ResultStatus.SUCCEEDED, 1, "Vellum Test Home",
    )  # fmt: skip
    assert snapshot.title == "Vellum Test Home"
    assert snapshot.results.get(extractor="headers").output == "headers.json"  # untouched


def test_retry_command_needs_a_selection() -> None:
    with pytest.raises(CommandError, match="ids, --crawl ID or --all"):
        call_command("retry")


def test_retry_command_rejects_an_id_that_is_not_a_uuid() -> None:
    with pytest.raises(CommandError, match="'42' is not a snapshot id"):
        call_command("retry", "42")


def test_retry_command_all(live_site: LiveSite) -> None:
    failing = snapshot_with_a_failure(live_site)
    clean = baker.make(
        Snapshot, crawl=failing.crawl, url=live_site.url("/page2.html"),
        status=SnapshotStatus.SEALED, retry_at=None,
    )  # fmt: skip
    out = StringIO()

    with CaptureQueriesContext(connection) as queries:
        call_command("retry", "--all", stdout=out)

    assert out.getvalue().startswith("Queued 1 failed results of 1 snapshots again.")
    # Each snapshot's crawl comes without what grows with it (Crawl.LOADED_ON_DEMAND).
    assert not [q["sql"] for q in queries.captured_queries if "seed" in q["sql"]]
    assert Snapshot.objects.get(pk=failing.pk).status == SnapshotStatus.STARTED
    assert Snapshot.objects.get(pk=clean.pk).status == SnapshotStatus.SEALED


def test_retry_command_by_id_and_crawl(live_site: LiveSite) -> None:
    failing = snapshot_with_a_failure(live_site)
    out = StringIO()

    other = baker.make(Crawl, status=CrawlStatus.SEALED, seeds="http://a.example/", retry_at=None)
    call_command("retry", "--crawl", str(other.pk), stdout=out)
    assert out.getvalue().startswith("Nothing to retry")
    call_command("retry", str(failing.pk), stdout=out)

    assert "Queued 1 failed results of 1 snapshots again." in out.getvalue()
    assert Snapshot.objects.get(pk=failing.pk).status == SnapshotStatus.STARTED


def test_retry_failed_also_refinalizes_a_snapshot_whose_finalizing_failed(
    live_site: LiveSite,
) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds=live_site.url("/"))
    snapshot = baker.make(
        Snapshot, crawl=crawl, url=live_site.url("/"), status=SnapshotStatus.FAILED,
        error="finalizing failed: disk full", retry_at=None,
    )  # fmt: skip
    baker.make(
        ArchiveResult, snapshot=snapshot, extractor="title", status=ResultStatus.SUCCEEDED,
        output="T", retry_at=None,
    )  # fmt: skip

    assert snapshot_retry_failed(snapshot=snapshot) == 0
    snapshot = archive_fully(snapshot)

    assert snapshot.status == SnapshotStatus.SEALED
    assert verify_manifest(snapshot.output_dir) == []


def test_rearchive_of_a_stale_copy_raises_and_moves_nothing(live_site: LiveSite) -> None:
    """Another process changed the snapshot since this copy was read (here: a retry)."""
    snapshot = sealed_snapshot(live_site)
    stale = Snapshot.objects.get(pk=snapshot.pk)
    snapshot_retry_failed(snapshot=snapshot)

    with pytest.raises(ConcurrentTransition):
        snapshot_rearchive(snapshot=stale)

    assert (snapshot.output_dir / "headers" / "headers.json").is_file()
    assert not (snapshot.output_dir / "history").exists()
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.STARTED


def test_results_of_a_rearchived_snapshot_wait_until_it_starts(live_site: LiveSite) -> None:
    snapshot = sealed_snapshot(live_site)
    snapshot_rearchive(snapshot=snapshot)

    waiting = set(ArchiveResult.objects.due().filter(snapshot=snapshot))
    snapshot_tick(snapshot=Snapshot.objects.get(pk=snapshot.pk))  # queued -> started
    due = set(ArchiveResult.objects.due().filter(snapshot=snapshot))

    assert waiting == set()
    assert due == set(snapshot.results.all())


def test_rearchive_refuses_to_overwrite_an_earlier_run(live_site: LiveSite) -> None:
    snapshot = sealed_snapshot(live_site)
    run = f"history/{snapshot.start_ts.strftime('%Y%m%dT%H%M%S.%fZ')}"
    (snapshot.output_dir / run / "title").mkdir(parents=True)  # both places hold a title

    with pytest.raises(FileExistsError, match="exists already"):
        snapshot_rearchive(snapshot=snapshot)

    assert (snapshot.output_dir / "title").is_dir()
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.SEALED


def test_a_retried_result_keeps_the_earlier_runs_logs(live_site: LiveSite, settings) -> None:
    settings.MAX_ATTEMPTS = 1
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds=live_site.url("/missing"))
    snapshot = baker.make(Snapshot, crawl=crawl, url=live_site.url("/missing"))
    snapshot = archive_fully(snapshot)
    first_log = (snapshot.output_dir / "logs" / "title.1.log").read_text()

    snapshot_retry_failed(snapshot=snapshot)
    archive_fully(snapshot)

    logs = snapshot.output_dir / "logs"
    assert (logs / "title.1.log").read_text() == first_log
    assert (logs / "title.1.run2.log").is_file()


@pytest.mark.parametrize("command", ["retry", "rearchive"])
def test_a_crawl_or_snapshot_that_does_not_exist_is_an_error_not_nothing_to_do(
    command: str,
) -> None:
    """A mistyped id in a script must not pass as "nothing matched" (exit status 0)."""
    crawl = baker.make(Crawl, status=CrawlStatus.SEALED, seeds="http://a.example/", retry_at=None)
    unknown = "00000000-0000-0000-0000-000000000000"

    with pytest.raises(CommandError, match=f"^no crawl {crawl.pk + 1}$"):
        call_command(command, "--crawl", str(crawl.pk + 1), stdout=StringIO())
    with pytest.raises(CommandError, match=f"^no snapshot {unknown}$"):
        call_command(command, unknown, stdout=StringIO())


def test_rearchive_command_needs_a_selection() -> None:
    with pytest.raises(CommandError, match="Say which snapshots"):
        call_command("rearchive")


def test_rearchive_command_queues_a_sealed_snapshot_and_leaves_one_in_progress(
    live_site: LiveSite,
) -> None:
    sealed = sealed_snapshot(live_site)
    busy = baker.make(
        Snapshot, crawl=sealed.crawl, url=live_site.url("/page2.html"),
        status=SnapshotStatus.STARTED,
    )  # fmt: skip
    out, err = StringIO(), StringIO()

    with pytest.raises(CommandError, match=r"^1 snapshots still in progress were left alone$"):
        call_command("rearchive", str(sealed.pk), str(busy.pk), stdout=out, stderr=err)

    assert f"{sealed.pk}: queued again; its earlier run is in history/" in out.getvalue()
    assert "Queued 1 snapshots to be archived again." in out.getvalue()
    assert err.getvalue() == f"{busy.pk}: still in progress (started), left alone\n"
    assert Snapshot.objects.get(pk=sealed.pk).status == SnapshotStatus.QUEUED
    assert Snapshot.objects.get(pk=busy.pk).status == SnapshotStatus.STARTED


def test_rearchive_flagged_archives_a_damaged_snapshot_again(live_site: LiveSite) -> None:
    damaged, sound = sealed_snapshot(live_site), sealed_snapshot(live_site)
    title = damaged.output_dir / "title" / "title.txt"
    title.unlink()  # the sound snapshot's identical title is the same file (core/folder/blobs.py)
    title.write_text("altered")
    with pytest.raises(CommandError):
        call_command("verify", "--all", "--local-only", stdout=StringIO())
    out = StringIO()

    call_command("rearchive", "--flagged", stdout=out)

    assert out.getvalue().startswith(f"{damaged.pk}: queued again")
    assert Snapshot.objects.get(pk=sound.pk).status == SnapshotStatus.SEALED
    rearchived = archive_fully(Snapshot.objects.get(pk=damaged.pk))
    assert rearchived.status == SnapshotStatus.SEALED
    assert verify_manifest(rearchived.output_dir) == []
    assert title.read_text() != "altered"  # archived again from the live site
    assert list(rearchived.output_dir.glob("history/*/title/title.txt"))  # the altered one kept
    call_command("verify", "--all", "--local-only", stdout=StringIO())  # sound again


def test_retry_command_by_extractor_runs_only_that_extractors_failures(
    live_site: LiveSite,
) -> None:
    snapshot = snapshot_with_a_failure(live_site)
    headers = snapshot.results.get(extractor="headers")
    ArchiveResult.objects.filter(pk=headers.pk).update(status=ResultStatus.FAILED)
    out = StringIO()

    call_command("retry", "--all", "--extractor", "wget", stdout=out)
    assert out.getvalue().startswith("Nothing to retry")
    call_command("retry", "--all", "--extractor", "title", stdout=out)

    assert "Queued 1 failed results of 1 snapshots again." in out.getvalue()
    assert snapshot.results.get(extractor="title").status == ResultStatus.QUEUED
    assert snapshot.results.get(extractor="headers").status == ResultStatus.FAILED


def test_retry_command_refuses_an_unknown_extractor() -> None:
    with pytest.raises(CommandError, match="no extractor 'wgett': one of headers, wget"):
        call_command("retry", "--all", "--extractor", "wgett")
