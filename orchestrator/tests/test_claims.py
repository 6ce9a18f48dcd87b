"""Claiming due records with a lease (orchestrator/claims.py, DESIGN.md §3).

The unit tests call ``claim_next`` in this process. The race tests start real actor-like
subprocesses against the test database (hence ``transaction=True``: they must see committed rows)
and check that every record is claimed exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from model_bakery import baker

from archive.testing import shared_database_url
from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.claims import CANDIDATES_PER_CLAIM, claim_next

pytestmark = pytest.mark.django_db(transaction=True)

LEASE = 600.0
RACE_RECORDS = 300
RACE_WORKERS = 4
RACE_TIMEOUT = 60
EXTRACTOR_NAMES = ("headers", "wget", "title", "favicon", "htmltotext", "outlinks")


def lease(_record) -> float:
    return LEASE


def make_result(*, ago: float = 0, **fields) -> ArchiveResult:
    """A queued result of a started snapshot, due ``ago`` seconds ago (unless fields say
    otherwise): results are claimable only while their snapshot is started."""
    fields.setdefault("retry_at", timezone.now() - timedelta(seconds=ago))
    if "snapshot" not in fields:
        fields["snapshot"] = started_snapshot()
    return baker.make(ArchiveResult, **fields)


def started_snapshot(crawl: Crawl | None = None, **fields) -> Snapshot:
    crawl = crawl or baker.make(Crawl, status=CrawlStatus.STARTED)
    return baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.STARTED, **fields)


def claim_all(model=ArchiveResult) -> list:
    """Claim until nothing is due; return the records in the order they were claimed."""
    claimed = []
    while (record := claim_next(model, lease_seconds=lease)) is not None:
        claimed.append(record)
        assert len(claimed) < 1000, "claim_next keeps returning records"
    return claimed


# --- order ---------------------------------------------------------------------------------------


def test_higher_priority_is_claimed_first_then_the_oldest_retry_at() -> None:
    low_oldest = make_result(priority=0, ago=300)
    high_recent = make_result(priority=5, ago=10)
    high_older = make_result(priority=5, ago=100)
    middle = make_result(priority=1, ago=1)

    claimed = claim_all()

    assert [r.pk for r in claimed] == [high_older.pk, high_recent.pk, middle.pk, low_oldest.pk]


def test_order_applies_to_every_kind_of_work() -> None:
    old = baker.make(Crawl, retry_at=timezone.now() - timedelta(seconds=60))
    urgent = baker.make(Crawl, priority=3, retry_at=timezone.now())

    assert [c.pk for c in claim_all(Crawl)] == [urgent.pk, old.pk]


# --- what is not claimed -------------------------------------------------------------------------


def test_a_record_due_in_the_future_is_not_claimed() -> None:
    make_result(retry_at=timezone.now() + timedelta(seconds=30), priority=9)
    due = make_result(ago=1)

    assert [r.pk for r in claim_all()] == [due.pk]


@pytest.mark.parametrize("status", ResultStatus.final())
def test_a_final_record_is_not_claimed_even_with_a_past_retry_at(status: str) -> None:
    make_result(status=status, ago=60, priority=9)
    make_result(status=status, retry_at=None)

    assert claim_next(ArchiveResult, lease_seconds=lease) is None


def test_records_of_a_held_crawl_are_not_claimed() -> None:
    held = baker.make(Crawl, status=CrawlStatus.HELD)
    make_result(snapshot=started_snapshot(held), ago=60, priority=9)
    free = make_result(ago=1)

    assert [r.pk for r in claim_all()] == [free.pk]
    assert [s.pk for s in claim_all(Snapshot)] == [free.snapshot_id]
    assert [c.pk for c in claim_all(Crawl)] == [free.snapshot.crawl_id]


@override_settings(MAX_STARTED_SNAPSHOTS=2)
def test_queued_snapshots_wait_while_the_started_window_is_full() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    started = baker.make(
        Snapshot, crawl=crawl, status=SnapshotStatus.STARTED, retry_at=timezone.now(), _quantity=2
    )
    waiting = baker.make(Snapshot, crawl=crawl, priority=9, retry_at=timezone.now())

    assert {s.pk for s in claim_all(Snapshot)} == {s.pk for s in started}
    assert claim_next(Snapshot, lease_seconds=lease) is None
    waiting.refresh_from_db()
    assert waiting.retry_at <= timezone.now()  # untouched: still due once the window opens


@override_settings(MAX_STARTED_SNAPSHOTS=2)
def test_a_queued_snapshot_is_claimed_once_the_window_has_room() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.STARTED, retry_at=None)
    waiting = baker.make(Snapshot, crawl=crawl, retry_at=timezone.now())

    assert [s.pk for s in claim_all(Snapshot)] == [waiting.pk]


@override_settings(MAX_STARTED_SNAPSHOTS=2)
def test_started_snapshots_of_a_held_crawl_do_not_block_other_crawls() -> None:
    paused = baker.make(Crawl, status=CrawlStatus.HELD)
    baker.make(
        Snapshot, crawl=paused, status=SnapshotStatus.STARTED, retry_at=timezone.now(), _quantity=2
    )
    running = baker.make(Crawl, status=CrawlStatus.STARTED)
    waiting = baker.make(Snapshot, crawl=running, retry_at=timezone.now())

    claimed = claim_next(Snapshot, lease_seconds=lease)

    assert claimed is not None and claimed.pk == waiting.pk


def test_nothing_due_returns_none() -> None:
    assert claim_next(ArchiveResult, lease_seconds=lease) is None


# --- the lease -----------------------------------------------------------------------------------


def test_a_claim_moves_retry_at_to_now_plus_the_lease() -> None:
    record = make_result(ago=5)
    before = timezone.now()

    claimed = claim_next(ArchiveResult, lease_seconds=lambda r: 90)

    after = timezone.now()
    assert claimed.pk == record.pk
    assert before + timedelta(seconds=90) <= claimed.retry_at <= after + timedelta(seconds=90)
    record.refresh_from_db()
    assert record.retry_at == claimed.retry_at
    assert record.status == ResultStatus.QUEUED  # claiming leases; the tick transitions


def test_the_lease_comes_from_the_record() -> None:
    short = make_result(extractor="title", ago=2)
    long = make_result(extractor="wget", ago=1)
    leases = {"title": 10, "wget": 1000}
    start = timezone.now()

    def lease_by_extractor(record: ArchiveResult) -> float:
        return leases[record.extractor]

    claimed = []
    while (record := claim_next(ArchiveResult, lease_seconds=lease_by_extractor)) is not None:
        claimed.append(record)

    by_pk = {r.pk: r.retry_at - start for r in claimed}
    assert timedelta(seconds=10) <= by_pk[short.pk] < timedelta(seconds=20)
    assert timedelta(seconds=1000) <= by_pk[long.pk] < timedelta(seconds=1010)


def test_a_claimed_record_is_not_claimed_again_until_its_lease_ends() -> None:
    record = make_result(ago=1)
    claimed = claim_next(ArchiveResult, lease_seconds=lambda r: 1)
    assert claimed.pk == record.pk

    assert claim_next(ArchiveResult, lease_seconds=lease) is None
    time.sleep(max((claimed.retry_at - timezone.now()).total_seconds(), 0) + 0.05)
    again = claim_next(ArchiveResult, lease_seconds=lease)
    assert again is not None and again.pk == record.pk


def test_a_candidate_taken_by_someone_else_after_the_read_is_not_claimed() -> None:
    """Another actor's claim lands between our read and our compare-and-set.

    ``lease_seconds`` is called for a candidate after it was read and before the update, so it
    is where the other actor's UPDATE can be slipped in, with no mock of the code under test.
    """
    if connection.vendor != "sqlite":
        pytest.skip("on PostgreSQL the candidate is row-locked (SKIP LOCKED) before the lease")
    first = make_result(priority=1, ago=10)
    second = make_result(priority=0, ago=10)
    theirs = timezone.now() + timedelta(seconds=1234)

    def someone_else_claims_first(record) -> float:
        if record.pk == first.pk:
            ArchiveResult.objects.filter(pk=first.pk).update(retry_at=theirs)
        return LEASE

    claimed = claim_next(ArchiveResult, lease_seconds=someone_else_claims_first)

    assert claimed is not None and claimed.pk == second.pk
    first.refresh_from_db()
    assert first.retry_at == theirs  # their lease stands; ours did not overwrite it


def test_a_stale_only_candidate_gives_none() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("on PostgreSQL the candidate is row-locked (SKIP LOCKED) before the lease")
    only = make_result(ago=10)
    theirs = timezone.now() + timedelta(seconds=99)

    def someone_else_claims(record) -> float:
        ArchiveResult.objects.filter(pk=record.pk).update(retry_at=theirs)
        return LEASE

    assert claim_next(ArchiveResult, lease_seconds=someone_else_claims) is None
    only.refresh_from_db()
    assert only.retry_at == theirs


def test_a_candidate_whose_state_changed_after_the_read_is_not_claimed() -> None:
    """Another actor moved the record to another state without touching retry_at."""
    if connection.vendor != "sqlite":
        pytest.skip("on PostgreSQL the candidate is row-locked (SKIP LOCKED) before the lease")
    record = make_result(ago=10)
    read_at = record.retry_at

    def someone_else_finishes(candidate) -> float:
        # A finished record keeps the retry_at we read only in this contrived case; the state
        # is what tells the claim that the candidate is gone.
        ArchiveResult.objects.filter(pk=candidate.pk).update(status=ResultStatus.SKIPPED)
        return LEASE

    assert claim_next(ArchiveResult, lease_seconds=someone_else_finishes) is None
    record.refresh_from_db()
    assert record.retry_at == read_at


def test_a_claim_that_loses_every_candidate_it_read_reads_again() -> None:
    """Other actors win each candidate of the first read: the claim takes the next due record
    rather than report none (on a loaded machine a race worker once quit so, early)."""
    if connection.vendor != "sqlite":
        pytest.skip("on PostgreSQL the candidate is row-locked (SKIP LOCKED) before the lease")
    records = [make_result(ago=100 - n) for n in range(CANDIDATES_PER_CLAIM + 1)]
    theirs = timezone.now() + timedelta(seconds=99)
    lost = records[:CANDIDATES_PER_CLAIM]

    def someone_else_claims_the_first_read(record) -> float:
        if record.pk in {r.pk for r in lost}:
            ArchiveResult.objects.filter(pk=record.pk).update(retry_at=theirs)
        return LEASE

    claimed = claim_next(ArchiveResult, lease_seconds=someone_else_claims_the_first_read)

    assert claimed is not None and claimed.pk == records[-1].pk
    assert set(
        ArchiveResult.objects.filter(pk__in=[r.pk for r in lost]).values_list("retry_at", flat=True)
    ) == {theirs}


# --- races between real processes ----------------------------------------------------------------

WORKER = """
import os, sys
import django
django.setup()
from django.db import connection
from django.test import override_settings
from core.models import ArchiveResult
from orchestrator.claims import claim_next

connection.ensure_connection()
print("ready", flush=True)
sys.stdin.readline()  # everyone starts at once
while (record := claim_next(ArchiveResult, lease_seconds=lambda r: 600)) is not None:
    print(record.pk, flush=True)
"""


def make_due_results(count: int) -> set[int]:
    """Create ``count`` due results (one started crawl, six per snapshot); return their pks."""
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    snapshots = baker.make(
        Snapshot,
        crawl=crawl,
        status=SnapshotStatus.STARTED,
        _quantity=-(-count // len(EXTRACTOR_NAMES)),
    )
    past = timezone.now() - timedelta(seconds=1)
    rows = [
        ArchiveResult(snapshot=snapshot, extractor=name, retry_at=past, priority=i % 3)
        for i, (snapshot, name) in enumerate((s, n) for s in snapshots for n in EXTRACTOR_NAMES)
    ][:count]
    ArchiveResult.objects.bulk_create(rows)
    pks = set(ArchiveResult.objects.values_list("pk", flat=True))
    assert len(pks) == count
    return pks


def race(workers: int) -> list[tuple[list[int], str, int]]:
    """Run ``workers`` claiming processes at once; return each one's (pks, stderr, exit code)."""
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "DJANGO_SETTINGS_MODULE": "archive.settings_for_tests",
    }
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=settings.BASE_DIR,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    try:
        for process in processes:
            line = process.stdout.readline()
            assert line == "ready\n", f"worker did not start: {line!r} {process.stderr.read()}"
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = []
        for process in processes:
            out, err = process.communicate(timeout=RACE_TIMEOUT)
            outcomes.append(([int(line) for line in out.split()], err, process.returncode))
        return outcomes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def assert_each_claimed_once(expected: set[int], outcomes) -> None:
    for _pks, err, code in outcomes:
        assert code == 0, err
        assert "database is locked" not in err
        assert "Traceback" not in err, err
    claimed = [pk for pks, _err, _code in outcomes for pk in pks]
    duplicates = sorted({pk for pk in claimed if claimed.count(pk) > 1})
    assert duplicates == [], f"claimed more than once: {duplicates[:20]}"
    assert set(claimed) == expected, f"never claimed: {sorted(expected - set(claimed))[:20]}"
    busy = [len(pks) for pks, _err, _code in outcomes]
    assert sum(1 for n in busy if n) >= 2, f"no contention happened: {busy}"
    now = timezone.now()
    leased = ArchiveResult.objects.filter(retry_at__gt=now + timedelta(seconds=500)).count()
    assert leased == len(expected)


def test_two_actors_never_take_the_same_record_sqlite() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("this variant runs on SQLite; see the postgres-marked one")
    expected = make_due_results(RACE_RECORDS)

    assert_each_claimed_once(expected, race(RACE_WORKERS))


@pytest.mark.postgres
def test_two_actors_never_take_the_same_record_postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://...")
    expected = make_due_results(RACE_RECORDS)

    assert_each_claimed_once(expected, race(RACE_WORKERS))
