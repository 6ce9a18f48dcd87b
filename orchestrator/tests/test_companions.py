"""One visit per page: a claim of a result whose extractor shares the browser's visit takes the
same snapshot's other such results with it (orchestrator/claims.py ``claim_companions``,
orchestrator/work.py ``_visit_companions``), and the actor runs them right after it
(orchestrator/actor.py).

The claim tests call the claims in this process with the real archive-result work type; the
actor tests tick a real Actor whose tick service is replaced by one that records what it ran
(the extractors themselves have their own tests); the end-to-end test runs a crawl of the
screenshot, pdf and dom with four result actors and counts the browser's requests at the server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection, transaction
from django.utils import timezone
from model_bakery import baker

from archive.testing import shared_database_url
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.models import ArchiveResult, Snapshot
from core.tests.site import LiveSite
from core.tests.test_hosts import result_on, snapshot_on
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from crawls.seeds import normalize_url
from orchestrator.actor import Actor
from orchestrator.claimlog import read_events, read_holds
from orchestrator.claims import claim_companions, claim_next_with_companions, reload_claimed
from orchestrator.retries import next_poll
from orchestrator.tests.test_orchestrator import CRAWL_TIMEOUT, Vellum
from orchestrator.work import WorkType, _companion_tick, work_types

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUTS = {"screenshot": 60, "pdf": 70, "dom": 80, "singlefile": 90, "wget": 40, "title": 20}
MARGIN = 5
BROWSER_AGENT = "VellumCompanionTest/1 (Chromium)"


@pytest.fixture(autouse=True)
def _timeouts(settings, tmp_path: Path) -> None:
    """Distinct extractor timeouts, so that each lease in a chain shows whose it is, and a
    claims log of this test's own."""
    settings.EXTRACTOR_OPTIONS = {name: {"timeout": t} for name, t in TIMEOUTS.items()}
    settings.LEASE_MARGIN = MARGIN
    settings.LOGS_DIR = tmp_path / "logs"


def results_kind() -> WorkType:
    return work_types()["archiveresult"]


def started_snapshot() -> Snapshot:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    return baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.STARTED)


def due_results(snapshot: Snapshot, *names: str, **fields) -> dict[str, ArchiveResult]:
    """One queued result per extractor of ``names``, due in that order (the first longest)."""
    now = timezone.now()
    return {
        name: baker.make(
            ArchiveResult,
            snapshot=snapshot,
            extractor=name,
            retry_at=now - timedelta(seconds=100 - index),
            **fields,
        )
        for index, name in enumerate(names)
    }


def claim(kind: WorkType | None = None, *, admit: bool = False, **overrides) -> list[ArchiveResult]:
    """Claim as ``kind``'s actor does (results by default), with its admission if ``admit``."""
    kind = kind or results_kind()
    return claim_next_with_companions(
        kind.model,
        lease_seconds=overrides.get("lease_seconds", kind.lease_seconds),
        lease_fields=kind.lease_fields,
        related=kind.related,
        companions=kind.companions,
        admit=kind.admit if admit else None,
    )


def lease_of(name: str) -> timedelta:
    return timedelta(seconds=TIMEOUTS[name] + MARGIN)


def reloaded(result: ArchiveResult) -> ArchiveResult:
    return ArchiveResult.objects.get(pk=result.pk)


# --- claiming ------------------------------------------------------------------------------------


def test_one_claim_takes_the_visit_sharing_results_of_the_snapshot_with_leases_end_to_end() -> None:
    due_results(started_snapshot(), "screenshot", "pdf", "dom", "wget")
    before = timezone.now()

    claimed = claim()

    after = timezone.now()
    assert [r.extractor for r in claimed] == ["screenshot", "pdf", "dom"]
    first, second, third = (r.retry_at for r in claimed)
    assert before + lease_of("screenshot") <= first <= after + lease_of("screenshot")
    assert second == first + lease_of("pdf")  # screenshot's lease, then pdf's own
    assert third == second + lease_of("dom")
    for result in claimed:
        stored = reloaded(result)
        assert stored.retry_at == result.retry_at
        assert stored.status == ResultStatus.QUEUED  # claiming leases; the tick transitions
    assert [r.extractor for r in claim()] == ["wget"]  # the three are held; wget is no companion


def test_companions_come_without_the_crawl_fields_that_grow_with_the_crawl() -> None:
    due_results(started_snapshot(), "screenshot", "pdf")

    first, companion = claim()
    again = reload_claimed(companion, lease_end=companion.retry_at, related=("snapshot__crawl",))

    # As the claimed record itself (orchestrator/prepared.py with_related): read when used.
    # A companion is claimed as its row was read, and loaded so right before it runs.
    assert "snapshot" not in companion._state.fields_cache
    for record in (first, again):
        assert record.snapshot.crawl.get_deferred_fields() == {"seeds", "seed_details"}


def test_the_companions_share_the_place_their_first_takes_on_a_host_that_is_then_full(
    settings,
) -> None:
    # The first one started makes its host full; its companions are the same visit of the
    # same page, in the same actor, and take no place of their own. Left unclaimed, each would
    # be claimed by another actor once the host has room, and load the page again.
    settings.HOST_CONCURRENCY = 2
    result_on("full.example", status=ResultStatus.STARTED, extractor="wget")  # another page
    due_results(snapshot_on("full.example"), "screenshot", "pdf", "dom")

    claimed = claim(admit=True)

    assert [r.extractor for r in claimed] == ["screenshot", "pdf", "dom"]
    assert reloaded(claimed[0]).status == ResultStatus.STARTED  # admitted: the host's second
    assert claim() == []  # and the host is full for anything else


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's database-wide write lock")
def test_a_claim_that_finds_nothing_due_leaves_the_write_lock_alone() -> None:
    # A ping wakes every idle actor and one takes the work: the others, finding nothing, must
    # not queue for the write lock to learn it (and make every writer wait meanwhile).
    result_on("busy.example", status=ResultStatus.STARTED, extractor="wget")  # nothing due
    writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another actor, recording a result
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout = 0")  # a wait for the lock fails at once
        claimed = claim(admit=True)
    finally:
        writer.rollback()
        writer.close()
        connection.close()  # the next query reconnects with the configured busy timeout

    assert claimed == []


def test_the_companions_are_claimed_in_claim_order_whichever_result_comes_first() -> None:
    snapshot = started_snapshot()
    results = due_results(snapshot, "dom", "singlefile", "screenshot", "pdf")

    claimed = claim()

    assert [r.extractor for r in claimed] == ["dom", "singlefile", "screenshot", "pdf"]
    assert {r.pk for r in claimed} == {r.pk for r in results.values()}


def test_a_companion_another_actor_holds_is_not_taken() -> None:
    results = due_results(started_snapshot(), "screenshot", "pdf", "dom")
    theirs = timezone.now() + timedelta(seconds=1234)
    ArchiveResult.objects.filter(pk=results["pdf"].pk).update(retry_at=theirs)

    claimed = claim()

    assert [r.extractor for r in claimed] == ["screenshot", "dom"]
    assert claimed[1].retry_at == claimed[0].retry_at + lease_of("dom")
    assert reloaded(results["pdf"]).retry_at == theirs


def test_a_companion_claimed_by_another_actor_after_the_read_is_not_taken() -> None:
    """Another actor's claim lands between the companions' read and their compare-and-set:
    ``lease_seconds`` runs for a candidate after it was read and before its update."""
    if connection.vendor != "sqlite":
        pytest.skip("on PostgreSQL the companions are row-locked (SKIP LOCKED) before the lease")
    results = due_results(started_snapshot(), "screenshot", "pdf", "dom")
    theirs = timezone.now() + timedelta(seconds=1234)
    kind = results_kind()

    def someone_else_claims_pdf(record: ArchiveResult) -> float:
        if record.pk == results["pdf"].pk:
            ArchiveResult.objects.filter(pk=record.pk).update(retry_at=theirs)
        return kind.lease_seconds(record)

    claimed = claim(lease_seconds=someone_else_claims_pdf)

    assert [r.extractor for r in claimed] == ["screenshot", "dom"]
    assert reloaded(results["pdf"]).retry_at == theirs  # their lease stands


@pytest.mark.postgres
def test_a_companion_locked_by_another_actor_is_skipped_postgres() -> None:
    """Another actor has the pdf row locked (SELECT ... FOR UPDATE) while it claims it: the
    companions' SKIP LOCKED passes over it instead of waiting or taking it."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://...")
    results = due_results(started_snapshot(), "screenshot", "pdf", "dom")
    locked, done = threading.Event(), threading.Event()

    def other_actor() -> None:
        try:
            with transaction.atomic():
                ArchiveResult.objects.select_for_update().get(pk=results["pdf"].pk)
                locked.set()
                done.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=other_actor)
    thread.start()
    try:
        assert locked.wait(30)
        claimed = claim()
    finally:
        done.set()
        thread.join()

    assert [r.extractor for r in claimed] == ["screenshot", "dom"]
    assert reloaded(results["pdf"]).retry_at == results["pdf"].retry_at  # untouched


@pytest.mark.parametrize("first", ["wget", "title"])
def test_results_that_do_not_share_the_visit_are_never_companions(first: str) -> None:
    snapshot = started_snapshot()
    results = due_results(
        snapshot, first, "screenshot", "pdf", "wget" if first == "title" else "title"
    )

    alone = claim()
    together = claim()

    assert [r.extractor for r in alone] == [first]
    assert [r.extractor for r in together] == ["screenshot", "pdf"]  # the other is left alone
    last = results["wget" if first == "title" else "title"]
    assert reloaded(last).retry_at == last.retry_at


def test_results_of_another_snapshot_are_never_companions() -> None:
    mine = due_results(started_snapshot(), "screenshot")
    due_results(started_snapshot(), "pdf", "dom")

    claimed = claim()

    assert [r.pk for r in claimed] == [mine["screenshot"].pk]
    assert [r.extractor for r in claim()] == ["pdf", "dom"]


def test_a_result_waiting_on_its_dependency_is_not_taken() -> None:
    snapshot = started_snapshot()
    results = due_results(snapshot, "screenshot", "dom")
    waiting = baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor="pdf",
        depends_on=",wget,",
        retry_at=timezone.now() - timedelta(seconds=200),
    )
    baker.make(ArchiveResult, snapshot=snapshot, extractor="wget", retry_at=timezone.now())

    claimed = claim()

    assert [r.extractor for r in claimed] == ["screenshot", "dom"]
    assert reloaded(waiting).retry_at == waiting.retry_at
    assert results["dom"].pk in {r.pk for r in claimed}


def test_a_result_not_due_yet_or_final_is_not_taken() -> None:
    snapshot = started_snapshot()
    due_results(snapshot, "screenshot")
    later = due_results(snapshot, "pdf")["pdf"]
    ArchiveResult.objects.filter(pk=later.pk).update(retry_at=timezone.now() + timedelta(hours=1))
    baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor="dom",
        status=ResultStatus.SUCCEEDED,
        retry_at=None,
    )

    assert [r.extractor for r in claim()] == ["screenshot"]


def test_claim_companions_of_an_empty_set_takes_nothing() -> None:
    results = due_results(started_snapshot(), "screenshot", "pdf")
    first = claim_next_with_companions(ArchiveResult, lease_seconds=results_kind().lease_seconds)[0]
    kind = results_kind()

    taken = claim_companions(first, [], lease_seconds=kind.lease_seconds)

    assert taken == []
    assert reloaded(first).retry_at == first.retry_at
    assert reloaded(results["pdf"]).retry_at == results["pdf"].retry_at


# --- a race between real processes ---------------------------------------------------------------

RACE_SNAPSHOTS = 40
RACE_WORKERS = 4
RACE_EXTRACTORS = ("screenshot", "pdf", "wget", "dom", "title", "singlefile")
WORKER = """
import sys
import django
django.setup()
from django.db import connection
from orchestrator.claims import claim_next_with_companions
from orchestrator.work import work_types

kind = work_types()["archiveresult"]
connection.ensure_connection()
print("ready", flush=True)
sys.stdin.readline()  # everyone starts at once
while claimed := claim_next_with_companions(
    kind.model, lease_seconds=kind.lease_seconds, lease_fields=kind.lease_fields,
    related=kind.related, companions=kind.companions,
):
    print(" ".join(str(record.pk) for record in claimed), flush=True)
"""


def test_actors_claiming_with_companions_at_once_never_take_the_same_record() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    snapshots = baker.make(
        Snapshot, crawl=crawl, status=SnapshotStatus.STARTED, _quantity=RACE_SNAPSHOTS
    )
    past = timezone.now() - timedelta(seconds=1)
    ArchiveResult.objects.bulk_create(
        ArchiveResult(snapshot=snapshot, extractor=name, retry_at=past)
        for snapshot in snapshots
        for name in RACE_EXTRACTORS
    )
    snapshot_of = dict(ArchiveResult.objects.values_list("pk", "snapshot_id"))
    extractor_of = dict(ArchiveResult.objects.values_list("pk", "extractor"))
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "DJANGO_SETTINGS_MODULE": "archive.settings_for_tests",
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=django_settings.BASE_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(RACE_WORKERS)
    ]
    try:
        for worker in workers:
            assert worker.stdout.readline() == "ready\n", worker.stderr.read()
        for worker in workers:
            worker.stdin.write("go\n")
            worker.stdin.flush()
        outputs = [worker.communicate(timeout=60) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    groups = []
    for (out, err), worker in zip(outputs, workers, strict=True):
        assert worker.returncode == 0 and "Traceback" not in err, err
        groups += [[int(pk) for pk in line.split()] for line in out.splitlines()]
    claimed = [pk for group in groups for pk in group]
    assert sorted(claimed) == sorted(snapshot_of)  # every record once, none twice
    assert len(groups) < len(claimed)  # some claims brought companions
    for first, *companions in groups:
        if extractor_of[first] in ("wget", "title"):
            assert companions == []
        assert {snapshot_of[pk] for pk in companions} <= {snapshot_of[first]}
        assert {extractor_of[pk] for pk in companions} <= {"screenshot", "pdf", "dom", "singlefile"}


# --- the actor -----------------------------------------------------------------------------------


def recording_actor(during: Callable[[Actor, ArchiveResult], None] | None = None):
    """An actor of archive results whose tick records the extractor it was given (and calls
    ``during(actor, result)`` first) instead of running it."""
    ran: list[str] = []
    actor: Actor

    def tick(result: ArchiveResult) -> None:
        if during is not None:
            during(actor, result)
        ran.append(result.extractor)

    actor = Actor(dataclasses.replace(results_kind(), tick=tick, companion_tick=tick), idle_exit=0)
    return actor, ran


def test_companions_are_ticked_as_companions_the_first_as_itself() -> None:
    """A companion keeps its claim's place under HOST_CONCURRENCY (result_tick's
    keeps_host_slot): the actor ticks it with the kind's ``companion_tick``."""
    due_results(started_snapshot(), "screenshot", "pdf", "dom")
    ran: list[tuple[str, str]] = []
    kind = dataclasses.replace(
        results_kind(),
        tick=lambda result: ran.append(("first", result.extractor)),
        companion_tick=lambda result: ran.append(("companion", result.extractor)),
    )

    assert Actor(kind, idle_exit=0).tick() is True

    assert ran == [("first", "screenshot"), ("companion", "pdf"), ("companion", "dom")]


def claim_events(settings) -> list[dict]:
    return read_events(settings.LOGS_DIR / "claims.jsonl")


def test_the_actor_runs_the_companions_right_after_the_first_each_its_own_claim(settings) -> None:
    due_results(started_snapshot(), "screenshot", "pdf", "dom", "wget")
    actor, ran = recording_actor()

    assert actor.tick() is True

    assert ran == ["screenshot", "pdf", "dom"]
    assert actor.done == 3
    holds = read_holds(settings.LOGS_DIR / "claims.jsonl")
    assert len(holds) == 3 and {hold.ended_by for hold in holds} == {"release"}
    assert [hold.pid for hold in holds] == [os.getpid()] * 3
    assert len({hold.pk for hold in holds}) == 3
    assert holds[1].until - holds[0].until == lease_of("pdf")  # the leases as claimed
    assert actor.tick() is True and ran[-1] == "wget"  # the next claim


@pytest.mark.parametrize("signalled", ["drain", "stop"])
def test_a_signalled_actor_hands_back_the_companions_it_has_not_started(
    settings, signalled: str
) -> None:
    results = due_results(started_snapshot(), "screenshot", "pdf", "dom")

    def signal_during_the_first(actor: Actor, result: ArchiveResult) -> None:
        if signalled == "drain":
            actor._on_interrupt(signal.SIGINT, None)
        else:
            actor.stopping = True  # as _on_terminate, without cancelling this process's commands

    actor, ran = recording_actor(signal_during_the_first)
    before = timezone.now()

    assert actor.tick() is True

    after = timezone.now()
    assert ran == ["screenshot"]
    for name in ("pdf", "dom"):
        stored = reloaded(results[name])
        assert stored.status == ResultStatus.QUEUED
        assert before <= stored.retry_at <= after  # due at once, for any actor
    assert reloaded(results["screenshot"]).retry_at > after  # its own lease, untouched here
    events = claim_events(settings)
    assert [e["event"] for e in events] == ["claim"] * 3 + ["release"] * 3
    holds = read_holds(settings.LOGS_DIR / "claims.jsonl")
    handed = [hold for hold in holds if hold.pk != str(results["screenshot"].pk)]
    assert [hold.end for hold in handed] == [reloaded(results[n]).retry_at for n in ("pdf", "dom")]
    assert [r.extractor for r in claim()] == ["pdf", "dom"]  # another actor takes them at once


def test_an_actor_at_its_quota_hands_back_the_rest() -> None:
    due_results(started_snapshot(), "screenshot", "pdf", "dom")
    actor, ran = recording_actor()
    actor.max_records = 2

    actor.tick()

    assert ran == ["screenshot", "pdf"]
    assert [r.extractor for r in claim()] == ["dom"]


def test_a_companion_whose_lease_no_longer_covers_its_run_is_handed_back(settings) -> None:
    """The runs before it overran their leases: what is left of its own is shorter than a run
    of its extractor may take. Raising its timeout after the claim stands in for the clock."""
    due_results(started_snapshot(), "screenshot", "pdf", "dom")

    def slow_pdf_ahead(actor: Actor, result: ArchiveResult) -> None:
        settings.EXTRACTOR_OPTIONS = {**settings.EXTRACTOR_OPTIONS, "pdf": {"timeout": 10_000}}

    actor, ran = recording_actor(slow_pdf_ahead)

    actor.tick()

    assert ran == ["screenshot", "dom"]
    assert [r.extractor for r in claim()] == ["pdf"]


def test_companions_of_a_crawl_held_meanwhile_are_handed_back_not_run() -> None:
    results = due_results(started_snapshot(), "screenshot", "pdf", "dom")

    def hold_the_crawl(actor: Actor, result: ArchiveResult) -> None:
        crawl = Crawl.objects.get(pk=result.snapshot.crawl_id)
        crawl.hold(reason="paused by a test")
        crawl.save()

    actor, ran = recording_actor(hold_the_crawl)

    actor.tick()

    assert ran == ["screenshot"]
    assert all(reloaded(results[n]).retry_at <= timezone.now() for n in ("pdf", "dom"))
    assert claim() == []  # due, but held


def test_companions_stopped_by_a_failed_blocking_step_are_not_run(settings) -> None:
    snapshot = started_snapshot()
    results = due_results(snapshot, "screenshot", "pdf", "dom")

    def stop_the_others(actor: Actor, result: ArchiveResult) -> None:
        for name in ("pdf", "dom"):
            other = ArchiveResult.objects.get(pk=results[name].pk)
            other.stop(blocking="wget", error="404")
            other.save()

    actor, ran = recording_actor(stop_the_others)

    actor.tick()

    assert ran == ["screenshot"]
    assert {reloaded(results[n]).status for n in ("pdf", "dom")} == {ResultStatus.SKIPPED}
    holds = read_holds(settings.LOGS_DIR / "claims.jsonl")
    assert [hold.ended_by for hold in holds] == ["release"] * 3


# --- the readers of a step -----------------------------------------------------------------------

POLL = 30  # long enough that a reader made as for_step makes it is still not due at its claim


@pytest.fixture
def long_poll(settings) -> timedelta:
    settings.POLL_INTERVAL = POLL
    return timedelta(seconds=POLL)


def waiting_readers(
    snapshot: Snapshot, *names: str, depends_on: str = ",wget,", **fields
) -> dict[str, ArchiveResult]:
    """One queued result per extractor of ``names`` waiting for ``depends_on``, due at the next
    poll as ``ArchiveResult.for_step`` makes it (a second apart, the first soonest), unless
    ``fields`` say otherwise."""
    poll = next_poll()
    return {
        name: baker.make(
            ArchiveResult,
            snapshot=snapshot,
            extractor=name,
            depends_on=depends_on,
            **{"retry_at": poll - timedelta(seconds=len(names) - index), **fields},
        )
        for index, name in enumerate(names)
    }


def lease_seconds_of(result: ArchiveResult) -> timedelta:
    return timedelta(seconds=results_kind().lease_seconds(result))


def test_a_wget_claim_takes_the_readers_waiting_for_it_alone_with_leases_end_to_end(
    long_poll: timedelta,
) -> None:
    snapshot = started_snapshot()
    due_results(snapshot, "wget")
    readers = waiting_readers(snapshot, "favicon", "title")  # favicon's turn comes first
    before = timezone.now()

    claimed = claim()

    after = timezone.now()
    assert [r.extractor for r in claimed] == ["wget", "favicon", "title"]
    wget, favicon, title = (r.retry_at for r in claimed)
    own = lease_seconds_of(claimed[0])
    assert before + own <= wget <= after + own
    assert favicon == wget + lease_seconds_of(readers["favicon"])  # after wget's, its own
    assert title == favicon + lease_seconds_of(readers["title"])
    for result in claimed:
        stored = reloaded(result)
        assert stored.retry_at == result.retry_at
        assert stored.status == ResultStatus.QUEUED
    assert claim() == []  # every one of them held by this claim


def test_a_result_lease_lies_past_the_next_poll_however_short_its_timeout(settings) -> None:
    """A lease shorter than the poll would look like a waiting record's next poll, which the
    end of the step it waits for makes due at once."""
    settings.POLL_INTERVAL = POLL
    settings.EXTRACTOR_OPTIONS = {"title": {"timeout": 5}, "wget": {"timeout": 200}}
    snapshot = started_snapshot()
    title, wget = (
        baker.make(ArchiveResult, snapshot=snapshot, extractor=name) for name in ("title", "wget")
    )

    assert results_kind().lease_seconds(title) == 2 * POLL  # not 5 + MARGIN
    assert results_kind().lease_seconds(wget) == 200 + MARGIN


def test_a_reader_waiting_for_more_another_snapshots_or_another_actors_is_not_taken(
    long_poll: timedelta,
) -> None:
    snapshot = started_snapshot()
    due_results(snapshot, "wget")
    baker.make(ArchiveResult, snapshot=snapshot, extractor="dom", retry_at=next_poll())
    title = waiting_readers(snapshot, "title")["title"]
    more = waiting_readers(snapshot, "media", depends_on=",wget,dom,")["media"]
    theirs = timezone.now() + timedelta(seconds=1234)
    leased = waiting_readers(snapshot, "favicon", retry_at=theirs)["favicon"]
    done = waiting_readers(snapshot, "outlinks", status=ResultStatus.SUCCEEDED, retry_at=None)[
        "outlinks"
    ]
    elsewhere = waiting_readers(started_snapshot(), "title")["title"]

    claimed = claim()

    assert [r.extractor for r in claimed] == ["wget", "title"]
    assert claimed[1].pk == title.pk
    for untouched in (more, leased, done, elsewhere):
        assert reloaded(untouched).retry_at == untouched.retry_at


def test_a_claim_of_a_step_nobody_reads_takes_no_readers(long_poll: timedelta) -> None:
    snapshot = started_snapshot()
    due_results(snapshot, "headers")
    theirs = timezone.now() + timedelta(seconds=1234)
    baker.make(  # another actor runs wget
        ArchiveResult,
        snapshot=snapshot,
        extractor="wget",
        status=ResultStatus.STARTED,
        retry_at=theirs,
    )
    readers = waiting_readers(snapshot, "title", "favicon")

    claimed = claim()

    assert [r.extractor for r in claimed] == ["headers"]
    for reader in readers.values():
        assert reloaded(reader).retry_at == reader.retry_at
    assert claim() == []  # they wait for wget


def test_a_dom_claim_takes_the_visit_sharers_then_its_reader(long_poll: timedelta) -> None:
    snapshot = started_snapshot()
    due_results(snapshot, "dom", "screenshot")
    readability = waiting_readers(snapshot, "readability", depends_on=",dom,")["readability"]
    waiting_readers(snapshot, "title")  # wget's reader: not dom's

    claimed = claim()

    assert [r.extractor for r in claimed] == ["dom", "screenshot", "readability"]
    assert claimed[2].pk == readability.pk
    assert claimed[2].retry_at == claimed[1].retry_at + lease_seconds_of(readability)


def ticks_recorded(ends_first: Callable[[ArchiveResult], None]):
    """An actor of archive results whose tick (``ends_first``, then recorded) and companion tick
    record what ran, and the list they record it in."""
    ran: list[tuple[str, str]] = []

    def first(result: ArchiveResult) -> None:
        ends_first(result)
        ran.append(("first", result.extractor))

    kind = dataclasses.replace(
        results_kind(),
        tick=first,
        companion_tick=lambda result: ran.append(("companion", result.extractor)),
    )
    return Actor(kind, idle_exit=0), ran


def test_the_actor_runs_the_readers_of_wget_right_after_it_as_companions(
    settings, long_poll: timedelta
) -> None:
    snapshot = started_snapshot()
    due_results(snapshot, "wget")
    waiting_readers(snapshot, "title", "favicon")

    def succeed(result: ArchiveResult) -> None:  # wget's end, as its tick records it
        assert result.status == ResultStatus.STARTED  # by its claim (result_admit)
        result.succeed(output=ExtractorOutput(outcome=Outcome.SUCCEEDED), files=[], size=0)
        result.save()

    actor, ran = ticks_recorded(succeed)

    assert actor.tick() is True

    assert ran == [("first", "wget"), ("companion", "title"), ("companion", "favicon")]
    holds = read_holds(settings.LOGS_DIR / "claims.jsonl")
    assert [hold.ended_by for hold in holds] == ["release"] * 3


def test_the_readers_of_a_wget_that_did_not_end_are_handed_back_not_run(
    long_poll: timedelta,
) -> None:
    snapshot = started_snapshot()
    due_results(snapshot, "wget")
    readers = waiting_readers(snapshot, "title", "favicon")

    def back_off(result: ArchiveResult) -> None:
        result.back_off(error="timed out", delay=600)
        result.save()

    actor, ran = ticks_recorded(back_off)

    assert actor.tick() is True

    after = timezone.now()
    assert ran == [("first", "wget")]
    for reader in readers.values():
        stored = reloaded(reader)
        assert stored.status == ResultStatus.QUEUED
        assert stored.retry_at <= after  # its lease given back
    assert claim() == []  # still waiting for wget


@pytest.mark.parametrize(("running", "favicon_starts"), [(2, False), (1, True)])
def test_a_reader_starts_under_its_hosts_limit_a_visit_sharer_in_its_firsts_place(
    settings, running: int, favicon_starts: bool
) -> None:
    """favicon asks the host for its icon; title reads wget's WARC and asks it nothing; the
    screenshot is the visit the claim's first result took a place for. The extractors are
    turned off: a result that starts is then skipped, one handed back stays queued."""
    settings.HOST_CONCURRENCY = 2
    settings.EXTRACTOR_OPTIONS = {
        **settings.EXTRACTOR_OPTIONS,
        **{name: {"enabled": False} for name in ("favicon", "title", "screenshot")},
    }
    for _ in range(running):  # other pages of the host
        result_on("full.example", status=ResultStatus.STARTED, extractor="wget")
    snapshot = snapshot_on("full.example")
    baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor="wget",
        status=ResultStatus.SUCCEEDED,
        retry_at=None,
    )
    lease = timezone.now() + timedelta(seconds=300)  # claimed as companions
    companions = {
        name: baker.make(
            ArchiveResult,
            snapshot=snapshot,
            extractor=name,
            depends_on="" if name == "screenshot" else ",wget,",
            retry_at=lease,
        )
        for name in ("favicon", "title", "screenshot")
    }

    for result in companions.values():
        _companion_tick(ArchiveResult.objects.select_related("snapshot__crawl").get(pk=result.pk))

    after = timezone.now()
    favicon = reloaded(companions["favicon"])
    if favicon_starts:
        assert (favicon.status, favicon.attempts) == (ResultStatus.SKIPPED, 1)
    else:
        assert (favicon.status, favicon.attempts) == (ResultStatus.QUEUED, 0)
        assert favicon.retry_at <= after  # handed back, due for whoever finds the host free
    for name in ("title", "screenshot"):
        stored = reloaded(companions[name])
        assert (stored.status, stored.attempts) == (ResultStatus.SKIPPED, 1), name
        assert stored.error == "disabled in EXTRACTOR_OPTIONS"


# --- end to end ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.browser
def test_four_result_actors_load_a_page_once_for_its_screenshot_pdf_and_dom(
    tmp_path: Path, live_site: LiveSite
) -> None:
    """A real crawl: ``add --wait`` runs the orchestrator, which spawns up to four result
    actors for the three due results; the test site counts the requests made with the
    browser's user agent (set for the three extractors, so wget or a probe cannot count)."""
    agent = {"user_agent": BROWSER_AGENT}
    vellum = Vellum(
        tmp_path / "data",
        EXTRACTOR_TIMEOUT="30",
        EXTRACTORS="screenshot,pdf,dom",
        ACTORS_ARCHIVERESULT="4",
        EXTRACTOR_OPTIONS=json.dumps({name: agent for name in ("screenshot", "pdf", "dom")}),
    )
    done = vellum.manage("init")
    assert done.returncode == 0, done.stderr
    path = f"/index.html?one-visit={uuid.uuid4().hex}"

    done = vellum.manage("add", "--wait", live_site.url(path), timeout=CRAWL_TIMEOUT)

    assert done.returncode == 0, done.stderr
    (row,) = vellum.list_json()
    assert row["url"] == normalize_url(live_site.url(path))
    assert row["status"] == "sealed"
    assert {name: r["status"] for name, r in row["results"].items()} == {
        "screenshot": "succeeded",
        "pdf": "succeeded",
        "dom": "succeeded",
    }
    loads = [
        sent for seen, sent in live_site.requests
        if seen == path and sent.get("User-Agent") == BROWSER_AGENT
    ]  # fmt: skip
    assert len(loads) == 1, f"the browser loaded the page {len(loads)} times"
