"""Finalizing's own paths (core/services/finalizing.py): corrupt outputs sent back, packaging
failures, storage copies queued at sealing. The happy path and index.json are in
test_services.py."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.choices import CopyStatus, ResultStatus, SnapshotStatus
from core.folder.wacz import PackagingError
from core.models import ArchiveResult, Snapshot, StorageCopy
from core.services import finalizing
from core.services.copies import copies_queue, copy_tick
from core.services.results import result_tick
from core.services.snapshots import snapshot_check_results, snapshot_tick
from core.tests.test_services import finished_snapshot, make_result, make_snapshot
from core.tests.warcs import write_warc

pytestmark = pytest.mark.django_db

WARC = "wget/warc/archive.warc.gz"


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.MAX_ATTEMPTS = 3
    return settings.ARCHIVE_DIR


def reloaded(record):
    return type(record).objects.get(pk=record.pk)


def snapshot_with_a_truncated_warc(attempts: int) -> tuple[Snapshot, ArchiveResult]:
    snapshot = make_snapshot()
    warc = write_warc(snapshot.output_dir / WARC, snapshot.url, b"<html>" + b"x" * 5000)
    warc.write_bytes(warc.read_bytes()[:-40])
    result = make_result(
        snapshot, "wget", ResultStatus.SUCCEEDED, output="warc/archive.warc.gz",
        output_files=[WARC], attempts=attempts, retry_at=None,
    )  # fmt: skip
    make_result(snapshot, "title", ResultStatus.SUCCEEDED, output="A page", retry_at=None)
    return snapshot, result


def test_a_corrupt_output_sends_its_result_back_and_the_snapshot_waits(settings) -> None:
    snapshot, result = snapshot_with_a_truncated_warc(attempts=1)

    snapshot_check_results(snapshot=snapshot)

    result, snapshot = reloaded(result), reloaded(snapshot)
    assert result.status == ResultStatus.BACKOFF
    assert result.error.startswith(f"output failed the integrity check: {WARC}: ")
    assert result.output_files == [] and result.retry_at > timezone.now()
    assert not (snapshot.output_dir / "wget").exists()  # the corrupt output is gone
    assert snapshot.status == SnapshotStatus.STARTED
    assert snapshot.error.startswith("corrupt outputs: wget: ")
    assert not (snapshot.output_dir / "manifest-sha256.txt").exists()  # never sealed as good


def test_a_result_sent_back_runs_again_and_the_snapshot_then_seals(live_site) -> None:
    snapshot, result = snapshot_with_a_truncated_warc(attempts=1)
    Snapshot.objects.filter(pk=snapshot.pk).update(url=live_site.url("/index.html"))
    snapshot = reloaded(snapshot)
    snapshot_check_results(snapshot=snapshot)

    result_tick(result=reloaded(result))  # its backoff is due or not: a tick runs it
    snapshot_tick(snapshot=reloaded(snapshot))

    result, snapshot = reloaded(result), reloaded(snapshot)
    assert (result.status, result.attempts) == (ResultStatus.SUCCEEDED, 2)
    assert snapshot.status == SnapshotStatus.SEALED


def test_a_corrupt_output_with_no_attempts_left_fails_and_the_rest_seals() -> None:
    snapshot, result = snapshot_with_a_truncated_warc(attempts=3)

    snapshot_check_results(snapshot=snapshot)
    snapshot_tick(snapshot=reloaded(snapshot))  # started again, every result final: finalize

    result, snapshot = reloaded(result), reloaded(snapshot)
    assert result.status == ResultStatus.FAILED
    assert result.error.startswith("attempts exhausted (3): output failed the integrity check")
    assert snapshot.status == SnapshotStatus.SEALED


@pytest.mark.parametrize(("temporary", "status"), [(True, "finalizing"), (False, "failed")])
def test_packaging_failures_retry_only_when_temporary(monkeypatch, temporary, status) -> None:
    def refuse(*args, **kwargs):
        raise PackagingError("py-wacz says no", temporary=temporary)

    monkeypatch.setattr(finalizing, "build_wacz", refuse)
    snapshot = finished_snapshot()

    snapshot_check_results(snapshot=snapshot)

    snapshot = reloaded(snapshot)
    assert snapshot.status == status
    assert snapshot.error == "finalizing failed: py-wacz says no"


class WorkerDied(BaseException):
    """Stands for the end of a worker killed while it finalizes: nothing after it runs."""


def test_the_first_finalizing_attempt_is_counted_in_the_commit_that_starts_it(
    monkeypatch,
) -> None:
    """One write of the snapshot's row, not two, moves it to finalizing and counts the attempt;
    a worker that dies during that attempt has used it up all the same."""

    def die(*args, **kwargs):
        raise WorkerDied

    monkeypatch.setattr(finalizing, "_check_outputs", die)
    snapshot = finished_snapshot()

    with CaptureQueriesContext(connection) as queries, pytest.raises(WorkerDied):
        snapshot_check_results(snapshot=snapshot)

    writes = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "core_snapshot"')]
    assert len(writes) == 1
    snapshot = reloaded(snapshot)
    assert (snapshot.status, snapshot.attempts) == (SnapshotStatus.FINALIZING, 1)


def test_sealing_queues_one_copy_per_target_and_resealing_copies_again(settings) -> None:
    settings.STORAGE_TARGETS = {"mirror": {}, "s3": {}}  # read by name only here
    snapshot = finished_snapshot()

    snapshot_check_results(snapshot=snapshot)

    copies = StorageCopy.objects.filter(snapshot=snapshot)
    assert sorted(copies.values_list("target", "status")) == [
        ("mirror", CopyStatus.QUEUED),
        ("s3", CopyStatus.QUEUED),
    ]
    # The mirror copy is made; the snapshot is then archived again and sealed again.
    StorageCopy.objects.filter(snapshot=snapshot, target="mirror").update(
        status=CopyStatus.STORED, retry_at=None
    )
    copies_queue(snapshot=reloaded(snapshot))
    assert dict(copies.values_list("target", "status")) == {
        "mirror": CopyStatus.QUEUED,
        "s3": CopyStatus.QUEUED,
    }


def test_a_copy_of_a_folder_whose_manifest_is_not_the_one_sealed_fails(settings) -> None:
    settings.STORAGE_TARGETS = {"mirror": {}}  # never reached: the folder is refused first
    snapshot = finished_snapshot()
    snapshot_check_results(snapshot=snapshot)
    manifest = reloaded(snapshot).output_dir / "manifest-sha256.txt"
    manifest.write_bytes(manifest.read_bytes() + b"0" * 64 + b"  planted.txt\n")

    copy_tick(copy=StorageCopy.objects.get(snapshot=snapshot))

    copy = StorageCopy.objects.get(snapshot=snapshot)
    assert copy.status == CopyStatus.FAILED
    assert copy.error.startswith("the local folder's manifest is not the one sealed")


def test_the_title_the_input_gave_is_kept_over_the_pages_own() -> None:
    snapshot = finished_snapshot()
    snapshot.crawl.seed_details = {snapshot.url: {"title": "My bookmark", "tags": []}}
    snapshot.crawl.save()

    snapshot_check_results(snapshot=snapshot)

    sealed = reloaded(snapshot)
    assert (sealed.status, sealed.title) == (SnapshotStatus.SEALED, "My bookmark")
    assert (sealed.output_dir / "title" / "title.txt").read_text() == "Vellum Test Home\n"


def test_without_a_given_title_the_pages_own_is_the_snapshots() -> None:
    snapshot = finished_snapshot()

    snapshot_check_results(snapshot=snapshot)

    assert reloaded(snapshot).title == "Vellum Test Home"


def test_what_a_killed_warc_rewrite_left_beside_the_warc_is_removed() -> None:
    snapshot = finished_snapshot()
    warcs = snapshot.output_dir / "wget/warc"
    # mkstemp's file of rewrite_warc, and dedup's renamed one, as a killed actor leaves them
    (warcs / ".tmp-iiyvbij6.warc.gz").write_bytes(b"\x1f\x8b half a WARC")
    (warcs / ".tmp-dedup-archive.warc.gz").write_bytes(b"\x1f\x8b half a WARC")

    snapshot_check_results(snapshot=snapshot)

    assert reloaded(snapshot).status == SnapshotStatus.SEALED
    assert sorted(path.name for path in warcs.iterdir()) == ["archive.warc.gz"]
