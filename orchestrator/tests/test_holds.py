"""Holding and releasing crawls and the whole queue: the transitions, what is claimed while
held, the hold and release commands, the admin actions and ``status``."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from django_fsm import TransitionNotAllowed
from model_bakery import baker

from core.choices import CopyStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot, StorageCopy
from core.services.crawls import crawl_hold, crawl_release
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.claimlog import read_events
from orchestrator.claims import claim_next
from orchestrator.models import QueueState, QueueStatus, queue_held
from orchestrator.services import queue_hold, queue_release
from orchestrator.tests.test_claims import claim_all, lease, make_result, started_snapshot
from orchestrator.tests.test_orchestrator import COMMAND_TIMEOUT, CRAWL_TIMEOUT, Vellum, wait_for

pytestmark = pytest.mark.django_db


def one_of_each_kind() -> dict[str, object]:
    """A due crawl, snapshot, archive result and storage copy, none of them held."""
    result = make_result(ago=5)
    sealed = baker.make(
        Snapshot, crawl=result.snapshot.crawl, status=SnapshotStatus.SEALED, retry_at=None
    )
    copy = baker.make(StorageCopy, snapshot=sealed, target="mirror", retry_at=timezone.now())
    return {
        "crawl": result.snapshot.crawl,
        "snapshot": result.snapshot,
        "result": result,
        "copy": copy,
    }


def command(name: str, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


# --- the queue's state machine ---------------------------------------------------------------


def test_the_queue_starts_open() -> None:
    assert QueueState.current().status == QueueStatus.OPEN
    assert not queue_held()


def test_hold_records_when_and_why_and_release_clears_them() -> None:
    state = queue_hold(reason="moving storage")

    assert (state.status, state.reason) == (QueueStatus.HELD, "moving storage")
    assert state.held_since is not None
    assert queue_held()
    assert str(QueueState.current()).endswith("UTC: moving storage")

    state = queue_release()

    assert (state.status, state.reason, state.held_since) == (QueueStatus.OPEN, "", None)
    assert not queue_held()


def test_holding_a_held_queue_or_releasing_an_open_one_is_refused() -> None:
    with pytest.raises(TransitionNotAllowed):
        queue_release()
    queue_hold()
    with pytest.raises(TransitionNotAllowed):
        queue_hold()


# --- what is claimed ---------------------------------------------------------------------------


def test_nothing_of_any_kind_is_claimed_while_the_queue_is_held() -> None:
    records = one_of_each_kind()
    queue_hold()

    for model in (Crawl, Snapshot, ArchiveResult, StorageCopy):
        assert not model.objects.runnable().exists(), model.__name__
        assert claim_next(model, lease_seconds=lease) is None, model.__name__

    queue_release()

    assert [r.pk for r in claim_all(ArchiveResult)] == [records["result"].pk]
    assert [c.pk for c in claim_all(StorageCopy)] == [records["copy"].pk]
    assert [c.pk for c in claim_all(Crawl)] == [records["crawl"].pk]


def test_a_held_crawls_storage_copies_wait_too() -> None:
    records = one_of_each_kind()

    crawl_hold(crawl_id=records["crawl"].pk)

    assert claim_next(StorageCopy, lease_seconds=lease) is None
    assert StorageCopy.objects.get().status == CopyStatus.QUEUED


# --- crawls ------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [CrawlStatus.QUEUED, CrawlStatus.STARTED])
def test_crawl_hold_then_release_requeues_it_due_now(status: str) -> None:
    crawl = baker.make(Crawl, status=status)

    assert crawl_hold(crawl_id=crawl.pk).status == CrawlStatus.HELD
    released = crawl_release(crawl_id=crawl.pk)

    assert released.status == CrawlStatus.QUEUED
    assert released.retry_at <= timezone.now()


def test_a_sealed_crawl_cannot_be_held() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.SEALED, retry_at=None)

    with pytest.raises(TransitionNotAllowed):
        crawl_hold(crawl_id=crawl.pk)


# --- commands ----------------------------------------------------------------------------------


def test_hold_and_release_crawls_by_id() -> None:
    first, second = baker.make(Crawl, status=CrawlStatus.STARTED, _quantity=2)

    out, _ = command("hold", str(first.pk), str(second.pk))

    assert out == f"crawl {first.pk}: held\ncrawl {second.pk}: held\n"
    out, _ = command("release", "--all")
    assert out == f"crawl {first.pk}: queued\ncrawl {second.pk}: queued\n"


def test_hold_all_leaves_sealed_crawls_alone() -> None:
    active = baker.make(Crawl, status=CrawlStatus.QUEUED)
    sealed = baker.make(Crawl, status=CrawlStatus.SEALED, retry_at=None)

    out, _ = command("hold", "--all")

    assert out == f"crawl {active.pk}: held\n"
    assert Crawl.objects.get(pk=sealed.pk).status == CrawlStatus.SEALED


def test_hold_reports_each_crawl_it_cannot_change_and_exits_1() -> None:
    sealed = baker.make(Crawl, status=CrawlStatus.SEALED, retry_at=None)
    err = StringIO()

    with pytest.raises(CommandError, match=r"^2 of 2 crawls not changed$"):
        call_command("hold", str(sealed.pk), "999", stdout=StringIO(), stderr=err)

    assert err.getvalue() == (
        f"crawl {sealed.pk}: cannot hold a crawl that is sealed\ncrawl 999: no such crawl\n"
    )


@pytest.mark.parametrize("args", [(), ("1", "--all"), ("--all", "--queue")])
def test_hold_needs_exactly_one_selection(args: tuple[str, ...]) -> None:
    with pytest.raises(CommandError, match="exactly one"):
        command("hold", *args)


def test_the_queue_hold_is_shown_by_status_until_released() -> None:
    out, _ = command("hold", "--queue", "--reason", "moving storage")
    assert out.startswith("The queue held since ")

    status, _ = command("status")
    assert "nothing is claimed (manage.py release --queue)" in status
    document = json.loads(command("status", "--json")[0])
    assert document["queue"]["held"] is True
    assert document["queue"]["reason"] == "moving storage"
    assert document["archiveresult"]["due"] == 0

    with pytest.raises(CommandError, match=r"^Nothing to do: queue held since"):
        command("hold", "--queue")
    assert command("release", "--queue")[0] == "The queue open.\n"
    assert json.loads(command("status", "--json")[0])["queue"] == {
        "held": False,
        "since": None,
        "reason": "",
    }


# --- admin -------------------------------------------------------------------------------------


def test_admin_actions_hold_and_release_crawls(admin_client) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    sealed = baker.make(Crawl, status=CrawlStatus.SEALED, retry_at=None)
    changelist = reverse("admin:crawls_crawl_changelist")

    response = admin_client.post(
        changelist,
        {"action": "hold_crawls", "_selected_action": [crawl.pk, sealed.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "1 crawl(s) held." in html
    assert f"Left alone (not in a state that allows it): crawl {sealed.pk}." in html
    assert Crawl.objects.get(pk=crawl.pk).status == CrawlStatus.HELD

    admin_client.post(changelist, {"action": "release_crawls", "_selected_action": [crawl.pk]})

    assert Crawl.objects.get(pk=crawl.pk).status == CrawlStatus.QUEUED


def test_started_snapshot_helper_is_claimable_again_after_release() -> None:
    snapshot = started_snapshot(retry_at=timezone.now())
    crawl_hold(crawl_id=snapshot.crawl_id)
    assert claim_next(Snapshot, lease_seconds=lease) is None

    crawl_release(crawl_id=snapshot.crawl_id)

    assert claim_next(Snapshot, lease_seconds=lease).pk == snapshot.pk


# --- end to end: a running orchestrator --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_queue_held_mid_crawl_claims_nothing_and_resumes_when_released(
    tmp_path, live_site
) -> None:
    # One actor of each kind: slow enough that the crawl is far from done when it is held.
    vellum = Vellum(
        tmp_path / "data", CLAIMS_LOG="1", ACTORS_SNAPSHOT="1", ACTORS_ARCHIVERESULT="1"
    )
    assert vellum.manage("init").returncode == 0
    urls = [live_site.url(f"/index.html?hold={number}") for number in range(40)]
    assert vellum.manage("add", *urls).returncode == 0
    orchestrator = vellum.start("orchestrator")
    try:
        wait_for(lambda: sealed(vellum) >= 1, timeout=CRAWL_TIMEOUT, what="a first snapshot")
        held = vellum.manage("hold", "--queue", "--reason", "test")
        assert held.returncode == 0, held.stderr
        held_at = datetime.now(UTC)
        time.sleep(4)  # actors finish what they hold, then find nothing to claim
        before = sealed(vellum)
        time.sleep(2)
        assert sealed(vellum) == before < len(urls)  # nothing moves while held
        late = [
            event
            for event in read_events(vellum.data_dir / "logs" / "claims.jsonl")
            if event["event"] == "claim"
            and datetime.fromisoformat(event["at"]) > held_at + timedelta(seconds=1)
        ]
        assert late == []

        released = vellum.manage("release", "--queue")
        assert released.returncode == 0, released.stderr
        wait_for(lambda: sealed(vellum) == len(urls), timeout=CRAWL_TIMEOUT, what="every snapshot")
    finally:
        orchestrator.terminate()
        orchestrator.wait(timeout=COMMAND_TIMEOUT)
    crawl = vellum.list_json()
    assert {row["status"] for row in crawl} == {"sealed"}


def sealed(vellum: Vellum) -> int:
    return vellum.status()["snapshot"]["sealed"]
