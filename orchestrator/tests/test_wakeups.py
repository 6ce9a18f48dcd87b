"""Wake-ups (orchestrator/wakeups.py): who is pinged, by what, and that a ping ends a wait.

No test measures time: each one waits with a long timeout (far longer than a ping takes) and
asserts on what ended the wait. A ping that never came shows as a wait that timed out.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone
from model_bakery import baker

from archive.testing import wait_until
from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_hold
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.actor import Actor
from orchestrator.claims import claim_next, hand_back
from orchestrator.forking import fork_process
from orchestrator.orchestrator import Orchestrator
from orchestrator.services import queue_hold
from orchestrator.wakeups import (
    CHANNEL,
    DUE,
    FINAL,
    WATCH,
    DatabaseListener,
    Listener,
    Wake,
    database_label,
    notify_due,
    ping,
    staying_orchestrators,
    wake_dir,
)
from orchestrator.work import work_types

LONG = 60  # seconds a wait may last: only a missing wake-up ever reaches it
LEASE = timedelta(minutes=5)


@pytest.fixture
def wake_folder(settings, tmp_path: Path) -> Path:
    """A DATA_DIR of this test's own, so that no other listener hears its pings."""
    settings.DATA_DIR = tmp_path
    return wake_dir()


def ping_soon(event: str, kind: str, **options) -> threading.Thread:
    """Ping from another thread a moment after the caller starts waiting."""

    def later() -> None:
        time.sleep(0.2)
        ping(event, kind, **options)

    thread = threading.Thread(target=later)
    thread.start()
    return thread


# --- the FIFOs ---------------------------------------------------------------------------------


def test_a_ping_reaches_the_orchestrator_and_the_actors_of_its_kind_only(wake_folder) -> None:
    with Listener("all") as everything, Listener("crawl") as crawls, Listener("snapshot") as other:
        sent = ping(DUE, "crawl")

        assert sent == 2
        assert everything.drain().pings == {(DUE, "crawl")}
        assert crawls.drain().pings == {(DUE, "crawl")}
        assert other.drain().timed_out


def test_a_final_ping_wakes_orchestrators_not_actors(wake_folder) -> None:
    with Listener("all") as everything, Listener("crawl") as crawls:
        ping(FINAL, "crawl")

        assert everything.drain().pings == {(FINAL, "crawl")}
        assert crawls.drain().timed_out


def test_a_watching_command_takes_final_pings_only(wake_folder) -> None:
    with Listener(WATCH) as watching:
        assert ping(DUE, "crawl") == 0
        assert ping(FINAL, "crawl") == 1

        assert watching.drain().pings == {(FINAL, "crawl")}


def test_a_passing_orchestrator_takes_every_ping_as_a_staying_one_does(wake_folder) -> None:
    with Listener("passing") as passing:
        assert ping(DUE, "crawl") == 1
        assert ping(FINAL, "snapshot") == 1

        assert passing.drain().pings == {(DUE, "crawl"), (FINAL, "snapshot")}


def test_the_staying_orchestrators_are_those_whose_fifo_is_open(wake_folder) -> None:
    assert staying_orchestrators() == []  # no folder yet
    with Listener("all"), Listener("passing"), Listener("crawl"), Listener(WATCH):
        # Not add --wait's own orchestrator, not an actor, not a waiting command.
        assert staying_orchestrators() == [os.getpid()]
        other = Listener("all")
        other.close()
        assert staying_orchestrators() == [os.getpid()]
    assert staying_orchestrators() == []


def test_a_process_on_another_database_neither_sees_nor_pings_these_listeners(
    wake_folder, monkeypatch, tmp_path
) -> None:
    """The same DATA_DIR with another database (a DATABASE_URL set for supervisord's
    orchestrator, not in a shell): its FIFOs are in a folder of their own."""
    with Listener("all"), Listener("crawl"):
        here = wake_dir()
        with monkeypatch.context() as other:
            other.setitem(connection.settings_dict, "NAME", str(tmp_path / "other.sqlite3"))
            elsewhere = wake_dir()
            unseen, unpinged = staying_orchestrators(), ping(DUE, "crawl")

        assert elsewhere != here and elsewhere.parent == here.parent
        assert (unseen, unpinged) == ([], 0)
        assert staying_orchestrators() == [os.getpid()]
        assert ping(DUE, "crawl") == 2


def test_one_sqlite_file_named_another_way_is_the_same_database(monkeypatch, tmp_path) -> None:
    """As a DATABASE_URL names it (a string), as settings do (a Path), or through a symbolic
    link: one file, one label, one folder of FIFOs."""
    monkeypatch.setattr(connection, "vendor", "sqlite")
    file = tmp_path / "db.sqlite3"
    (tmp_path / "link").symlink_to(tmp_path)
    labels = set()
    for name in (file, str(file), str(tmp_path / "link" / "db.sqlite3")):
        monkeypatch.setitem(connection.settings_dict, "NAME", name)
        labels.add(database_label())
    monkeypatch.setitem(connection.settings_dict, "NAME", str(tmp_path / "other.sqlite3"))

    assert len(labels) == 1 and labels.pop().startswith("sqlite-")
    assert database_label() not in labels


def test_one_server_database_reached_another_way_is_the_same_database(monkeypatch) -> None:
    """``localhost``, ``127.0.0.1`` or a socket, with or without its port: the database's
    name is what tells it."""
    monkeypatch.setattr(connection, "vendor", "postgresql")
    monkeypatch.setitem(connection.settings_dict, "NAME", "vellum")
    labels = set()
    for host, port in (("127.0.0.1", 5432), ("localhost", ""), ("", "5432"), ("/run/pg", None)):
        monkeypatch.setitem(connection.settings_dict, "HOST", host)
        monkeypatch.setitem(connection.settings_dict, "PORT", port)
        labels.add(database_label())
    monkeypatch.setitem(connection.settings_dict, "NAME", "another")

    assert len(labels) == 1 and labels.pop().startswith("postgresql-")
    assert database_label() not in labels


def test_what_only_looks_like_an_orchestrators_fifo_is_none(wake_folder, tmp_path) -> None:
    with Listener("crawl") as actor:
        (wake_folder / "all.123.abcd").write_text("a file put there by hand")
        (wake_folder / "all.x").write_text("")
        (wake_folder / "all.456.ef01").symlink_to(actor.path)  # a FIFO with a reader, linked

        assert staying_orchestrators() == []
        assert ping(DUE, "crawl") == 1  # the actor; nothing written into the files


def test_a_stopped_or_killed_orchestrator_is_not_staying_and_a_killed_ones_fifo_goes(
    wake_folder,
) -> None:
    child = fork_process(listen_forever, "all")
    wait_for_fifo(wake_folder, "all")
    assert staying_orchestrators() == [child.pid]
    os.kill(child.pid, signal.SIGSTOP)  # Ctrl-Z: it would archive nothing
    assert wait_until(lambda: staying_orchestrators() == [], seconds=LONG)
    os.kill(child.pid, signal.SIGCONT)
    assert wait_until(lambda: staying_orchestrators() == [child.pid], seconds=LONG)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    (left,) = wake_folder.glob("all.*")

    assert staying_orchestrators() == []

    assert not left.exists()


def test_an_orchestrator_passing_a_ping_on_does_not_wake_itself(wake_folder) -> None:
    with Listener("all") as everything, Listener("snapshot") as snapshots:
        ping(DUE, "snapshot", orchestrators=False)

        assert everything.drain().timed_out
        assert snapshots.drain().pings == {(DUE, "snapshot")}


def test_a_ping_ends_a_wait_before_its_timeout(wake_folder) -> None:
    with Listener("archiveresult") as listener:
        pinger = ping_soon(DUE, "archiveresult")

        wake = listener.wait(LONG)

        pinger.join()
        assert wake.pings == {(DUE, "archiveresult")}
        assert not wake.interrupted


def test_pings_sent_before_the_wait_are_not_lost(wake_folder) -> None:
    with Listener("all") as listener:
        ping(DUE, "crawl")
        ping(DUE, "crawl")
        ping(FINAL, "snapshot")

        wake = listener.wait(LONG)

        assert wake.pings == {(DUE, "crawl"), (FINAL, "snapshot")}
        assert listener.drain().timed_out  # all read at once


def test_interrupt_ends_a_wait(wake_folder) -> None:
    with Listener("all") as listener:
        listener.interrupt()

        wake = listener.wait(LONG)

        assert wake.interrupted
        assert not wake.pings


def test_a_wait_times_out_without_a_ping(wake_folder) -> None:
    with Listener("all") as listener:
        assert listener.wait(0.05).timed_out


def test_nobody_listening_is_no_error(wake_folder) -> None:
    assert not wake_folder.exists()

    assert ping(DUE, "crawl") == 0


def test_a_closed_listener_removes_its_fifo(wake_folder) -> None:
    listener = Listener("crawl")
    assert [p.name for p in wake_folder.iterdir()] == [listener.path.name]

    listener.close()

    assert list(wake_folder.iterdir()) == []


def listen_forever(topic: str) -> None:
    """In a forked child: listen for ``topic`` until killed."""
    Listener(topic)
    time.sleep(LONG)


def wait_for_fifo(wake_folder: Path, topic: str) -> None:
    """Wait until a FIFO of ``topic`` is in ``wake_folder`` (a child's listener is up)."""
    deadline = time.monotonic() + LONG
    while not (wake_folder.is_dir() and any(wake_folder.glob(f"{topic}.*"))):
        assert time.monotonic() < deadline, "the child never listened"
        time.sleep(0.01)


def test_the_fifo_of_a_killed_listener_is_removed_by_the_next_ping(wake_folder) -> None:
    child = fork_process(listen_forever, "crawl")
    wait_for_fifo(wake_folder, "crawl")
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    (left,) = wake_folder.glob("crawl.*")

    assert ping(DUE, "crawl") == 0

    assert not left.exists()


def test_a_forked_child_closes_the_listeners_it_inherits_and_leaves_their_fifos(
    wake_folder,
) -> None:
    def child_closes(listener: Listener) -> None:
        os._exit(0 if listener.fd == -1 else 1)

    with Listener("all") as listener:
        child = fork_process(child_closes, listener)
        child.join()

        assert child.exitcode == 0
        assert listener.path.exists()
        ping(DUE, "crawl")
        assert listener.drain().pings == {(DUE, "crawl")}  # still the parent's, still open


# --- what pings: saves, updates and bulk creates of work items, on commit ----------------------


@pytest.mark.django_db(transaction=True)
def test_queuing_a_crawl_pings_once_it_commits(wake_folder) -> None:
    with Listener("crawl") as listener:
        with transaction.atomic():
            baker.make(Crawl, retry_at=timezone.now())
            assert listener.drain().timed_out  # not before the row can be seen

        assert listener.drain().pings == {(DUE, "crawl")}


@pytest.mark.django_db(transaction=True)
def test_results_created_by_a_snapshot_ping_the_result_actors(wake_folder) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=None)
    snapshot = baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.STARTED, retry_at=None)
    with Listener("archiveresult") as listener:
        ArchiveResult.objects.bulk_create(
            [ArchiveResult(snapshot=snapshot, extractor="title", retry_at=timezone.now())]
        )

        assert listener.drain().pings == {(DUE, "archiveresult")}


@pytest.mark.django_db(transaction=True)
def test_a_claim_pings_nobody_and_handing_it_back_pings(wake_folder) -> None:
    baker.make(Crawl, retry_at=timezone.now() - timedelta(seconds=1))
    with Listener("all") as listener:
        claimed = claim_next(Crawl, lease_seconds=lambda _crawl: 60)

        assert claimed is not None
        assert listener.drain().timed_out  # a lease lies ahead: nothing became due
        hand_back(claimed, lease_end=claimed.retry_at)
        assert listener.drain().pings == {(DUE, "crawl")}


@pytest.mark.django_db(transaction=True)
def test_a_record_handed_back_for_a_busy_host_wakes_nobody_and_is_due(wake_folder) -> None:
    baker.make(Crawl, retry_at=timezone.now() - timedelta(seconds=1))
    claimed = claim_next(Crawl, lease_seconds=lambda _crawl: 60)
    with Listener("all") as listener, Listener("crawl") as actors:
        given_at = hand_back(claimed, lease_end=claimed.retry_at, wake_idle=False)

        assert given_at is not None
        assert listener.drain().timed_out and actors.drain().timed_out
    assert Crawl.objects.get(pk=claimed.pk).retry_at == given_at  # claimable at once
    assert claim_next(Crawl, lease_seconds=lambda _crawl: 60).pk == claimed.pk


@pytest.mark.django_db(transaction=True)
def test_a_backoff_pings_nobody(wake_folder) -> None:
    crawl = baker.make(Crawl, retry_at=None)
    with Listener("all") as listener:
        Crawl.objects.filter(pk=crawl.pk).update(retry_at=timezone.now() + timedelta(minutes=1))

        assert listener.drain().timed_out


@pytest.mark.django_db(transaction=True)
def test_a_sealed_crawl_pings_the_orchestrator(wake_folder) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=timezone.now())
    with Listener("all") as listener, Listener("crawl") as actors:
        crawl.seal(report={})
        crawl.save()

        assert listener.drain().pings == {(FINAL, "crawl")}
        assert actors.drain().timed_out


@pytest.mark.django_db(transaction=True)
def test_a_result_that_ends_pings_only_when_another_waits_for_it(wake_folder) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=None)
    snapshot = baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.STARTED, retry_at=None)
    dom, title = (
        baker.make(
            ArchiveResult, snapshot=snapshot, extractor=name, status=ResultStatus.STARTED,
            retry_at=timezone.now() + timedelta(minutes=1),
        )
        for name in ("dom", "title")
    )  # fmt: skip
    baker.make(
        ArchiveResult, snapshot=snapshot, extractor="readability", depends_on=",dom,",
        retry_at=timezone.now(),
    )  # fmt: skip
    with Listener("all") as listener:
        title.skip(reason="no title")
        title.save()
        nothing_waits = listener.drain()
        dom.skip(reason="no page")
        dom.save()
        readability_waits = listener.drain()

    assert nothing_waits.timed_out  # its snapshot is woken by its last result instead
    assert readability_waits.pings == {(DUE, "archiveresult")}


# --- what wakes the orchestrator and an idle actor ---------------------------------------------


def test_a_ping_wakes_a_waiting_orchestrator_before_its_safety_net(wake_folder, settings) -> None:
    settings.ORCHESTRATOR_TICK = LONG
    orchestrator = Orchestrator()
    orchestrator.listener = Listener("all")
    try:
        pinger = ping_soon(DUE, "snapshot")

        wake = orchestrator.wait()

        pinger.join()
    finally:
        orchestrator.listener.close()
    assert wake.pings == {(DUE, "snapshot")}


def test_an_exiting_actor_wakes_the_orchestrator(wake_folder, settings) -> None:
    settings.ORCHESTRATOR_TICK = LONG
    orchestrator = Orchestrator()
    orchestrator.listener = Listener("all")
    actor = fork_process(time.sleep, 0.2)
    orchestrator.actors["crawl"].append(actor)
    try:
        wake = orchestrator.wait()
    finally:
        orchestrator.listener.close()
    assert wake.ready == (actor.sentinel,)
    orchestrator.reap()
    assert orchestrator.actors["crawl"] == []


def test_the_orchestrator_waits_no_longer_than_the_next_retry_at(settings) -> None:
    settings.ORCHESTRATOR_TICK = LONG
    orchestrator = Orchestrator()
    now = timezone.now()
    orchestrator.next_retry_at = now + timedelta(seconds=3)

    assert orchestrator.pause(now) == 3
    orchestrator.next_retry_at = None
    assert orchestrator.pause(now) == LONG


@pytest.mark.django_db(transaction=True)
def test_the_orchestrator_passes_due_work_on_to_its_running_actors(wake_folder) -> None:
    """Actors of the kind run already (as many as the work): their listeners are pinged."""
    baker.make(Crawl, retry_at=timezone.now() - timedelta(seconds=1))
    orchestrator = Orchestrator()
    busy = fork_process(time.sleep, LONG)
    orchestrator.actors["crawl"].append(busy)
    try:
        with Listener("crawl") as idle_actor, Listener("all") as itself:
            spawned = orchestrator.tick()

            assert spawned == 0
            assert idle_actor.drain().pings == {(DUE, "crawl")}
            assert itself.drain().timed_out  # no ping to itself: it would wake for ever
    finally:
        os.kill(busy.pid, signal.SIGKILL)
        busy.join()


def test_a_ping_of_its_kind_wakes_an_idle_actor(wake_folder) -> None:
    actor = Actor(work_types()["snapshot"], idle_exit=LONG)
    actor.listener = Listener("snapshot")
    try:
        pinger = ping_soon(DUE, "snapshot")

        wake = actor.wait(LONG)

        pinger.join()
    finally:
        actor.listener.close()
    assert wake.pings == {(DUE, "snapshot")}


# --- PostgreSQL: LISTEN/NOTIFY between machines ------------------------------------------------


def needs_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://...")


def wait_readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], LONG)[0])


def heard_until(listener: DatabaseListener, wanted: tuple[str, str]) -> frozenset:
    """The pings ``listener`` hears until ``wanted`` is among them (at most LONG seconds):
    notifications sent one after the other may take more than one read to arrive."""
    heard: set[tuple[str, str]] = set()
    deadline = time.monotonic() + LONG
    while wanted not in heard and (left := deadline - time.monotonic()) > 0:
        if select.select([listener.fileno()], [], [], left)[0]:
            heard |= listener.drain()
    return frozenset(heard)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_another_machines_ping_reaches_the_orchestrator_through_postgresql(wake_folder) -> None:
    needs_postgresql()
    with DatabaseListener(host="another machine") as listener:
        baker.make(Crawl, retry_at=timezone.now())

        assert wait_readable(listener.fileno())
        assert listener.drain() == {(DUE, "crawl")}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_write_notifies_nobody(wake_folder) -> None:
    needs_postgresql()
    with DatabaseListener(host="another machine") as listener:
        with contextlib.suppress(RuntimeError), transaction.atomic():
            baker.make(Crawl, retry_at=timezone.now())
            raise RuntimeError("rolled back")
        baker.make(Crawl, retry_at=None)  # a final one: something to wait for

        assert wait_readable(listener.fileno())
        assert listener.drain() == {(FINAL, "crawl")}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_this_machines_own_pings_are_left_to_its_fifos(wake_folder) -> None:
    needs_postgresql()
    with DatabaseListener() as listener:
        baker.make(Crawl, retry_at=timezone.now())

        assert wait_readable(listener.fileno())
        assert listener.drain() == frozenset()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_ping_of_this_machine_under_another_database_label_comes_through_postgresql(
    wake_folder,
) -> None:
    """A process of this machine whose FIFOs are in another folder (the same database named
    otherwise) is heard through NOTIFY; one of this folder is left to the FIFOs."""
    needs_postgresql()
    here = f"{socket.gethostname()} {database_label()}"
    with DatabaseListener() as listener, connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, f"{DUE} crawl {here}"])
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, f"{DUE} snapshot {here}x"])

        # NOTIFY keeps the order: by the snapshot's ping, the crawl's was heard and left out.
        assert heard_until(listener, (DUE, "snapshot")) == {(DUE, "snapshot")}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_orchestrator_passes_another_machines_ping_on_to_its_actors(
    wake_folder, settings
) -> None:
    needs_postgresql()
    settings.ORCHESTRATOR_TICK = LONG
    orchestrator = Orchestrator()
    orchestrator.listener = Listener("all")
    orchestrator.database_listener = DatabaseListener(host="another machine")
    try:
        baker.make(Snapshot, retry_at=timezone.now())  # its FIFO ping reaches no actor yet
        with Listener("snapshot") as actor:
            # The two NOTIFYs may come in two reads: wait until both have been passed on.
            woken, passed_on = set(), set()
            deadline = time.monotonic() + 10
            while (DUE, "snapshot") not in passed_on and time.monotonic() < deadline:
                assert wait_readable(orchestrator.database_listener.fileno())
                woken |= orchestrator.wait().pings
                passed_on |= actor.drain().pings

            assert woken == {(DUE, "snapshot"), (DUE, "crawl")}  # the crawl baker made
            assert passed_on == {(DUE, "snapshot")}
    finally:
        orchestrator.listener.close()
        orchestrator.database_listener.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_this_machines_own_notify_wakes_the_orchestrator_no_more_than_its_fifo_ping(
    wake_folder, settings
) -> None:
    """On PostgreSQL a write's ping comes twice, through the FIFO and as a NOTIFY: the NOTIFY
    adds nothing. Due results while every result actor runs still need no tick, and a NOTIFY
    of this machine's own alone ends no wait."""
    needs_postgresql()
    settings.ORCHESTRATOR_TICK = 0.5
    settings.ACTORS_ARCHIVERESULT = 1
    orchestrator = Orchestrator()
    orchestrator.compiled = set(orchestrator.kinds)  # nothing to compile while it waits
    orchestrator.listener = Listener("all")
    orchestrator.database_listener = DatabaseListener()  # this machine's
    busy = fork_process(time.sleep, LONG)
    orchestrator.actors["archiveresult"].append(busy)
    database = orchestrator.database_listener.fileno()
    try:
        with transaction.atomic():
            notify_due("archiveresult")
        assert wait_readable(database)
        both = orchestrator.wait()
        here = f"{socket.gethostname()} {database_label()}"
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, f"{DUE} crawl {here}"])
        assert wait_readable(database)
        notify_alone = orchestrator.wait()
        left_unread = select.select([database], [], [], 0)[0]
    finally:
        os.kill(busy.pid, signal.SIGKILL)
        busy.join()
        orchestrator.listener.close()
        orchestrator.database_listener.close()

    assert both.pings == {(DUE, "archiveresult")} and both.ready == ()
    assert orchestrator._needs_tick(both) is False
    assert notify_alone.timed_out  # waited past it, to the safety net's tick
    assert left_unread == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lost_listen_connection_ends_the_wait_and_leaves_the_polls(
    wake_folder, settings, caplog
) -> None:
    needs_postgresql()
    settings.ORCHESTRATOR_TICK = LONG
    orchestrator = Orchestrator()
    orchestrator.compiled = set(orchestrator.kinds)  # nothing to compile while it waits
    orchestrator.listener = Listener("all")
    orchestrator.database_listener = DatabaseListener()
    backend = orchestrator.database_listener.connection.info.backend_pid
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
        wake = orchestrator.wait()
    finally:
        orchestrator.listener.close()

    assert wake.timed_out  # so the tick that follows polls
    assert orchestrator.database_listener is None
    assert "lost the LISTEN connection" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_holding_a_crawl_or_the_queue_pings_the_orchestrator(wake_folder) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=timezone.now() + LEASE)
    with Listener("all") as listener:
        crawl_hold(crawl_id=crawl.pk, reason="paused")
        crawl_held = listener.drain()
        queue_hold(reason="paused")
        queue_held = listener.drain()

    assert crawl_held.pings == {(FINAL, "crawl")}
    assert queue_held.pings == {(FINAL, "queue")}


def test_due_work_for_kinds_whose_actors_all_run_needs_no_tick(settings) -> None:
    """Those actors were pinged by the writer itself; a tick could start none."""
    settings.ACTORS_ARCHIVERESULT = 1
    orchestrator = Orchestrator()
    busy = fork_process(time.sleep, LONG)
    orchestrator.actors["archiveresult"].append(busy)
    try:
        results_due = orchestrator._needs_tick(Wake(frozenset({(DUE, "archiveresult")})))
        snapshots_due = orchestrator._needs_tick(Wake(frozenset({(DUE, "snapshot")})))
        snapshot_sealed = orchestrator._needs_tick(Wake(frozenset({(FINAL, "snapshot")})))
        result_ended = orchestrator._needs_tick(Wake(frozenset({(FINAL, "archiveresult")})))
        queue_held = orchestrator._needs_tick(Wake(frozenset({(FINAL, "queue")})))
        safety_net = orchestrator._needs_tick(Wake())
    finally:
        os.kill(busy.pid, signal.SIGKILL)
        busy.join()

    assert results_due is False
    assert snapshots_due is True  # no snapshot actor runs: one is started
    assert snapshot_sealed is True  # no snapshot actor runs: one may start a held-back one
    assert result_ended is False  # its snapshot is woken by a ping of its own
    assert queue_held is True  # an add --wait stops waiting
    assert safety_net is True


@pytest.mark.django_db(transaction=True)
def test_a_snapshots_end_pings_the_idle_snapshot_actors_as_due_work(wake_folder) -> None:
    """Its end may let a snapshot held back by the window of started ones start
    (``SnapshotQuerySet.claimable``): the writer tells the actors that could take it."""
    later = timezone.now() + LEASE
    snapshot = baker.make(Snapshot, status=SnapshotStatus.QUEUED, retry_at=later)
    with Listener("snapshot") as idle_actor, Listener("archiveresult") as result_actor:
        snapshot.leave_out(reason="the crawl's limit")
        snapshot.save()
        snapshot_actor_heard = idle_actor.drain().pings
        result_actor_heard = result_actor.drain().pings

    assert snapshot_actor_heard == {(DUE, "snapshot")}
    assert result_actor_heard == frozenset()


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_that_ends_while_every_snapshot_actor_runs_needs_no_tick(
    wake_folder, settings
) -> None:
    """The writer pinged the idle snapshot actors; no tick counts every kind's work, and add
    --wait's progress is still read."""
    settings.ORCHESTRATOR_TICK = LONG
    settings.ACTORS_SNAPSHOT = 1
    later = timezone.now() + LEASE  # nothing is due: a tick would ping no actor
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=later)
    snapshot = baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.QUEUED, retry_at=later)
    ended = threading.Event()
    progress_reads: list[int] = []
    ticks: list[int] = []
    orchestrator = Orchestrator(until=ended.is_set, on_tick=lambda _o: progress_reads.append(1))
    counted = orchestrator.tick
    orchestrator.tick = lambda: ticks.append(1) or counted()
    busy = fork_process(time.sleep, LONG)
    orchestrator.actors["snapshot"].append(busy)
    pid = busy.pid

    def snapshot_then_crawl_end() -> None:
        wait_until(lambda: ticks, LONG)
        snapshot.leave_out(reason="the crawl's limit")
        snapshot.save()
        connection.close()  # this thread's own
        # Its final and due pings are read in one wake-up or two, each followed by a read.
        wait_until(lambda: len(progress_reads) >= 2, LONG)
        ended.set()
        ping(FINAL, "crawl")

    try:
        pinger = threading.Thread(target=snapshot_then_crawl_end)
        pinger.start()
        orchestrator.run()
        pinger.join()
    finally:
        # The orchestrator stopped and reaped it as it shut down, unless the run failed first.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    assert len(ticks) == 2  # the first, and the crawl's end's
    assert len(progress_reads) >= 3  # after each tick, and after the snapshot's end
