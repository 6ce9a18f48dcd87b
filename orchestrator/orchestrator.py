"""The orchestrator: one long-running process that starts actors for due work (DESIGN.md §3).

Built like huey's consumer: ``initialize()`` validates configuration, starts listening for
wake-ups and installs signal handlers, ``tick()`` only schedules (reap finished actors, count due
work, start actors up to each kind's concurrency and never more than the due work, pass a ping on
to idle actors when there is work for them), ``shutdown()`` stops the actors. Signal handlers only
set flags (and cut the wait short): SIGINT drains (actors finish their current record), SIGTERM
stops, and a second SIGINT stops too.

Actors are forked from this process, warm (orchestrator/forking.py). Between ticks it waits in
``select()`` for whatever comes first: a wake-up (new due work, a crawl or snapshot ending:
orchestrator/wakeups.py), an actor exiting (its sentinel), a signal, the next ``retry_at`` of an
active record (a backoff ending, a lease running out), or at the latest ORCHESTRATOR_TICK
seconds, the safety net. Idle, it costs no CPU but that safety net's tick.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import time
from collections.abc import Callable
from datetime import datetime
from multiprocessing.process import BaseProcess

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, close_old_connections, connection, models
from django.utils import timezone

from orchestrator.diskguard import disk_usage
from orchestrator.forking import start_actor
from orchestrator.prepared import prepared_count, prepared_records
from orchestrator.usage import ORCHESTRATOR_STOP_FORMAT, cpu_used
from orchestrator.wakeups import (
    ALL,
    DUE,
    FINAL,
    PASSING,
    DatabaseListener,
    Listener,
    Wake,
    ping,
)
from orchestrator.work import WorkType, work_types

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10
EXIT_GRACE_SECONDS = 1.0  # an actor whose sentinel closed has that long to be reapable
MIN_PAUSE_SECONDS = 0.01  # the shortest wait for a retry_at about to come (clock granularity)


class Orchestrator:
    """Start and watch actor processes until stopped, idle (``exit_on_idle``) or ``until()``."""

    def __init__(
        self,
        *,
        exit_on_idle: bool = False,
        until: Callable[[], bool] | None = None,
        on_tick: Callable[[Orchestrator], None] | None = None,
    ):
        self.exit_on_idle = exit_on_idle
        self.until = until
        self.on_tick = on_tick
        self.kinds: dict[str, WorkType] = work_types()
        self.actors: dict[str, list[BaseProcess]] = {name: [] for name in self.kinds}
        self.draining = False
        self.stopping = False
        self.listener: Listener | None = None
        self.database_listener: DatabaseListener | None = None  # on PostgreSQL
        self.last_wake: Wake | None = None  # what ended the last wait between ticks
        self.next_retry_at: datetime | None = None  # the soonest retry_at ahead (last tick)
        self.spawned = 0
        self.compiled: set[str] = set()  # kinds whose statements this process compiled
        self.failed_compiling: set[str] = set()  # kinds whose compilation failed
        # Per kind whose compilation is under way: its steps left, one statement each.
        self.steps_left: dict[str, list[Callable[[], None]]] = {}
        self.crashed = 0
        self.disk_held = False
        self.shutting_down = False  # set once shutdown() signals the actors

    # --- lifecycle ------------------------------------------------------------------------------

    def initialize(self) -> None:
        """Check the configuration, create the log folder, listen for wake-ups and install
        signal handlers.

        Raises ImproperlyConfigured when DATA_DIR cannot be written.
        """
        settings.LOGS_DIR.mkdir(parents=True, exist_ok=True)
        if not os.access(settings.DATA_DIR, os.W_OK):
            raise ImproperlyConfigured(f"DATA_DIR {settings.DATA_DIR} is not writable")
        # Everything imported so far lives as long as the process: frozen, no collection walks
        # it again (an idle orchestrator's collections, its exit, its forked actors' pages).
        gc.freeze()
        try:
            self.listener = Listener(PASSING if self._passing else ALL)
        except OSError as error:
            raise ImproperlyConfigured(f"cannot listen for wake-ups: {error}") from None
        if connection.vendor == "postgresql":
            try:
                self.database_listener = DatabaseListener()
            except DatabaseError as error:
                logger.warning("cannot LISTEN for other machines' wake-ups: %s", error)
        signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGTERM, self._on_terminate)
        if not self._passing:
            # One that stays (supervisord's) compiles every kind's statements now: the first
            # crawl it is handed (add --wait) does not wait some 50 ms for them between its
            # steps. One that passes (add --wait's) compiles them while it waits (``wait``).
            for name in self.kinds:
                self._compile(name)
        limits = ", ".join(f"{name} {kind.concurrency}" for name, kind in self.kinds.items())
        logger.info("orchestrator started (pid %d); actors at most: %s", os.getpid(), limits)

    @property
    def _passing(self) -> bool:
        """True for an orchestrator that ends when idle or when ``until()`` (add --wait's),
        False for one that stays until stopped (supervisord's)."""
        return self.exit_on_idle or self.until is not None

    def _on_interrupt(self, signum, frame) -> None:
        if self.draining:
            self.stopping = True
        self.draining = True
        self._interrupt()

    def _on_terminate(self, signum, frame) -> None:
        self.stopping = True
        self._interrupt()

    def _interrupt(self) -> None:
        if self.listener is not None:
            self.listener.interrupt()

    def run(self) -> None:
        """Tick until asked to stop, or until idle / ``until()`` when so configured."""
        self.initialize()
        try:
            while not (self.draining or self.stopping):
                self.tick()
                if self.on_tick:
                    self.on_tick(self)
                if self._finished():
                    break
                while not self._needs_tick(self.wait()):
                    if self.on_tick:
                        self.on_tick(self)  # add --wait's progress reads at its own pace
        finally:
            self.shutdown()

    def _needs_tick(self, wake: Wake) -> bool:
        """False when ``wake`` holds only pings of due work of kinds whose actors all run
        already (a tick could start no actor, and the writer pinged those actors itself), of
        archive results that ended (nothing the orchestrator schedules waits for one: the
        result's snapshot is woken by a ping of its own), or of snapshots that ended while
        every snapshot actor runs (the writer pings them too, for a held-back snapshot the end
        lets start: WorkItem.announce; the snapshot's crawl is woken by a ping of its own). A
        tick counts every kind's due work, in some ten queries: on 50 pages, 50 of add
        --wait's 62 ticks followed a snapshot's end (issue 19)."""
        if wake.timed_out or wake.interrupted or wake.ready or self.draining or self.stopping:
            return True
        return any(self._ping_needs_tick(event, kind) for event, kind in wake.pings)

    def _ping_needs_tick(self, event: str, kind: str) -> bool:
        if event == FINAL and kind == "archiveresult":
            return False
        if event == FINAL and kind == "snapshot":
            # Its end may let a snapshot held back by the window start: an actor is started
            # for it unless all run (those the writer pinged: WorkItem.announce).
            return not self._all_running("snapshot")
        if event != DUE or kind not in self.kinds:
            return True
        return not self._all_running(kind)

    def _all_running(self, kind: str) -> bool:
        return len(self.actors[kind]) >= self.kinds[kind].concurrency

    def wait(self) -> Wake:
        """Wait until something may need a tick (see the module's docstring); return it.

        While kinds are left to compile, it compiles their statements one at a time, each only
        when nothing is waiting: the compilation fills time otherwise spent waiting for the
        actors, and what comes meanwhile (or the end of the pause) waits for one statement at
        most (a few milliseconds).
        """
        deadline = time.monotonic() + self.pause()
        while (name := self._next_to_compile()) is not None:
            wake = self._listen(0)
            if not wake.timed_out or time.monotonic() >= deadline:
                return wake
            self._compile(name, steps=1)
        return self._listen(max(deadline - time.monotonic(), 0))

    def _next_to_compile(self) -> str | None:
        """The first kind, in pipeline order, neither compiled nor failed to compile."""
        done = self.compiled | self.failed_compiling
        return next((name for name in self.kinds if name not in done), None)

    def _listen(self, timeout: float) -> Wake:
        """Wait up to ``timeout`` seconds for a wake-up, an actor's exit or another machine's
        ping; return what came (``last_wake``).

        On PostgreSQL this machine's own pings come twice: through the FIFO and as NOTIFYs on
        the LISTEN connection. A NOTIFY is no wake-up by itself: the pings of other machines it
        carries are added to the FIFO's, and one carrying only this machine's own is read and
        waited past (it came through the FIFO, or will). Only actors' sentinels count as
        ``ready``. A lost LISTEN connection ends the wait (the tick that follows polls).
        """
        running = {process.sentinel: process for process in self.running()}
        deadline = time.monotonic() + timeout
        while True:
            remaining = max(deadline - time.monotonic(), 0)
            wake, lost = self._select(remaining, running)
            if not wake.timed_out or lost or remaining == 0:
                break
        self.last_wake = wake
        if timeout or not wake.timed_out:  # a look between two compilations says nothing
            logger.debug("woken by %s", wake.describe())
        return wake

    def _select(self, timeout: float, running: dict[int, BaseProcess]) -> tuple[Wake, bool]:
        """One wait of ``_listen``: the wake-up (``ready``: the sentinels of ``running`` that
        closed, their actors joined) and whether the LISTEN connection was lost."""
        database = [self.database_listener.fileno()] if self.database_listener else []
        wake = self.listener.wait(timeout, also=[*running, *database])
        exited = tuple(fd for fd in wake.ready if fd in running)
        for fd in exited:
            # Its sentinel closes as it exits, a moment before it can be reaped.
            running[fd].join(timeout=EXIT_GRACE_SECONDS)
        pings = wake.pings
        if database and database[0] in wake.ready:
            pings |= self._from_other_machines()
        lost = bool(database) and self.database_listener is None
        return Wake(pings, wake.interrupted, exited), lost

    def _from_other_machines(self) -> frozenset[tuple[str, str]]:
        """Read the pings other machines sent through PostgreSQL and pass them on to this
        machine's idle actors and waiting commands. A lost connection leaves the safety net's
        ticks."""
        try:
            pings = self.database_listener.drain()
        except DatabaseError as error:
            logger.warning("lost the LISTEN connection (%s); polling every %g s", error,
                           settings.ORCHESTRATOR_TICK)  # fmt: skip
            self.database_listener.close()
            self.database_listener = None
            return frozenset()
        for event, kind in pings:  # to idle actors (due) and waiting add --wait (final)
            ping(event, kind, orchestrators=False)
        return pings

    def pause(self, now: datetime | None = None) -> float:
        """Seconds until the next tick at the latest: to the soonest ``retry_at`` ahead seen by
        the last tick, never more than ORCHESTRATOR_TICK (the safety net)."""
        pause = settings.ORCHESTRATOR_TICK
        if self.next_retry_at is not None:
            ahead = (self.next_retry_at - (now or timezone.now())).total_seconds()
            pause = min(pause, max(ahead, MIN_PAUSE_SECONDS))
        return pause

    def tick(self) -> int:
        """Reap finished actors, then start actors for due work and ping the idle ones; return
        how many were started."""
        self.reap()
        self.watch_disk()
        now = timezone.now()
        try:
            due = {name: _claimable_count(kind.model, now) for name, kind in self.kinds.items()}
            self.next_retry_at = self._soonest_retry_at(now)
        except DatabaseError:
            logger.exception("could not count due work; trying again next tick")
            close_old_connections()
            return 0
        spawned = 0
        for name, kind in self.kinds.items():
            wanted = min(kind.concurrency, due[name]) - len(self.actors[name])
            if due[name] and wanted <= 0:
                # Actors of this kind are running; the idle ones among them claim it at once.
                ping(DUE, name, orchestrators=False)
            for _ in range(max(wanted, 0)):
                self.spawn(name)
                spawned += 1
        return spawned

    def _soonest_retry_at(self, now: datetime) -> datetime | None:
        """The soonest ``retry_at`` after ``now`` of a runnable record of any kind: when a
        backoff ends or a lease runs out (a killed actor's record is then recovered)."""
        times = [_soonest_ahead(kind.model, now) for kind in self.kinds.values()]
        return min((t for t in times if t is not None), default=None)

    def shutdown(self) -> None:
        """Ask the actors to drain (or stop), wait for them, and kill what is left."""
        sig = signal.SIGTERM if self.stopping else signal.SIGINT
        self.shutting_down = True
        running = self.running()
        for process in running:
            _send(process, sig)
        deadline = time.monotonic() + (
            STOP_GRACE_SECONDS if self.stopping else settings.EXTRACTOR_TIMEOUT + STOP_GRACE_SECONDS
        )
        for process in running:
            process.join(timeout=max(deadline - time.monotonic(), 0.1))
            if process.exitcode is None:
                _send(process, signal.SIGKILL)
                process.join()
        self.reap()
        close_old_connections()
        if self.listener is not None:
            self.listener.close()
        if self.database_listener is not None:
            self.database_listener.close()
        used = cpu_used()
        logger.info(
            ORCHESTRATOR_STOP_FORMAT,
            self.spawned,
            self.crashed,
            used.own,
            used.waited,
        )

    # --- actors -----------------------------------------------------------------------------------

    def spawn(self, name: str) -> BaseProcess:
        """Fork one actor of kind ``name`` (orchestrator/forking.py); it logs to
        logs/actors.log. Before the first, compile what actors of that kind run, or what is
        left of it (``wait`` compiles ahead), which each then inherits
        (``WorkType.compile_statements``)."""
        self.failed_compiling.discard(name)
        self._compile(name)
        process = start_actor(name)
        self.actors[name].append(process)
        self.spawned += 1
        logger.debug("forked %s actor pid %d", name, process.pid)
        return process

    def _compile(self, name: str, *, steps: int | None = None) -> None:
        """Compile what actors of kind ``name`` run (``WorkType.compilations``) unless this
        process did: ``steps`` statements of what is left (default: all), noting the kind
        compiled after its last. A failure is logged, and only the kind's next ``spawn`` tries
        again (not ``wait``, over and over); meanwhile its actors compile what they lack as they
        run it."""
        if name in self.compiled:
            return
        try:
            left = self.steps_left.get(name)
            if left is None:
                left = self.steps_left[name] = self.kinds[name].compilations()
            for _ in range(len(left) if steps is None else min(steps, len(left))):
                left.pop(0)()
        except Exception:
            logger.exception("could not compile what %s actors run", name)
            self.steps_left.pop(name, None)
            self.failed_compiling.add(name)
            return
        if not left:
            del self.steps_left[name]
            self.compiled.add(name)

    def reap(self) -> None:
        """Forget actors that exited; count and log the ones that crashed (health check)."""
        for name, processes in self.actors.items():
            alive = []
            for process in processes:
                code = process.exitcode
                if code is None:
                    alive.append(process)
                else:
                    if code != 0 and not self._asked_to_stop(code):
                        self.crashed += 1
                        logger.warning("%s actor pid %d exited with %d", name, process.pid, code)
                    process.close()  # its sentinel's file descriptor
            self.actors[name] = alive

    def _asked_to_stop(self, code: int) -> bool:
        """True for an actor that died of the signal shutdown sent it (one still starting up has
        no handler for it yet): a stop we asked for, not a crash."""
        return self.shutting_down and code in (-signal.SIGINT, -signal.SIGTERM)

    def watch_disk(self) -> None:
        """Log when the disk guard starts holding new snapshots back, and when it lifts."""
        try:
            usage = disk_usage()
        except OSError as error:
            logger.error("cannot measure the disk holding %s: %s", settings.DATA_DIR, error)
            return
        if usage.held != self.disk_held:
            log = logger.warning if usage.held else logger.info
            log("%s", usage.describe())
            self.disk_held = usage.held

    def running(self) -> list[BaseProcess]:
        """Return every actor process still running."""
        return [process for processes in self.actors.values() for process in processes]

    def _finished(self) -> bool:
        if self.until is not None and self.until():
            return True
        if self.exit_on_idle and not self.running():
            return not self.has_active_work()
        return False

    def has_active_work(self) -> bool:
        """True while any record of a crawl that is not held is in an active state."""
        return any(kind.model.objects.runnable().exists() for kind in self.kinds.values())


def _send(process: BaseProcess, sig: int) -> None:
    if process.exitcode is None:  # not reaped yet: the pid is still this process's
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)


# Every tick runs these two statements per kind of work; compiled once per process
# (orchestrator/prepared.py), they cost a tenth of a millisecond instead of a few.


def _claimable_count(model: type[models.Model], now: datetime) -> int:
    """How many records of ``model`` an actor could claim at ``now``."""
    variant = model.objects.claimable_variant()

    def build(at: datetime) -> models.QuerySet:
        return model.objects.claimable(at, variant=variant)

    return prepared_count(f"claimable {model._meta.label} {variant}", build, now)


def _soonest_ahead(model: type[models.Model], now: datetime) -> datetime | None:
    """The soonest ``retry_at`` after ``now`` of a runnable record of ``model``, or None."""

    def build(at: datetime) -> models.QuerySet:
        ahead = model.objects.runnable().filter(retry_at__gt=at)
        return ahead.order_by("retry_at").only("pk", "retry_at")[:1]

    soonest = prepared_records(f"soonest ahead {model._meta.label}", build, now)
    return soonest[0].retry_at if soonest else None
