"""A work item saved by one UPDATE written once per process (orchestrator/saving.py) must write
what Django's ``Model.save()`` writes, refuse a stale state as ConcurrentTransitionMixin does,
and leave to Django every save it does not replicate, having written nothing."""

from __future__ import annotations

import copy
import re

import pytest
from django.db import connection, models, transaction
from django.db.models import F
from django.db.models.signals import pre_save
from django.test.utils import CaptureQueriesContext
from django_fsm import ConcurrentTransition
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.base import ExtractorOutput, Outcome
from core.models import ArchiveResult, Snapshot, StorageCopy
from crawls.choices import CrawlStatus
from crawls.models import Crawl, crawl_add_bytes
from orchestrator.saving import save_row

pytestmark = pytest.mark.django_db(transaction=True)


def columns(record: models.Model) -> dict[str, object]:
    """Every column of ``record``'s row as the database holds it now."""
    return type(record)._base_manager.filter(pk=record.pk).values().get()


def written_by_django(record: models.Model) -> tuple[dict[str, object], list[str]]:
    """The columns Django's own save writes for ``record`` as it is in memory, saved from a
    copy of it (the row is put back afterwards), and the columns its UPDATE assigns."""
    before = columns(record)
    twin = copy.deepcopy(record)
    with CaptureQueriesContext(connection) as queries:
        models.Model.save(twin)
    written = columns(twin)
    type(record)._base_manager.filter(pk=record.pk).update(**before)
    return written, assigned(queries[0]["sql"])


def assigned(update: str) -> list[str]:
    """The columns an UPDATE statement sets, in order."""
    return re.findall(r'"(\w+)" = ', update.split(" SET ", 1)[1].split(" WHERE ")[0])


def succeed(result: ArchiveResult) -> None:
    output = ExtractorOutput(
        outcome=Outcome.SUCCEEDED, output="Title", cmd=["wget", "-q"], facts={"title": "T"}
    )
    result.succeed(output=output, files=["wget/index.html", "wget/page.warc.gz"], size=1234)


def started_result() -> ArchiveResult:
    result = baker.make(ArchiveResult, extractor="wget", status=ResultStatus.QUEUED)
    result.start()
    result.save()
    return ArchiveResult.objects.get(pk=result.pk)


@pytest.mark.parametrize(
    "make, change",
    [
        (started_result, succeed),
        (
            lambda: baker.make(ArchiveResult, status=ResultStatus.QUEUED),
            lambda result: result.start(),
        ),
        (
            lambda: baker.make(Snapshot, status=SnapshotStatus.QUEUED),
            lambda snapshot: snapshot.leave_out(reason="the crawl's limit"),
        ),
        (
            lambda: baker.make(StorageCopy),
            lambda copy: setattr(copy, "error", "the bucket said no"),
        ),
    ],
    ids=["result succeeds", "result starts", "snapshot left out", "copy"],
)
def test_a_save_writes_every_column_as_djangos_save_does(make, change) -> None:
    record = make()
    loaded = type(record)._base_manager.get(pk=record.pk)
    change(loaded)
    expected, django_sets = written_by_django(loaded)

    with CaptureQueriesContext(connection) as queries:
        saved = save_row(loaded)
    written = columns(loaded)

    assert saved is True
    assert [query["sql"].split(" ", 1)[0] for query in queries] == ["UPDATE"]
    assert assigned(queries[0]["sql"]) == django_sets
    assert written.pop("modified_at") >= expected.pop("modified_at")  # auto_now: set again
    assert written == expected


def test_a_save_through_the_model_is_one_statement_and_keeps_the_new_state_for_the_next() -> None:
    result = started_result()
    succeed(result)

    with CaptureQueriesContext(connection) as queries:
        result.save()
        result.rearchive(moved_to="history/1")  # from the state just saved: its save filters on it
        result.save()

    on_results = [query["sql"] for query in queries if '"core_archiveresult"' in query["sql"]]
    updates = [sql for sql in on_results if sql.startswith("UPDATE")]
    assert len(updates) == 2 and "\"status\" = 'succeeded'" in updates[1].split("WHERE")[1]
    assert columns(result)["status"] == ResultStatus.QUEUED


def test_a_state_changed_by_another_process_is_refused_and_nothing_is_written() -> None:
    result = started_result()
    mine = ArchiveResult.objects.get(pk=result.pk)
    theirs = ArchiveResult.objects.get(pk=result.pk)
    theirs.back_off(error="timed out", delay=30)
    theirs.save()

    succeed(mine)
    with transaction.atomic():
        with pytest.raises(ConcurrentTransition):
            save_row(mine)
        marked_for_rollback = transaction.get_rollback()  # as by Django's save

    assert marked_for_rollback is True
    assert columns(result)["status"] == ResultStatus.BACKOFF
    assert columns(result)["output"] == ""


def test_a_value_the_database_cannot_take_marks_the_transaction_for_rollback() -> None:
    """As Django's save, whose UPDATE compiler adapts the values inside its transaction."""
    result = started_result()
    result.output_files = {"not", "json"}

    with transaction.atomic():
        with pytest.raises(TypeError):
            save_row(result)
        marked_for_rollback = transaction.get_rollback()

    assert marked_for_rollback is True
    assert columns(result)["output_files"] == []


def test_a_model_instance_as_a_value_is_left_to_django() -> None:
    """Django's compiler writes a related record's key, and refuses any other instance."""
    result = started_result()
    other = baker.make(Snapshot)
    before = columns(result)

    result.snapshot_id = other  # what Django turns into other.pk
    as_key = save_row(result)

    assert as_key is False and columns(result) == before
    result.save()
    assert columns(result)["snapshot_id"] == other.pk


def test_a_crawls_own_save_leaves_the_bytes_counted_meanwhile() -> None:
    """Crawl.save names the fields it writes, ``bytes_written`` left out: Django saves it."""
    crawl = baker.make(Crawl, status=CrawlStatus.QUEUED, seeds="https://example.com/")
    loaded = Crawl.objects.get(pk=crawl.pk)
    crawl_add_bytes(crawl.pk, 100)  # a result recorded meanwhile

    loaded.hold(reason="paused")
    loaded.save()

    assert columns(crawl)["status"] == CrawlStatus.HELD
    assert columns(crawl)["bytes_written"] == 100


def test_deferred_fields_are_left_as_they_are_in_the_database() -> None:
    """As Django's save of a record read without some fields: the others are saved."""
    result = baker.make(ArchiveResult, status=ResultStatus.QUEUED)
    lean = ArchiveResult.objects.defer("history", "cmd").get(pk=result.pk)
    ArchiveResult.objects.filter(pk=result.pk).update(cmd=["wget", "meanwhile"])

    lean.start()
    with CaptureQueriesContext(connection) as queries:
        lean.save()

    updates = [query["sql"] for query in queries if query["sql"].startswith("UPDATE")]
    assert len(updates) == 1 and '"cmd"' not in updates[0]
    assert columns(result)["status"] == ResultStatus.STARTED
    assert columns(result)["cmd"] == ["wget", "meanwhile"]


def test_what_it_does_not_replicate_is_left_to_django_with_nothing_written() -> None:
    new = Snapshot(crawl=baker.make(Crawl), url="https://example.com/")
    result = started_result()
    before = columns(result)
    result.attempts = F("attempts") + 1
    expression = save_row(result)
    written_after_expression = columns(result)

    def receiver(**kwargs) -> None:
        pass

    snapshot = baker.make(Snapshot)
    pre_save.connect(receiver, sender=Snapshot)
    try:
        snapshot.priority = 5
        with_receiver = save_row(snapshot)
    finally:
        pre_save.disconnect(receiver, sender=Snapshot)

    assert (
        save_row(new) is False
        and new.pk is not None
        and not Snapshot.objects.filter(pk=new.pk).exists()
    )
    assert expression is False and written_after_expression == before
    assert with_receiver is False and columns(snapshot)["priority"] == 0


def test_a_row_deleted_meanwhile_is_left_to_djangos_save() -> None:
    """Django's save inserts it again (an UPDATE that found no row): so does the model's."""
    snapshot = baker.make(Snapshot, status=SnapshotStatus.QUEUED)
    Snapshot.objects.filter(pk=snapshot.pk).delete()

    saved = save_row(snapshot)
    snapshot.save()

    assert saved is False
    assert Snapshot.objects.filter(pk=snapshot.pk, status=SnapshotStatus.QUEUED).exists()


def test_the_saved_row_is_announced_as_before(settings, tmp_path) -> None:
    """WorkItem.save still wakes the actors of a record it makes due."""
    from orchestrator.wakeups import DUE, Listener

    settings.DATA_DIR = tmp_path
    result = started_result()
    result.back_off(error="timed out", delay=0)
    with Listener("archiveresult") as actor:
        result.save()
        heard = actor.drain().pings

    assert heard == {(DUE, "archiveresult")}
