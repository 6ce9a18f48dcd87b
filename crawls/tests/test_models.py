"""The Crawl state machine (DESIGN.md §2): queued → started → sealed, plus held."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed, can_proceed
from model_bakery import baker

from core.choices import SnapshotStatus
from core.models import Snapshot
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db

SEEDS = "http://a.example/\nhttp://b.example/"


def make_crawl(status: str = CrawlStatus.QUEUED, **fields) -> Crawl:
    """A saved crawl in ``status`` (protected fields may be set when a row is created)."""
    return baker.make(Crawl, status=status, seeds=SEEDS, **fields)


def make_snapshot(crawl: Crawl, status: str, **fields) -> Snapshot:
    return baker.make(Snapshot, crawl=crawl, status=status, **fields)


def reloaded(crawl: Crawl) -> Crawl:
    return Crawl.objects.get(pk=crawl.pk)


# --- start ---------------------------------------------------------------------------------------


def test_start_moves_queued_to_started_and_stamps_start_ts() -> None:
    crawl = make_crawl()
    before = timezone.now()

    crawl.start()
    crawl.save()

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.STARTED
    assert crawl.start_ts >= before


def test_start_keeps_the_first_start_ts() -> None:
    first = timezone.now() - timedelta(hours=2)
    crawl = make_crawl(start_ts=first)

    crawl.start()

    assert crawl.start_ts == first


# --- seal ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "active", [SnapshotStatus.QUEUED, SnapshotStatus.STARTED, SnapshotStatus.FINALIZING]
)
def test_seal_is_refused_while_a_snapshot_is_active(active: str) -> None:
    crawl = make_crawl(CrawlStatus.STARTED)
    make_snapshot(crawl, SnapshotStatus.SEALED)
    make_snapshot(crawl, active)

    assert not can_proceed(crawl.seal)
    with pytest.raises(TransitionNotAllowed):
        crawl.seal(report={"x": 1})
    assert crawl.status == CrawlStatus.STARTED
    assert reloaded(crawl).status == CrawlStatus.STARTED


def test_seal_ignores_active_snapshots_of_other_crawls() -> None:
    crawl = make_crawl(CrawlStatus.STARTED)
    make_snapshot(crawl, SnapshotStatus.SEALED)
    make_snapshot(make_crawl(CrawlStatus.STARTED), SnapshotStatus.STARTED)

    assert can_proceed(crawl.seal)


def test_seal_when_every_snapshot_is_sealed_or_failed() -> None:
    crawl = make_crawl(CrawlStatus.STARTED, retry_at=timezone.now())
    make_snapshot(crawl, SnapshotStatus.SEALED)
    make_snapshot(crawl, SnapshotStatus.FAILED)
    report = {"snapshots": {"sealed": 1, "failed": 1}, "failures": []}
    before = timezone.now()

    crawl.seal(report=report)
    crawl.save()

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.SEALED
    assert crawl.report == report
    assert crawl.end_ts >= before
    assert crawl.retry_at is None


def test_seal_of_a_crawl_without_snapshots() -> None:
    crawl = make_crawl(CrawlStatus.STARTED)

    crawl.seal(report={})

    assert crawl.status == CrawlStatus.SEALED


# --- hold and release ----------------------------------------------------------------------------


@pytest.mark.parametrize("source", [CrawlStatus.QUEUED, CrawlStatus.STARTED])
def test_hold_from_an_active_state(source: str) -> None:
    crawl = make_crawl(source)

    crawl.hold()
    crawl.save()

    assert reloaded(crawl).status == CrawlStatus.HELD


def test_release_requeues_a_held_crawl_due_now() -> None:
    crawl = make_crawl(CrawlStatus.HELD, retry_at=timezone.now() + timedelta(days=1))
    before = timezone.now()

    crawl.release()
    crawl.save()

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.QUEUED
    assert before <= crawl.retry_at <= timezone.now()
    assert Crawl.objects.due().filter(pk=crawl.pk).exists()


def test_a_held_crawl_is_not_due() -> None:
    crawl = make_crawl(CrawlStatus.HELD, retry_at=timezone.now() - timedelta(minutes=1))

    assert not Crawl.objects.due().filter(pk=crawl.pk).exists()
    assert not Crawl.objects.active().filter(pk=crawl.pk).exists()


def test_reopen_makes_a_sealed_crawl_started_and_due() -> None:
    crawl = make_crawl(CrawlStatus.SEALED, retry_at=None, end_ts=timezone.now())
    before = timezone.now()

    crawl.reopen()
    crawl.save()

    crawl = reloaded(crawl)
    assert crawl.status == CrawlStatus.STARTED
    assert crawl.end_ts is None
    assert before <= crawl.retry_at <= timezone.now()


# --- transitions that are not allowed ------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "transition", "kwargs"),
    [
        (CrawlStatus.QUEUED, "seal", {"report": {}}),
        (CrawlStatus.QUEUED, "release", {}),
        (CrawlStatus.STARTED, "start", {}),
        (CrawlStatus.STARTED, "release", {}),
        (CrawlStatus.HELD, "start", {}),
        (CrawlStatus.HELD, "seal", {"report": {}}),
        (CrawlStatus.HELD, "hold", {}),
        (CrawlStatus.SEALED, "start", {}),
        (CrawlStatus.SEALED, "seal", {"report": {}}),
        (CrawlStatus.SEALED, "hold", {}),
        (CrawlStatus.SEALED, "release", {}),
        (CrawlStatus.QUEUED, "reopen", {}),
        (CrawlStatus.STARTED, "reopen", {}),
        (CrawlStatus.HELD, "reopen", {}),
    ],
)
def test_disallowed_transition_raises(source: str, transition: str, kwargs: dict) -> None:
    crawl = make_crawl(source)

    with pytest.raises(TransitionNotAllowed):
        getattr(crawl, transition)(**kwargs)
    assert crawl.status == source


# --- protection ----------------------------------------------------------------------------------


def test_status_cannot_be_assigned() -> None:
    crawl = reloaded(make_crawl())

    with pytest.raises(AttributeError, match="Direct status modification is not allowed"):
        crawl.status = CrawlStatus.SEALED
    assert crawl.status == CrawlStatus.QUEUED


def test_two_copies_of_one_crawl_cannot_both_transition() -> None:
    crawl = make_crawl()
    first, second = reloaded(crawl), reloaded(crawl)
    first.start()
    first.save()

    second.hold()
    with pytest.raises(ConcurrentTransition), transaction.atomic():
        second.save()

    assert reloaded(crawl).status == CrawlStatus.STARTED


def test_a_copy_that_saw_the_latest_state_may_transition() -> None:
    crawl = make_crawl()
    first = reloaded(crawl)
    first.start()
    first.save()
    second = reloaded(crawl)

    second.hold()
    second.save()

    assert reloaded(crawl).status == CrawlStatus.HELD


# --- the rest of the model -----------------------------------------------------------------------


def test_seed_list_and_str() -> None:
    crawl = make_crawl()

    assert crawl.seed_list() == ["http://a.example/", "http://b.example/"]
    assert str(crawl) == f"Crawl {crawl.pk}: http://a.example/ (+1 more)"


URL_IN_QUOTES = "https://example.org/'x'%5B1%5D.$?q=1.2&x=*"  # a JSON path quotes it
URL_WITH_ESCAPES = 'https://example.org/a"b\\c'  # no seed is (normalized), but a key may be


@pytest.mark.parametrize("loaded", [True, False])
def test_seed_given_reads_one_entry_of_the_seed_details(loaded: bool) -> None:
    details = {
        URL_IN_QUOTES: {"title": "Quoted", "tags": ["a"]},
        "https://example.org/": {"title": "Plain", "tags": []},
    }
    crawl = baker.make(Crawl, seeds="\n".join(details), seed_details=details)
    if not loaded:  # as a claim loads it (orchestrator/prepared.py with_related)
        crawl = Crawl.objects.defer(*Crawl.LOADED_ON_DEMAND).get(pk=crawl.pk)

    assert crawl.seed_given(URL_IN_QUOTES) == {"title": "Quoted", "tags": ["a"]}
    assert crawl.seed_given("https://example.org/") == {"title": "Plain", "tags": []}
    assert crawl.seed_given("https://example.org/other") is None
    # Read alone: the whole object stays unloaded.
    assert ("seed_details" in crawl.get_deferred_fields()) is not loaded
    with CaptureQueriesContext(connection) as again:  # finalizing asks twice: read once
        assert crawl.seed_given(URL_IN_QUOTES) == {"title": "Quoted", "tags": ["a"]}
    assert again.captured_queries == []


def test_seed_given_reads_a_key_no_json_path_can_name_the_long_way() -> None:
    details = {URL_WITH_ESCAPES: {"title": "Escaped", "tags": []}}
    crawl = baker.make(Crawl, seeds=URL_WITH_ESCAPES, seed_details=details)
    crawl = Crawl.objects.defer(*Crawl.LOADED_ON_DEMAND).get(pk=crawl.pk)

    assert crawl.seed_given(URL_WITH_ESCAPES) == {"title": "Escaped", "tags": []}


def test_a_transition_then_a_read_of_what_loads_on_demand_still_saves() -> None:
    crawl = make_crawl()
    crawl.start()
    crawl.save()
    claimed = Crawl.objects.defer(*Crawl.LOADED_ON_DEMAND).get(pk=crawl.pk)

    claimed.hold(reason="disk full")
    assert claimed.seed_list() == ["http://a.example/", "http://b.example/"]  # read now
    claimed.save()  # from the state it was read in: no ConcurrentTransition

    assert Crawl.objects.get(pk=crawl.pk).status == CrawlStatus.HELD


@pytest.mark.django_db(transaction=True)
def test_a_field_loaded_on_demand_is_read_through_the_given_queryset() -> None:
    crawl = make_crawl()
    claimed = Crawl.objects.defer(*Crawl.LOADED_ON_DEMAND).get(pk=crawl.pk)
    Crawl.objects.filter(pk=crawl.pk).update(seeds="http://c.example/")

    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        claimed.lock_and_refresh("seeds")

    assert claimed.seeds == "http://c.example/"
    assert "seed_details" in claimed.get_deferred_fields()  # only what was asked
    if connection.vendor == "postgresql":
        assert "FOR UPDATE" in queries.captured_queries[-1]["sql"]
    claimed.refresh_from_db(fields=[])  # nothing to read, as in Django
    assert claimed.status == CrawlStatus.QUEUED


def test_final_queryset_holds_sealed_crawls_only() -> None:
    sealed = make_crawl(CrawlStatus.SEALED)
    for status in (CrawlStatus.QUEUED, CrawlStatus.STARTED, CrawlStatus.HELD):
        make_crawl(status)

    assert list(Crawl.objects.final()) == [sealed]
