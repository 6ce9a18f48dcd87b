"""Querysets compiled once with ``now`` as their parameter (orchestrator/prepared.py): the claim
statement must select exactly what the ORM would at every moment, and fall back to the ORM when
more than the time varies. The load of a claimed record, compiled once with its pk as the
parameter, must give what ``select_related(...).get(pk=...)`` gives, related records included."""

from __future__ import annotations

import gc
import signal
import uuid
from datetime import datetime, timedelta

import pytest
from django.contrib.sessions.models import Session
from django.db import connection, models
from django.db.models import Min
from django.db.models.functions import Length
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot, StorageCopy
from core.tests.test_hosts import paused_host, result_on
from crawls.models import Crawl
from orchestrator.claims import CLAIM_FIELDS, _candidates, _claimable
from orchestrator.orchestrator import Orchestrator, _claimable_count, _soonest_ahead
from orchestrator.prepared import (
    PreparedQuery,
    by_pk,
    prepared_records,
    record_by_pk,
    with_related,
)

pytestmark = pytest.mark.django_db(transaction=True)

FIELDS = (*CLAIM_FIELDS, "extractor")


def orm_candidates(model, fields, now, limit) -> list[int]:
    return [record.pk for record in _claimable(model.objects.all(), now, fields)[:limit]]


def test_the_compiled_claim_selects_what_the_orm_selects_at_every_moment(settings) -> None:
    settings.HOST_CONCURRENCY = 2
    now = timezone.now()
    for seconds in (-300, -60, -1, 30, 120, 600):  # due long ago ... due in ten minutes
        result_on("spread.example", retry_at=now + timedelta(seconds=seconds))
    result_on("full.example", status=ResultStatus.STARTED)
    result_on("full.example", status=ResultStatus.STARTED)
    held_back = result_on("full.example")  # its host runs as many as it may
    paused_host("paused.example", for_seconds=300)
    on_paused = result_on("paused.example")
    result_on("new.example", status=ResultStatus.STARTED)  # on probation (no success yet)
    on_probation = result_on("new.example", retry_at=now - timedelta(seconds=30))
    result_on("other.example", retry_at=now + timedelta(seconds=60))  # what it leaves room to

    for moment in (
        now - timedelta(seconds=120),
        now,
        now + timedelta(seconds=100),
        now + timedelta(hours=1),
    ):
        compiled = [record.pk for record in _candidates(ArchiveResult, FIELDS, moment, 50)]
        assert compiled == orm_candidates(ArchiveResult, FIELDS, moment, 50), moment
    claim = PreparedQuery.compile(
        lambda at: _claimable(ArchiveResult.objects.all(), at, FIELDS), (datetime,)
    )
    assert claim is not None and len(claim.slots) >= 3  # due, running leases, host pauses
    due_now = {record.pk for record in _candidates(ArchiveResult, FIELDS, now, 50)}
    assert len(due_now) == 3  # the three of spread.example due by now
    assert held_back.pk not in due_now and on_paused.pk not in due_now
    assert on_probation.pk not in due_now  # spread.example's wait elsewhere


def test_compiled_candidates_carry_their_fields_as_the_orm_loads_them() -> None:
    due = result_on("fields.example", extractor="wget")
    (record,) = _candidates(ArchiveResult, FIELDS, timezone.now(), 5)
    assert (record.pk, record.status, record.extractor) == (due.pk, due.status, "wget")
    assert record.retry_at == ArchiveResult.objects.get(pk=due.pk).retry_at  # aware, exact
    assert record.get_deferred_fields() >= {"output", "error"}


def test_a_query_that_derives_other_values_from_the_time_is_not_compiled_once() -> None:
    def an_hour_before(at):
        return Snapshot.objects.filter(created_at__gte=at - timedelta(hours=1)).order_by("pk")

    assert PreparedQuery.compile(an_hour_before, (datetime,)) is None
    recent = result_on("recent.example").snapshot
    now = timezone.now()
    assert [s.pk for s in prepared_records("test an hour before", an_hour_before, now)] == [
        recent.pk
    ]
    assert prepared_records("test an hour before", an_hour_before, now + timedelta(hours=2)) == []


def test_a_query_of_several_arguments_selects_what_the_orm_selects() -> None:
    now = timezone.now()
    for host, seconds in (("one.example", -60), ("one.example", 60), ("two.example", -60)):
        result_on(host, retry_at=now + timedelta(seconds=seconds), depends_on=",wget,")
    result_on("one.example", retry_at=now - timedelta(seconds=60), depends_on=",dom,")
    first = ArchiveResult.objects.order_by("pk").first()

    def build(host: str, at: datetime, pk: int, snapshot_id: uuid.UUID, waits_for: str):
        due = ArchiveResult.objects.filter(snapshot__host=host, retry_at__lte=at)
        others = due.exclude(pk=pk).exclude(snapshot_id=snapshot_id)
        return others.filter(depends_on__contains=waits_for).order_by("pk")

    query = PreparedQuery.compile(build, (str, datetime, int, uuid.UUID, str))
    assert query is not None and len(query.slots) == 5
    for host in ("one.example", "two.example", "none.example"):
        for at in (now - timedelta(seconds=90), now, now + timedelta(seconds=90)):
            for waits_for in (",wget,", ",dom,", "%", "_"):  # LIKE's wildcards match themselves
                args = (host, at, first.pk, first.snapshot_id, waits_for)
                expected = [record.pk for record in build(*args)]
                assert [record.pk for record in query.records(*args)] == expected, args
                assert query.count(*args) == len(expected)
                assert query.exists(*args) == bool(expected)


def test_compiled_records_carry_their_annotations() -> None:
    result = result_on("annotated.example", extractor="wget")

    def build(pk: int):
        return ArchiveResult.objects.filter(pk=pk).annotate(name_length=Length("extractor"))

    (record,) = prepared_records("test annotated", build, result.pk)
    assert (record.pk, record.name_length) == (result.pk, 4)


def test_a_query_whose_field_refuses_a_marker_is_left_to_the_orm() -> None:
    result = result_on("refused.example")

    def by_snapshot(snapshot_id):
        return ArchiveResult.objects.filter(snapshot_id=snapshot_id)

    assert PreparedQuery.compile(by_snapshot, (str,)) is None  # no UUID: the field refuses it
    found = prepared_records("test by snapshot", by_snapshot, str(result.snapshot_id))
    assert [record.pk for record in found] == [result.pk]


def test_the_compiled_snapshot_claim_counts_the_started_window_each_time(settings) -> None:
    """The window was once counted as the statement was built: compiled while it was full, the
    claim kept queued snapshots out after it emptied."""
    settings.MAX_STARTED_SNAPSHOTS = 1
    started = baker.make(Snapshot, status=SnapshotStatus.STARTED, retry_at=timezone.now())
    queued = baker.make(Snapshot, retry_at=timezone.now())
    fields = (*CLAIM_FIELDS,)

    def compiled_and_orm() -> tuple[set, set]:
        now = timezone.now()
        compiled = {s.pk for s in _candidates(Snapshot, fields, now, 5)}
        return compiled, set(orm_candidates(Snapshot, fields, now, 5))

    full = compiled_and_orm()
    Snapshot.objects.filter(pk=started.pk).update(status=SnapshotStatus.SEALED, retry_at=None)
    emptied = compiled_and_orm()

    assert full == ({started.pk}, {started.pk})
    assert emptied == ({queued.pk}, {queued.pk})


def test_a_changed_setting_recompiles_the_claim(settings) -> None:
    settings.HOST_CONCURRENCY = 1
    result_on("limited.example", status=ResultStatus.STARTED)
    waiting = result_on("limited.example")
    assert _candidates(ArchiveResult, FIELDS, timezone.now(), 5) == []

    settings.HOST_CONCURRENCY = 0  # no limit: the compiled statement loses its subquery
    assert [r.pk for r in _candidates(ArchiveResult, FIELDS, timezone.now(), 5)] == [waiting.pk]


def test_the_orchestrators_compiled_counts_and_soonest_time_match_the_orm(settings) -> None:
    settings.HOST_CONCURRENCY = 2
    now = timezone.now()
    for seconds in (-60, -1, 30, 600):
        result_on("count.example", retry_at=now + timedelta(seconds=seconds))
    result_on("busy.example", status=ResultStatus.STARTED)
    result_on("busy.example", status=ResultStatus.STARTED)
    result_on("busy.example")  # held back: its host is full

    for moment in (now - timedelta(seconds=90), now, now + timedelta(seconds=60)):
        for model in (ArchiveResult, Snapshot):
            assert _claimable_count(model, moment) == model.objects.claimable(moment).count()
            ahead = model.objects.runnable().filter(retry_at__gt=moment)
            soonest = ahead.aggregate(soonest=Min("retry_at"))["soonest"]
            assert _soonest_ahead(model, moment) == soonest, (model, moment)
    assert _claimable_count(ArchiveResult, now) == 2
    assert _soonest_ahead(ArchiveResult, now) == now + timedelta(seconds=30)


def test_the_soonest_time_ahead_is_one_query(django_assert_num_queries) -> None:
    # Its record carries its state: django-fsm reads the state of every instance it makes, and
    # a deferred one would cost a second query each tick.
    result_on("soon.example", retry_at=timezone.now() + timedelta(seconds=30))
    _soonest_ahead(ArchiveResult, timezone.now())  # compiled on the first call

    with django_assert_num_queries(1):
        assert _soonest_ahead(ArchiveResult, timezone.now()) is not None


def field_values(record: models.Model) -> dict:
    """The values of the fields ``record`` was loaded with, and which those left out were."""
    deferred = record.get_deferred_fields()
    loaded = [f.attname for f in record._meta.concrete_fields if f.attname not in deferred]
    return {"deferred": deferred, **{name: getattr(record, name) for name in loaded}}


def related_chain(record: models.Model, path: str) -> list[models.Model]:
    """``record`` and the records along ``path`` ("snapshot__crawl") from it."""
    chain = [record]
    for name in path.split("__"):
        chain.append(getattr(chain[-1], name))
    return chain


@pytest.mark.parametrize(
    ("model", "related"),
    ((ArchiveResult, ("snapshot__crawl",)), (Snapshot, ("crawl",)), (StorageCopy, ("snapshot",))),
)
def test_a_record_loaded_by_its_compiled_pk_is_what_get_loads(
    model, related, django_assert_num_queries
) -> None:
    result = result_on("load.example", status=ResultStatus.STARTED, output="out.txt")
    records = {
        ArchiveResult: result,
        Snapshot: result.snapshot,
        StorageCopy: baker.make(StorageCopy, snapshot=result.snapshot),
    }
    pk = records[model].pk
    expected = related_chain(with_related(model.objects.all(), related).get(pk=pk), related[0])
    # the compiled path, not the fallback
    assert PreparedQuery.compile(by_pk(model, related), (type(pk),)) is not None
    for _ in range(2):  # the first call compiles, the second reuses
        with django_assert_num_queries(1):
            loaded = record_by_pk(model, pk, related)
            # The related records came with it, as select_related brings them.
            chain = related_chain(loaded, related[0])
        assert [field_values(r) for r in chain] == [field_values(r) for r in expected]
        assert loaded._state.adding is False and loaded._state.db == "default"
    assert loaded.retry_at.tzinfo is not None  # aware, as the ORM converts it


@pytest.mark.parametrize(
    ("model", "related"), ((ArchiveResult, ("snapshot__crawl",)), (Snapshot, ("crawl",)))
)
def test_a_claimed_record_comes_without_the_crawl_fields_that_grow_with_the_crawl(
    model, related
) -> None:
    result = result_on("seeds.example")
    crawl = result.snapshot.crawl
    crawl.seed_details = {result.snapshot.url: {"title": "Given", "tags": ["t"]}}
    crawl.save()
    pk = result.pk if model is ArchiveResult else result.snapshot_id

    loaded = related_chain(record_by_pk(model, pk, related), related[0])[-1]

    assert loaded.get_deferred_fields() == {"seeds", "seed_details"}
    assert loaded.seed_details == crawl.seed_details  # read when first used
    assert loaded.seeds == crawl.seeds
    assert loaded.get_deferred_fields() == set()
    # The crawl's own claim loads it whole: its actor reads the seeds.
    assert record_by_pk(Crawl, crawl.pk).get_deferred_fields() == set()


def test_a_crawl_loaded_without_its_seeds_saves_without_them() -> None:
    result = result_on("save.example")
    crawl = record_by_pk(Snapshot, result.snapshot_id, ("crawl",)).crawl
    Crawl.objects.filter(pk=crawl.pk).update(seeds="https://changed.example/")

    crawl.priority = 5
    with CaptureQueriesContext(connection) as queries:
        crawl.save()

    # Neither read nor written (on PostgreSQL the wake-up's NOTIFY comes along).
    statements = [query["sql"] for query in queries.captured_queries]
    assert [sql for sql in statements if sql.startswith("UPDATE")] == statements[:1]
    assert not [sql for sql in statements if "seed" in sql]

    stored = Crawl.objects.get(pk=crawl.pk)
    assert (stored.priority, stored.seeds) == (5, "https://changed.example/")


def test_a_missing_record_raises_does_not_exist() -> None:
    result_on("missing.example")
    with pytest.raises(ArchiveResult.DoesNotExist):
        record_by_pk(ArchiveResult, -12345, ("snapshot__crawl",))
    with pytest.raises(Snapshot.DoesNotExist):
        record_by_pk(Snapshot, "00000000-0000-0000-0000-00000000abcd", ("crawl",))


def test_a_text_key_is_compiled_too() -> None:
    assert PreparedQuery.compile(lambda key: Session.objects.filter(pk=key), (str,)) is not None
    session = Session.objects.create(
        session_key="k" * 32, session_data="e30=", expire_date=timezone.now()
    )
    assert record_by_pk(Session, session.pk).session_data == "e30="


@pytest.mark.parametrize(
    "options, compiled",
    [({}, {"crawl", "snapshot", "archiveresult", "storagecopy"}), ({"exit_on_idle": True}, set())],
    ids=["stays", "exits-on-idle"],
)
def test_an_orchestrator_that_stays_compiles_every_kind_as_it_starts(
    settings, tmp_path, options: dict, compiled: set
) -> None:
    """supervisord's compiles all now; one that ends when idle (add --wait's) only what it
    forks (``spawn``)."""
    settings.DATA_DIR = tmp_path  # its wake-up FIFO, away from every other listener
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    orchestrator = Orchestrator(**options)
    orchestrator.initialize()
    try:
        assert orchestrator.compiled == compiled
    finally:
        orchestrator.shutdown()
        gc.unfreeze()  # what initialize froze: the test process goes on
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
