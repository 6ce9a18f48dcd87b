"""The Snapshot and ArchiveResult state machines, their constraints and querysets (DESIGN.md §2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed, can_proceed
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.models import ArchiveResult, Snapshot
from crawls.choices import CrawlStatus, StepBehaviour
from crawls.models import Crawl
from crawls.profiles import PlannedStep

pytestmark = pytest.mark.django_db


def make_crawl(status: str = CrawlStatus.STARTED, **fields) -> Crawl:
    return baker.make(Crawl, status=status, seeds="http://a.example/", **fields)


def make_snapshot(status: str = SnapshotStatus.QUEUED, crawl: Crawl | None = None, **fields):
    return baker.make(Snapshot, crawl=crawl or make_crawl(), status=status, **fields)


def make_result(status: str = ResultStatus.QUEUED, snapshot: Snapshot | None = None, **fields):
    fields.setdefault("extractor", "title")
    return baker.make(
        ArchiveResult,
        snapshot=snapshot or make_snapshot(SnapshotStatus.STARTED),
        status=status,
        **fields,
    )


def reloaded(record):
    return type(record).objects.get(pk=record.pk)


def run_output(**fields) -> ExtractorOutput:
    defaults = {
        "outcome": Outcome.SUCCEEDED,
        "output": "Page title",
        "cmd": ["/usr/bin/curl", "--silent", "http://a.example/"],
        "cmd_version": "curl 8.0.0",
        "exit_code": 0,
    }
    return ExtractorOutput(**{**defaults, **fields})


def seconds_from_now(moment) -> float:
    return (moment - timezone.now()).total_seconds()


# --- Snapshot transitions ------------------------------------------------------------------------


def test_snapshot_start() -> None:
    snapshot = make_snapshot(end_ts=timezone.now())
    before = timezone.now()

    snapshot.start()
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.STARTED
    assert snapshot.start_ts >= before
    assert snapshot.end_ts is None


def test_snapshot_finish_when_every_result_is_final() -> None:
    snapshot = make_snapshot(SnapshotStatus.STARTED, attempts=2)
    for extractor, status in [
        ("title", ResultStatus.SUCCEEDED),
        ("wget", ResultStatus.FAILED),
        ("favicon", ResultStatus.SKIPPED),
    ]:
        make_result(status, snapshot, extractor=extractor)

    snapshot.finish()
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.FINALIZING
    assert snapshot.attempts == 0


@pytest.mark.parametrize(
    "active", [ResultStatus.QUEUED, ResultStatus.STARTED, ResultStatus.BACKOFF]
)
def test_snapshot_finish_is_refused_while_a_result_is_active(active: str) -> None:
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    make_result(ResultStatus.SUCCEEDED, snapshot, extractor="title")
    make_result(active, snapshot, extractor="wget")

    assert not can_proceed(snapshot.finish)
    with pytest.raises(TransitionNotAllowed):
        snapshot.finish()
    assert snapshot.status == SnapshotStatus.STARTED


def test_snapshot_begin_finalizing_counts_the_attempt_up_front() -> None:
    snapshot = make_snapshot(SnapshotStatus.FINALIZING, attempts=1)

    snapshot.begin_finalizing()
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.FINALIZING
    assert snapshot.attempts == 2


def test_snapshot_retry_finalizing_keeps_the_reason_and_waits() -> None:
    snapshot = make_snapshot(SnapshotStatus.FINALIZING, attempts=1)

    snapshot.retry_finalizing(error="finalizing failed: disk full", delay=30)
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.FINALIZING
    assert snapshot.attempts == 1  # counted by begin_finalizing, not twice
    assert snapshot.error == "finalizing failed: disk full"
    assert 29 <= seconds_from_now(snapshot.retry_at) <= 30


def test_snapshot_seal_records_the_manifest_digest_and_signer() -> None:
    snapshot = make_snapshot(
        SnapshotStatus.FINALIZING, error="earlier trouble", retry_at=timezone.now()
    )
    digest = "ab" * 32

    snapshot.seal(manifest_sha256=digest, signed_by="sha256:" + "cd" * 32)
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.manifest_sha256 == digest
    assert snapshot.signed_by == "sha256:" + "cd" * 32
    assert snapshot.error == ""
    assert snapshot.retry_at is None
    assert snapshot.end_ts is not None


def test_snapshot_fail_keeps_the_reason() -> None:
    snapshot = make_snapshot(SnapshotStatus.FINALIZING, retry_at=timezone.now())

    snapshot.fail(error="finalizing failed: read-only file system")
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.FAILED
    assert snapshot.error == "finalizing failed: read-only file system"
    assert snapshot.retry_at is None
    assert snapshot.end_ts is not None


@pytest.mark.parametrize("final", [SnapshotStatus.SEALED, SnapshotStatus.FAILED])
def test_snapshot_rearchive_queues_a_final_snapshot_again(final: str) -> None:
    snapshot = make_snapshot(final, attempts=3, error="old reason", retry_at=None)
    before = timezone.now()

    snapshot.rearchive()
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.QUEUED
    assert snapshot.attempts == 0
    assert snapshot.error == ""
    assert before <= snapshot.retry_at <= timezone.now()


@pytest.mark.parametrize("final", [SnapshotStatus.SEALED, SnapshotStatus.FAILED])
def test_snapshot_retry_failed_restarts_a_final_snapshot(final: str) -> None:
    snapshot = make_snapshot(final, attempts=3, error="old", retry_at=None, end_ts=timezone.now())
    before = timezone.now()

    snapshot.retry_failed()
    snapshot.save()

    snapshot = reloaded(snapshot)
    assert snapshot.status == SnapshotStatus.STARTED
    assert (snapshot.attempts, snapshot.error, snapshot.end_ts) == (0, "", None)
    assert before <= snapshot.retry_at <= timezone.now()


@pytest.mark.parametrize(
    ("source", "transition", "kwargs"),
    [
        (SnapshotStatus.QUEUED, "finish", {}),
        (SnapshotStatus.QUEUED, "seal", {"manifest_sha256": ""}),
        (SnapshotStatus.QUEUED, "fail", {"error": "x"}),
        (SnapshotStatus.QUEUED, "rearchive", {}),
        (SnapshotStatus.STARTED, "start", {}),
        (SnapshotStatus.STARTED, "seal", {"manifest_sha256": ""}),
        (SnapshotStatus.STARTED, "retry_finalizing", {"error": "x", "delay": 1}),
        (SnapshotStatus.STARTED, "fail", {"error": "x"}),
        (SnapshotStatus.FINALIZING, "start", {}),
        (SnapshotStatus.FINALIZING, "finish", {}),
        (SnapshotStatus.FINALIZING, "rearchive", {}),
        (SnapshotStatus.SEALED, "start", {}),
        (SnapshotStatus.SEALED, "seal", {"manifest_sha256": ""}),
        (SnapshotStatus.SEALED, "fail", {"error": "x"}),
        (SnapshotStatus.FAILED, "retry_finalizing", {"error": "x", "delay": 1}),
        (SnapshotStatus.QUEUED, "begin_finalizing", {}),
        (SnapshotStatus.STARTED, "begin_finalizing", {}),
        (SnapshotStatus.SEALED, "begin_finalizing", {}),
        (SnapshotStatus.QUEUED, "retry_failed", {}),
        (SnapshotStatus.STARTED, "retry_failed", {}),
        (SnapshotStatus.FINALIZING, "retry_failed", {}),
        (SnapshotStatus.FAILED, "seal", {"manifest_sha256": ""}),
    ],
)
def test_disallowed_snapshot_transition_raises(source: str, transition: str, kwargs: dict) -> None:
    snapshot = make_snapshot(source)

    with pytest.raises(TransitionNotAllowed):
        getattr(snapshot, transition)(**kwargs)
    assert snapshot.status == source


def test_snapshot_status_cannot_be_assigned() -> None:
    snapshot = reloaded(make_snapshot())

    with pytest.raises(AttributeError):
        snapshot.status = SnapshotStatus.SEALED


def test_two_copies_of_one_snapshot_cannot_both_transition() -> None:
    snapshot = make_snapshot()
    first, second = reloaded(snapshot), reloaded(snapshot)
    first.start()
    first.save()

    second.start()
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        second.save()


# --- ArchiveResult transitions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "attempts"), [(ResultStatus.QUEUED, 0), (ResultStatus.BACKOFF, 1)]
)
def test_result_start_counts_the_attempt(source: str, attempts: int) -> None:
    result = make_result(source, attempts=attempts, end_ts=timezone.now())
    before = timezone.now()

    result.start()
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.STARTED
    assert result.attempts == attempts + 1
    assert result.start_ts >= before
    assert result.end_ts is None


def test_result_succeed_records_the_run() -> None:
    result = make_result(
        ResultStatus.STARTED, attempts=1, error="old error", retry_at=timezone.now()
    )
    output = run_output()

    result.succeed(output=output, files=["title/title.txt", "title/curl.log"], size=123)
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.SUCCEEDED
    assert result.cmd == ["/usr/bin/curl", "--silent", "http://a.example/"]
    assert result.cmd_version == "curl 8.0.0"
    assert result.exit_code == 0
    assert result.output == "Page title"
    assert result.output_files == ["title/title.txt", "title/curl.log"]
    assert result.output_size == 123
    assert result.error == ""
    assert result.retry_at is None
    assert result.end_ts is not None


@pytest.mark.parametrize("source", [ResultStatus.QUEUED, ResultStatus.STARTED])
def test_result_skip_keeps_the_reason(source: str) -> None:
    result = make_result(source, retry_at=timezone.now())

    result.skip(reason="curl not found")
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.SKIPPED
    assert result.error == "curl not found"
    assert result.retry_at is None
    assert result.end_ts is not None


def test_result_skip_with_output_records_the_command() -> None:
    result = make_result(ResultStatus.STARTED)

    result.skip(reason="not HTML (application/json)", output=run_output(exit_code=0))

    assert result.cmd_version == "curl 8.0.0"
    assert result.exit_code == 0


def test_result_back_off_waits_the_delay() -> None:
    result = make_result(ResultStatus.STARTED, attempts=1)

    result.back_off(
        error="HTTP 503 from http://a.example/", delay=40, output=run_output(exit_code=0)
    )
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.BACKOFF
    assert result.error == "HTTP 503 from http://a.example/"
    assert 39 <= seconds_from_now(result.retry_at) <= 40
    assert result.attempts == 1
    assert result.end_ts is None
    assert result.cmd_version == "curl 8.0.0"


@pytest.mark.parametrize("source", [ResultStatus.STARTED, ResultStatus.BACKOFF])
def test_result_fail_is_final_with_its_reason(source: str) -> None:
    result = make_result(source, retry_at=timezone.now())

    result.fail(error="HTTP 404 from http://a.example/")
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.FAILED
    assert result.error == "HTTP 404 from http://a.example/"
    assert result.retry_at is None
    assert result.end_ts is not None


@pytest.mark.parametrize("final", [ResultStatus.FAILED, ResultStatus.SKIPPED])
def test_result_retry_queues_it_with_fresh_attempts(final: str) -> None:
    result = make_result(final, attempts=3, error="attempts exhausted (3)", retry_at=None)
    before = timezone.now()

    result.retry()
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.QUEUED
    assert result.attempts == 0
    assert result.error == ""
    assert before <= result.retry_at <= timezone.now()


@pytest.mark.parametrize("final", ResultStatus.final())
def test_result_rearchive_keeps_the_earlier_run_in_history(final: str) -> None:
    started = timezone.now() - timedelta(minutes=5)
    result = make_result(
        final,
        extractor="headers",
        attempts=2,
        cmd=["curl", "http://a.example/"],
        cmd_version="curl 7.88.1",
        exit_code=0,
        output="headers.json",
        output_files=["headers/headers.json"],
        output_size=120,
        error="",
        start_ts=started,
        end_ts=started + timedelta(seconds=1),
        retry_at=None,
    )
    before = timezone.now()

    result.rearchive(moved_to="history/20261121T100000.000000Z")
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.QUEUED
    assert before <= result.retry_at <= timezone.now()
    assert (result.attempts, result.cmd, result.output, result.output_files) == (0, [], "", [])
    assert (result.output_size, result.exit_code, result.start_ts) == (0, None, None)
    assert result.history == [
        {
            "output_dir": "history/20261121T100000.000000Z/headers",
            "status": final,
            "attempts": 2,
            "cmd": ["curl", "http://a.example/"],
            "cmd_version": "curl 7.88.1",
            "exit_code": 0,
            "output": "headers.json",
            "output_files": ["history/20261121T100000.000000Z/headers/headers.json"],
            "output_size": 120,
            "error": "",
            "start_ts": started.isoformat(),
            "end_ts": (started + timedelta(seconds=1)).isoformat(),
        }
    ]


def test_result_rearchive_appends_to_earlier_history() -> None:
    result = make_result(ResultStatus.SUCCEEDED, history=[{"status": "failed"}], retry_at=None)

    result.rearchive(moved_to="history/run2")
    result.save()

    assert [run["status"] for run in reloaded(result).history] == ["failed", "succeeded"]


@pytest.mark.parametrize(
    ("source", "transition", "kwargs"),
    [
        (ResultStatus.QUEUED, "rearchive", {"moved_to": "history/x"}),
        (ResultStatus.STARTED, "rearchive", {"moved_to": "history/x"}),
        (ResultStatus.BACKOFF, "rearchive", {"moved_to": "history/x"}),
        (ResultStatus.QUEUED, "succeed", {"output": None, "files": [], "size": 0}),
        (ResultStatus.QUEUED, "back_off", {"error": "x", "delay": 1}),
        (ResultStatus.QUEUED, "fail", {"error": "x"}),
        (ResultStatus.QUEUED, "retry", {}),
        (ResultStatus.STARTED, "start", {}),
        (ResultStatus.STARTED, "retry", {}),
        (ResultStatus.BACKOFF, "succeed", {"output": None, "files": [], "size": 0}),
        (ResultStatus.BACKOFF, "skip", {"reason": "x"}),
        (ResultStatus.BACKOFF, "back_off", {"error": "x", "delay": 1}),
        (ResultStatus.SUCCEEDED, "start", {}),
        (ResultStatus.SUCCEEDED, "fail", {"error": "x"}),
        (ResultStatus.SUCCEEDED, "retry", {}),
        (ResultStatus.SUCCEEDED, "skip", {"reason": "x"}),
        (ResultStatus.FAILED, "start", {}),
        (ResultStatus.FAILED, "fail", {"error": "x"}),
        (ResultStatus.SKIPPED, "start", {}),
        (ResultStatus.SKIPPED, "skip", {"reason": "x"}),
    ],
)
def test_disallowed_result_transition_raises(source: str, transition: str, kwargs: dict) -> None:
    result = make_result(source)

    with pytest.raises(TransitionNotAllowed):
        getattr(result, transition)(**kwargs)
    assert result.status == source


def test_result_status_cannot_be_assigned() -> None:
    result = reloaded(make_result())

    with pytest.raises(AttributeError):
        result.status = ResultStatus.SUCCEEDED


# --- constraints ---------------------------------------------------------------------------------


def test_one_result_per_snapshot_and_extractor() -> None:
    result = make_result(extractor="wget")
    make_result(snapshot=result.snapshot, extractor="title")

    with pytest.raises(IntegrityError), transaction.atomic():
        ArchiveResult.objects.create(snapshot=result.snapshot, extractor="wget")


def test_the_same_extractor_may_run_on_another_snapshot() -> None:
    result = make_result(extractor="wget")

    make_result(snapshot=make_snapshot(crawl=result.snapshot.crawl), extractor="wget")

    assert ArchiveResult.objects.filter(extractor="wget").count() == 2


def test_one_snapshot_per_crawl_and_url() -> None:
    crawl = make_crawl()
    make_snapshot(crawl=crawl, url="http://a.example/")

    with pytest.raises(IntegrityError), transaction.atomic():
        Snapshot.objects.create(crawl=crawl, url="http://a.example/")


def test_the_same_url_may_be_archived_in_another_crawl() -> None:
    make_snapshot(url="http://a.example/")

    make_snapshot(url="http://a.example/")

    assert Snapshot.objects.filter(url="http://a.example/").count() == 2


# --- querysets -----------------------------------------------------------------------------------


def test_snapshot_due_excludes_future_final_and_held() -> None:
    past = timezone.now() - timedelta(seconds=5)
    future = timezone.now() + timedelta(minutes=5)
    running = make_crawl(CrawlStatus.STARTED)
    held = make_crawl(CrawlStatus.HELD)
    due = [
        make_snapshot(SnapshotStatus.QUEUED, running, retry_at=past),
        make_snapshot(SnapshotStatus.STARTED, running, retry_at=past),
        make_snapshot(SnapshotStatus.FINALIZING, running, retry_at=past),
    ]
    make_snapshot(SnapshotStatus.QUEUED, running, retry_at=future)
    make_snapshot(SnapshotStatus.QUEUED, running, retry_at=None)
    make_snapshot(SnapshotStatus.SEALED, running, retry_at=past)
    make_snapshot(SnapshotStatus.FAILED, running, retry_at=past)
    make_snapshot(SnapshotStatus.QUEUED, held, retry_at=past)

    assert set(Snapshot.objects.due()) == set(due)


def test_result_due_excludes_future_final_and_held() -> None:
    past = timezone.now() - timedelta(seconds=5)
    future = timezone.now() + timedelta(minutes=5)
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    held_snapshot = make_snapshot(SnapshotStatus.STARTED, make_crawl(CrawlStatus.HELD))
    names = iter(["a", "b", "c", "d", "e", "f", "g", "h"])
    due = [
        make_result(status, snapshot, extractor=next(names), retry_at=past)
        for status in ResultStatus.active()
    ]
    make_result(ResultStatus.BACKOFF, snapshot, extractor=next(names), retry_at=future)
    for status in ResultStatus.final():
        make_result(status, snapshot, extractor=next(names), retry_at=past)
    make_result(ResultStatus.QUEUED, held_snapshot, extractor="title", retry_at=past)

    assert set(ArchiveResult.objects.due()) == set(due)


def test_due_takes_the_moment_to_compare_with() -> None:
    in_a_minute = timezone.now() + timedelta(minutes=1)
    snapshot = make_snapshot(retry_at=in_a_minute)

    assert not Snapshot.objects.due().exists()
    assert list(Snapshot.objects.due(in_a_minute + timedelta(seconds=1))) == [snapshot]


def test_claim_order_is_priority_first_then_oldest_retry_at() -> None:
    now = timezone.now()
    crawl = make_crawl()
    low_old = make_snapshot(crawl=crawl, priority=0, retry_at=now - timedelta(hours=1))
    low_new = make_snapshot(crawl=crawl, priority=0, retry_at=now - timedelta(minutes=1))
    high_new = make_snapshot(crawl=crawl, priority=5, retry_at=now - timedelta(seconds=1))
    high_old = make_snapshot(crawl=crawl, priority=5, retry_at=now - timedelta(minutes=30))
    urgent = make_snapshot(crawl=crawl, priority=9, retry_at=now - timedelta(seconds=2))

    ordered = list(Snapshot.objects.due().claim_order())

    assert ordered == [urgent, high_old, high_new, low_old, low_new]


def test_claim_order_takes_a_result_whose_lease_ran_out_before_the_queue() -> None:
    """A result still started after its lease lost its worker: it is recovered first, whatever
    the queue holds (nothing stays started much past its lease)."""
    now = timezone.now()
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    waiting = [
        make_result(ResultStatus.QUEUED, snapshot, extractor=name, priority=5, retry_at=now - age)
        for name, age in [("wget", timedelta(hours=1)), ("title", timedelta(minutes=1))]
    ]
    orphan = make_result(
        ResultStatus.STARTED, snapshot, extractor="favicon", retry_at=now - timedelta(seconds=1)
    )

    ordered = list(ArchiveResult.objects.due().claim_order())

    assert ordered == [orphan, *waiting]


@pytest.mark.parametrize(
    ("dom_status", "readability_runs"),
    [
        (ResultStatus.QUEUED, False),
        (ResultStatus.STARTED, False),
        (ResultStatus.BACKOFF, False),
        (ResultStatus.SUCCEEDED, True),
        (ResultStatus.FAILED, True),
        (ResultStatus.SKIPPED, True),
    ],
)
def test_a_result_waits_until_what_it_depends_on_is_final(dom_status, readability_runs) -> None:
    """readability depends_on dom (DESIGN.md §4): it is not due while dom may still write."""
    past = timezone.now() - timedelta(seconds=1)
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    make_result(dom_status, snapshot, extractor="dom", retry_at=past)
    readability = make_result(
        ResultStatus.QUEUED, snapshot, extractor="readability", depends_on=",dom,", retry_at=past
    )
    title = make_result(ResultStatus.QUEUED, snapshot, extractor="title", retry_at=past)
    # Another snapshot's dom does not hold this one's readability back, nor the reverse.
    other = make_snapshot(SnapshotStatus.STARTED)
    make_result(ResultStatus.QUEUED, other, extractor="dom", retry_at=past)

    due = set(ArchiveResult.objects.due())

    assert title in due
    assert (readability in due) is readability_runs


def test_a_result_whose_dependency_is_not_in_the_profile_runs() -> None:
    past = timezone.now() - timedelta(seconds=1)
    readability = make_result(
        ResultStatus.QUEUED, extractor="readability", depends_on=",dom,", retry_at=past
    )

    assert list(ArchiveResult.objects.due()) == [readability]


def test_claimable_holds_queued_snapshots_back_while_the_window_is_full(settings) -> None:
    settings.MAX_STARTED_SNAPSHOTS = 2
    crawl = make_crawl()
    queued = make_snapshot(crawl=crawl, url="http://a.example/q")
    first = make_snapshot(SnapshotStatus.STARTED, crawl, url="http://a.example/1")

    assert set(Snapshot.objects.claimable()) == {queued, first}

    second = make_snapshot(SnapshotStatus.STARTED, crawl, url="http://a.example/2")
    finalizing = make_snapshot(SnapshotStatus.FINALIZING, crawl, url="http://a.example/f")

    assert set(Snapshot.objects.claimable()) == {first, second, finalizing}
    assert queued in Snapshot.objects.due()


def test_final_and_for_crawl() -> None:
    crawl = make_crawl()
    sealed = make_snapshot(SnapshotStatus.SEALED, crawl)
    failed = make_snapshot(SnapshotStatus.FAILED, crawl)
    started = make_snapshot(SnapshotStatus.STARTED, crawl)
    make_snapshot(SnapshotStatus.SEALED)

    assert set(Snapshot.objects.for_crawl(crawl)) == {sealed, failed, started}
    assert set(Snapshot.objects.for_crawl(crawl).final()) == {sealed, failed}
    done = make_result(ResultStatus.SKIPPED, started, extractor="a")
    make_result(ResultStatus.BACKOFF, started, extractor="b")
    assert list(ArchiveResult.objects.final()) == [done]


def test_output_dir_is_the_snapshot_folder(settings) -> None:
    snapshot = make_snapshot()

    assert snapshot.output_dir == settings.ARCHIVE_DIR / str(snapshot.pk)


# --- results that wait for others ----------------------------------------------------------------


def test_for_step_makes_a_step_that_waits_due_at_the_next_poll_and_one_that_does_not_now(
    settings,
) -> None:
    settings.POLL_INTERVAL = 30
    snapshot = make_snapshot(SnapshotStatus.STARTED, priority=3)
    before = timezone.now()

    waiting = ArchiveResult.for_step(snapshot, PlannedStep("title", depends_on=("wget", "dom")))
    alone = ArchiveResult.for_step(snapshot, PlannedStep("wget", behaviour=StepBehaviour.BLOCKING))

    after = timezone.now()
    poll = timedelta(seconds=30)
    assert waiting.depends_on == ",wget,dom,"
    assert before + poll <= waiting.retry_at <= after + poll
    assert alone.depends_on == ""
    assert before <= alone.retry_at <= after
    assert alone.behaviour == StepBehaviour.BLOCKING
    assert (waiting.priority, alone.priority) == (3, 3)
    assert waiting.pk is None and alone.pk is None  # unsaved


def wget_ended(snapshot: Snapshot, how: str) -> ArchiveResult:
    """Run snapshot's wget result to a final state by its transitions (``how``: succeed, fail),
    saved; return it."""
    wget = make_result(ResultStatus.QUEUED, snapshot, extractor="wget", retry_at=timezone.now())
    wget.start()
    if how == "succeed":
        wget.succeed(output=run_output(), files=["warc/page.warc.gz"], size=10)
    else:
        wget.fail(error="404 Not Found")
    wget.save()
    return wget


@pytest.mark.parametrize("how", ["succeed", "fail"])
def test_the_end_of_a_result_makes_due_the_results_waiting_for_it_that_are_not_leased(
    settings, how: str
) -> None:
    settings.POLL_INTERVAL = 30
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    poll = timezone.now() + timedelta(seconds=30)  # as for_step makes them
    lease = timezone.now() + timedelta(seconds=1234)  # another actor's
    title = make_result(snapshot=snapshot, extractor="title", depends_on=",wget,", retry_at=poll)
    both = make_result(snapshot=snapshot, extractor="media", depends_on=",wget,dom,", retry_at=poll)
    leased = make_result(
        snapshot=snapshot, extractor="favicon", depends_on=",wget,", retry_at=lease
    )
    other_step = make_result(
        snapshot=snapshot, extractor="readability", depends_on=",dom,", retry_at=poll
    )
    other_snapshot = make_result(extractor="title", depends_on=",wget,", retry_at=poll)
    make_result(ResultStatus.STARTED, snapshot, extractor="dom", retry_at=lease)  # running
    before = timezone.now()

    wget_ended(snapshot, how)

    after = timezone.now()
    for woken in (title, both):  # both: due, though still not runnable until dom ends
        assert before <= reloaded(woken).retry_at <= after
    assert reloaded(leased).retry_at == lease  # its actor's lease stands
    assert reloaded(other_step).retry_at == poll
    assert reloaded(other_snapshot).retry_at == poll
    assert reloaded(title) in ArchiveResult.objects.due()
    assert reloaded(both) not in ArchiveResult.objects.due()


def test_a_result_that_backs_off_wakes_none_of_the_results_waiting_for_it(settings) -> None:
    settings.POLL_INTERVAL = 30
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    poll = timezone.now() + timedelta(seconds=30)
    title = make_result(snapshot=snapshot, extractor="title", depends_on=",wget,", retry_at=poll)
    wget = make_result(ResultStatus.QUEUED, snapshot, extractor="wget", retry_at=timezone.now())

    wget.start()
    wget.save()
    wget.back_off(error="timed out", delay=60)
    wget.save()

    assert reloaded(title).retry_at == poll


def test_waiting_only_for_takes_results_waiting_for_that_step_alone_and_not_leased(
    settings,
) -> None:
    settings.POLL_INTERVAL = 30
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    now = timezone.now()
    poll = now + timedelta(seconds=30)
    title = make_result(snapshot=snapshot, extractor="title", depends_on=",wget,", retry_at=poll)
    backoff = make_result(
        ResultStatus.BACKOFF, snapshot, extractor="favicon", depends_on=",wget,", retry_at=now
    )
    make_result(snapshot=snapshot, extractor="media", depends_on=",wget,dom,", retry_at=poll)
    make_result(snapshot=snapshot, extractor="readability", depends_on=",dom,", retry_at=poll)
    make_result(
        ResultStatus.SUCCEEDED, snapshot, extractor="outlinks", depends_on=",wget,", retry_at=None
    )
    make_result(
        snapshot=snapshot,
        extractor="htmltotext",
        depends_on=",wget,",
        retry_at=now + timedelta(seconds=1234),  # leased
    )
    make_result(  # its worker died, its lease ran out: recovered by a claim of its own
        ResultStatus.STARTED,
        extractor="title",
        depends_on=",wget,",
        retry_at=now - timedelta(seconds=1),
    )
    held = make_crawl(CrawlStatus.HELD)
    make_result(
        snapshot=make_snapshot(SnapshotStatus.STARTED, held),
        extractor="title",
        depends_on=",wget,",
        retry_at=poll,
    )

    assert set(ArchiveResult.objects.waiting_only_for("wget")) == {title, backoff}
    # ``not_leased``: the moment past which a retry_at is a lease.
    assert set(ArchiveResult.objects.waiting_only_for("wget", now)) == {backoff}


def test_the_end_of_a_result_leaves_a_running_reader_under_its_lease(settings) -> None:
    """A reader started again (a retry) while what it reads was re-run: its lease may lie
    within the next poll near its end, and making it due would let another actor recover it
    as if its worker had died."""
    settings.POLL_INTERVAL = 30
    snapshot = make_snapshot(SnapshotStatus.STARTED)
    ending = timezone.now() + timedelta(seconds=10)  # the last seconds of its lease
    running = make_result(
        ResultStatus.STARTED, snapshot, extractor="title", depends_on=",wget,", retry_at=ending
    )

    wget_ended(snapshot, "succeed")

    assert reloaded(running).retry_at == ending
    assert reloaded(running).status == ResultStatus.STARTED
