"""UPDATEs compiled once per process (orchestrator/prepared.py, ``prepared_update``): each must
send the database what Django's ``QuerySet.update()`` sends for the same arguments, change
the same rows, and wake whom ``WorkQuerySet.update()`` and ``wake()`` wake."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import IntegrityError, connection, models, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Host, Snapshot
from core.services.hosts import HOST_STARTED
from core.services.snapshots import SNAPSHOT_WAKE
from crawls.choices import CrawlStatus
from crawls.models import BYTES_ADDED, Crawl, crawl_add_bytes
from orchestrator.claims import _compare_and_set, _compare_and_set_query, claim_next
from orchestrator.prepared import PreparedQuery, prepared_update, update_compiled_at
from orchestrator.retries import next_poll
from orchestrator.wakeups import DUE, Listener

pytestmark = pytest.mark.django_db(transaction=True)


def sql_sent(run) -> tuple[int, str]:
    """What ``run()`` returned, and the one statement it sent, with its parameters."""
    with CaptureQueriesContext(connection) as captured:
        returned = run()
    (query,) = captured.captured_queries
    return returned, query["sql"]


def test_a_compiled_update_sends_what_djangos_update_sends() -> None:
    key, build = _compare_and_set_query(ArchiveResult)
    assert PreparedQuery.compile(build, (int, datetime, str, datetime), update_compiled_at)
    result = baker.make(ArchiveResult, extractor="wget", retry_at=timezone.now())
    lease_end = timezone.now() + timedelta(minutes=5)
    args = (result.pk, result.retry_at, result.status, lease_end)

    def orm() -> int:
        rows, values = build(*args)
        return models.QuerySet.update(rows, **values)

    compiled, compiled_sql = sql_sent(lambda: prepared_update(key, build, *args))
    ArchiveResult.objects.filter(pk=result.pk).update(retry_at=result.retry_at)
    by_orm, orm_sql = sql_sent(orm)

    assert (compiled, compiled_sql) == (by_orm, orm_sql) == (1, orm_sql)
    assert ArchiveResult.objects.get(pk=result.pk).retry_at == lease_end


def test_a_compare_and_set_takes_only_the_record_as_it_was_read() -> None:
    now = timezone.now()
    result = baker.make(ArchiveResult, extractor="wget", retry_at=now)
    lease_end = now + timedelta(minutes=5)
    stale_time = ArchiveResult(pk=result.pk, retry_at=now - timedelta(seconds=1), status="queued")
    stale_state = ArchiveResult(pk=result.pk, retry_at=now, status=ResultStatus.STARTED)

    assert not _compare_and_set(stale_time, lease_end)
    assert not _compare_and_set(stale_state, lease_end)
    assert _compare_and_set(result, lease_end)
    assert not _compare_and_set(result, lease_end + timedelta(minutes=1))  # it is leased now
    assert ArchiveResult.objects.get(pk=result.pk).retry_at == lease_end


def test_bytes_are_added_to_the_crawl_as_the_orm_adds_them() -> None:
    crawl, other = baker.make(Crawl, bytes_written=100, _quantity=2)
    assert PreparedQuery.compile(BYTES_ADDED.build, (int, int), update_compiled_at)

    assert crawl_add_bytes(crawl.pk, 2_500) == 1
    assert crawl_add_bytes(crawl.pk, -600) == 1
    assert crawl_add_bytes(crawl.pk, 0) == 0
    for change in (2_500, -600):  # the ORM's own update
        Crawl.objects.filter(pk=other.pk).update(bytes_written=models.F("bytes_written") + change)

    assert Crawl.objects.get(pk=crawl.pk).bytes_written == 2_000
    assert Crawl.objects.get(pk=other.pk).bytes_written == 2_000


def test_a_hosts_last_start_is_set_by_a_compiled_update() -> None:
    host, other = baker.make(Host, _quantity=2)
    started = timezone.now()

    assert HOST_STARTED.run(host.pk, started) == 1
    assert Host.objects.get(pk=host.pk).last_started_at == started
    assert Host.objects.get(pk=other.pk).last_started_at is None


def test_an_update_of_ordered_rows_is_left_to_djangos_update() -> None:
    crawl = baker.make(Crawl, bytes_written=0)

    def ordered(pk: int, size: int):
        return Crawl.objects.filter(pk=pk).order_by("pk"), {"bytes_written": size}

    assert PreparedQuery.compile(ordered, (int, int), update_compiled_at) is None
    assert prepared_update("test ordered", ordered, crawl.pk, 7) == 1
    assert Crawl.objects.get(pk=crawl.pk).bytes_written == 7


def test_sliced_or_combined_rows_are_never_compiled() -> None:
    """QuerySet.update() refuses both; compiled, the first would drop its LIMIT and the
    second its WHERE (an UPDATE of the whole table)."""

    def sliced(pk: int, size: int):
        return Crawl.objects.filter(pk=pk)[:1], {"bytes_written": size}

    def combined(pk: int, size: int):
        rows = Crawl.objects.filter(pk=pk)
        return rows.union(rows), {"bytes_written": size}

    assert PreparedQuery.compile(sliced, (int, int), update_compiled_at) is None
    assert PreparedQuery.compile(combined, (int, int), update_compiled_at) is None


def test_a_failed_compiled_update_marks_the_transaction_for_rollback() -> None:
    def renamed(pk: int, name: str):  # a host's name is unique
        return Host.objects.filter(pk=pk), {"name": name}

    taken, renamed_one = baker.make(Host, _quantity=2)
    assert PreparedQuery.compile(renamed, (int, str), update_compiled_at)
    with transaction.atomic():
        with pytest.raises(IntegrityError):
            prepared_update("test renamed", renamed, renamed_one.pk, taken.name)
        assert connection.needs_rollback


@pytest.fixture
def wake_folder(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


def test_a_compiled_wake_wakes_what_wake_does_and_pings_the_snapshot_actors(wake_folder) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=None)
    waiting, leased, sealed = (
        baker.make(Snapshot, crawl=crawl, status=status, retry_at=retry_at)
        for status, retry_at in (
            (SnapshotStatus.STARTED, next_poll()),
            (SnapshotStatus.STARTED, timezone.now() + timedelta(hours=1)),
            (SnapshotStatus.SEALED, None),
        )
    )
    with Listener("snapshot") as actors:
        assert SNAPSHOT_WAKE.wake(leased.pk) == 0
        assert SNAPSHOT_WAKE.wake(sealed.pk) == 0
        assert actors.drain().timed_out  # nothing woken, nobody pinged
        assert SNAPSHOT_WAKE.wake(waiting.pk) == 1
        assert actors.drain().pings == {(DUE, "snapshot")}

    assert Snapshot.objects.get(pk=waiting.pk).retry_at <= timezone.now()
    assert Snapshot.objects.get(pk=leased.pk).retry_at > timezone.now() + timedelta(minutes=59)
    assert Snapshot.objects.get(pk=sealed.pk).retry_at is None


def test_a_claim_by_compiled_compare_and_set_still_pings_nobody(wake_folder) -> None:
    baker.make(Snapshot, retry_at=timezone.now() - timedelta(seconds=1))
    with Listener("all") as listener:
        claimed = claim_next(Snapshot, lease_seconds=lambda _snapshot: 60)

        assert claimed is not None and claimed.retry_at > timezone.now()
        assert listener.drain().timed_out
