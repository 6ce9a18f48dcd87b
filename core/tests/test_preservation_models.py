"""State machines and querysets added for preservation: storage copies, fixity checks, results
sent back by the integrity check, and snapshots waiting for them again (DESIGN.md §2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_fsm import TransitionNotAllowed
from model_bakery import baker

from core.choices import CopyStatus, FixityOutcome, ResultStatus, SnapshotStatus
from core.models import ArchiveResult, FixityCheck, Snapshot, StorageCopy
from core.models.preservation import LOCAL
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db


def make_snapshot(status: str = SnapshotStatus.SEALED, **fields) -> Snapshot:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/")
    return baker.make(Snapshot, crawl=crawl, status=status, **fields)


def make_copy(status: str = CopyStatus.QUEUED, snapshot: Snapshot | None = None, **fields):
    fields.setdefault("target", "mirror")
    return baker.make(StorageCopy, snapshot=snapshot or make_snapshot(), status=status, **fields)


def reloaded(record):
    return type(record).objects.get(pk=record.pk)


def seconds_from_now(moment) -> float:
    return (moment - timezone.now()).total_seconds()


# --- StorageCopy -----------------------------------------------------------------------------


@pytest.mark.parametrize("source", [CopyStatus.QUEUED, CopyStatus.BACKOFF])
def test_copy_start_counts_the_attempt(source) -> None:
    copy = make_copy(source, attempts=2)
    copy.start()
    copy.save()
    copy = reloaded(copy)
    assert (copy.status, copy.attempts) == (CopyStatus.STARTED, 3)
    assert copy.start_ts is not None


def test_copy_store_records_what_was_copied_and_when_it_was_verified() -> None:
    copy = make_copy(CopyStatus.STARTED, error="earlier", retry_at=timezone.now())
    copy.store(files=12, size=3456, manifest_sha256="ab" * 32)
    copy.save()
    copy = reloaded(copy)
    assert copy.status == CopyStatus.STORED
    assert (copy.files, copy.size, copy.manifest_sha256) == (12, 3456, "ab" * 32)
    assert copy.error == "" and copy.retry_at is None
    assert copy.verified_at is not None and copy.end_ts is not None


def test_copy_back_off_waits_and_keeps_the_reason() -> None:
    copy = make_copy(CopyStatus.STARTED)
    copy.back_off(error="s3: connection refused", delay=30)
    copy.save()
    copy = reloaded(copy)
    assert copy.status == CopyStatus.BACKOFF
    assert copy.error == "s3: connection refused"
    assert 29 <= seconds_from_now(copy.retry_at) <= 30


@pytest.mark.parametrize("source", [CopyStatus.STARTED, CopyStatus.BACKOFF])
def test_copy_fail_is_final(source) -> None:
    copy = make_copy(source, retry_at=timezone.now())
    copy.fail(error="s3: access denied")
    copy.save()
    copy = reloaded(copy)
    assert copy.status == CopyStatus.FAILED
    assert copy.retry_at is None and copy.error == "s3: access denied"


def test_copy_confirm_only_moves_verified_at() -> None:
    earlier = timezone.now() - timedelta(days=40)
    copy = make_copy(CopyStatus.STORED, verified_at=earlier, retry_at=None)
    copy.confirm()
    copy.save()
    copy = reloaded(copy)
    assert copy.status == CopyStatus.STORED
    assert copy.verified_at > earlier + timedelta(days=39)


def test_copy_flag_marks_a_stored_copy_damaged_with_its_problems() -> None:
    copy = make_copy(CopyStatus.STORED, retry_at=None)
    copy.flag(problems=["mirror: missing: index.json", "mirror: checksum mismatch: a.txt"])
    copy.save()
    copy = reloaded(copy)
    assert copy.status == CopyStatus.DAMAGED
    assert copy.error == "mirror: missing: index.json; mirror: checksum mismatch: a.txt"


def test_copy_recover_counts_a_damaged_copy_found_intact_as_stored() -> None:
    copy = make_copy(CopyStatus.DAMAGED, error="mirror: missing: a.txt", retry_at=None)
    copy.recover()
    copy.save()
    copy = reloaded(copy)
    assert (copy.status, copy.error) == (CopyStatus.STORED, "")
    assert abs(seconds_from_now(copy.verified_at)) < 5


@pytest.mark.parametrize("source", [CopyStatus.STORED, CopyStatus.FAILED, CopyStatus.DAMAGED])
def test_copy_requeue_starts_over_due_now(source) -> None:
    copy = make_copy(source, attempts=10, error="old", retry_at=None)
    copy.requeue()
    copy.save()
    copy = reloaded(copy)
    assert (copy.status, copy.attempts, copy.error) == (CopyStatus.QUEUED, 0, "")
    assert abs(seconds_from_now(copy.retry_at)) < 5


@pytest.mark.parametrize(
    ("source", "transition", "kwargs"),
    [
        (CopyStatus.QUEUED, "store", {"files": 1, "size": 1, "manifest_sha256": ""}),
        (CopyStatus.STORED, "start", {}),
        (CopyStatus.QUEUED, "flag", {"problems": ["x"]}),
        (CopyStatus.DAMAGED, "confirm", {}),
        (CopyStatus.BACKOFF, "requeue", {}),
        (CopyStatus.FAILED, "back_off", {"error": "x", "delay": 1}),
        (CopyStatus.STORED, "recover", {}),
    ],
)
def test_copy_transitions_refuse_other_sources(source, transition, kwargs) -> None:
    copy = make_copy(source)
    with pytest.raises(TransitionNotAllowed):
        getattr(copy, transition)(**kwargs)


def test_copy_status_cannot_be_assigned() -> None:
    copy = make_copy()
    with pytest.raises(AttributeError):
        copy.status = CopyStatus.STORED


def test_copies_of_snapshots_not_sealed_are_not_runnable() -> None:
    sealed = make_copy(snapshot=make_snapshot(SnapshotStatus.SEALED))
    make_copy(snapshot=make_snapshot(SnapshotStatus.QUEUED))  # re-archived meanwhile
    make_copy(CopyStatus.STORED, snapshot=make_snapshot(SnapshotStatus.SEALED), retry_at=None)
    assert list(StorageCopy.objects.runnable()) == [sealed]


def test_one_copy_per_snapshot_and_target() -> None:
    copy = make_copy()
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        StorageCopy.objects.create(snapshot=copy.snapshot, target=copy.target)


# --- ArchiveResult sent back by the integrity check -------------------------------------------


def make_succeeded(**fields) -> ArchiveResult:
    snapshot = make_snapshot(SnapshotStatus.FINALIZING)
    return baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor="screenshot",
        status=ResultStatus.SUCCEEDED,
        output="screenshot.png",
        output_files=["screenshot/screenshot.png"],
        output_size=1234,
        retry_at=None,
        **fields,
    )


def test_result_reject_goes_back_to_backoff_without_its_output() -> None:
    result = make_succeeded(attempts=1)
    result.reject(error="output failed the integrity check: empty", delay=20)
    result.save()
    result = reloaded(result)
    assert result.status == ResultStatus.BACKOFF
    assert (result.output, result.output_files, result.output_size) == ("", [], 0)
    assert result.error == "output failed the integrity check: empty"
    assert result.attempts == 1  # the next start counts the next attempt
    assert 19 <= seconds_from_now(result.retry_at) <= 20


def test_result_reject_finally_fails_it() -> None:
    result = make_succeeded(attempts=3)
    result.reject_finally(error="attempts exhausted (3): corrupt")
    result.save()
    result = reloaded(result)
    assert result.status == ResultStatus.FAILED
    assert result.output_files == [] and result.retry_at is None and result.end_ts is not None


@pytest.mark.parametrize("transition", ["reject", "reject_finally"])
@pytest.mark.parametrize("source", [ResultStatus.FAILED, ResultStatus.SKIPPED, ResultStatus.QUEUED])
def test_only_succeeded_results_can_be_rejected(transition, source) -> None:
    result = make_succeeded()
    result = baker.make(ArchiveResult, snapshot=result.snapshot, extractor="pdf", status=source)
    kwargs = {"error": "x", "delay": 1} if transition == "reject" else {"error": "x"}
    with pytest.raises(TransitionNotAllowed):
        getattr(result, transition)(**kwargs)


# --- Snapshot reopened for its sent-back results -------------------------------------------------


def test_snapshot_reopen_waits_for_results_again() -> None:
    snapshot = make_snapshot(SnapshotStatus.FINALIZING, attempts=1)
    snapshot.reopen(error="corrupt outputs: pdf: empty", delay=5)
    snapshot.save()
    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.STARTED
    assert snapshot.error == "corrupt outputs: pdf: empty"
    assert 4 <= seconds_from_now(snapshot.retry_at) <= 5


@pytest.mark.parametrize("source", [SnapshotStatus.SEALED, SnapshotStatus.STARTED])
def test_snapshot_reopen_only_from_finalizing(source) -> None:
    with pytest.raises(TransitionNotAllowed):
        make_snapshot(source).reopen(error="x", delay=1)


# --- Fixity checks ----------------------------------------------------------------------------


def check(snapshot, location, outcome, minutes_ago) -> FixityCheck:
    return FixityCheck.objects.create(
        snapshot=snapshot,
        location=location,
        outcome=outcome,
        checked_at=timezone.now() - timedelta(minutes=minutes_ago),
    )


def test_a_snapshot_is_flagged_while_its_latest_conclusive_check_somewhere_is_flagged() -> None:
    repaired, damaged, remote_damaged, sound = (make_snapshot() for _ in range(4))
    check(repaired, LOCAL, FixityOutcome.FLAGGED, 10)
    check(repaired, LOCAL, FixityOutcome.OK, 5)
    check(damaged, LOCAL, FixityOutcome.OK, 10)
    check(damaged, LOCAL, FixityOutcome.FLAGGED, 5)
    check(damaged, LOCAL, FixityOutcome.UNREACHABLE, 1)  # says nothing new
    check(remote_damaged, LOCAL, FixityOutcome.OK, 1)
    check(remote_damaged, "s3", FixityOutcome.FLAGGED, 5)
    check(sound, LOCAL, FixityOutcome.OK, 1)

    assert set(Snapshot.objects.flagged()) == {damaged, remote_damaged}


def test_audit_due_lists_sealed_snapshots_not_checked_since_the_cutoff() -> None:
    now = timezone.now()
    never = make_snapshot(end_ts=now - timedelta(days=3))
    stale = make_snapshot(end_ts=now - timedelta(days=90))
    check(stale, LOCAL, FixityOutcome.OK, 60 * 24 * 40)
    fresh = make_snapshot(end_ts=now - timedelta(days=90))
    check(fresh, LOCAL, FixityOutcome.OK, 60)
    only_unreachable = make_snapshot(end_ts=now - timedelta(days=1))
    check(only_unreachable, LOCAL, FixityOutcome.UNREACHABLE, 5)
    make_snapshot(SnapshotStatus.FAILED)

    due = list(Snapshot.objects.audit_due(now - timedelta(days=30)))

    assert due == [stale, never, only_unreachable]  # longest sealed first
    assert fresh not in due


def test_unchecked_lists_sealed_snapshots_no_check_has_read() -> None:
    never = make_snapshot()
    only_unreachable = make_snapshot()
    check(only_unreachable, "s3", FixityOutcome.UNREACHABLE, 1)
    checked = make_snapshot()
    check(checked, "s3", FixityOutcome.FLAGGED, 1)
    make_snapshot(SnapshotStatus.QUEUED)

    assert set(Snapshot.objects.unchecked()) == {never, only_unreachable}
