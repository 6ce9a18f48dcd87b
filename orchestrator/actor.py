"""An actor: a process that claims due records of one kind and ticks them, one at a time.

Built like huey's consumer: ``initialize()``, ``tick()``, ``shutdown()``. Signal handlers only set
flags: SIGINT drains (finish the current record, then exit), SIGTERM stops (a running extractor's
process group is killed and its result goes to backoff). With nothing due, an actor waits for a
wake-up (orchestrator/wakeups.py: new work of its kind pings it the moment it commits) and
claims again; after ``idle_exit`` seconds without work it exits, and the orchestrator starts new
ones when work appears. It does not poll: at the end of ``idle_exit`` it looks once more.

A claim may bring companions (``WorkType.companions``; the results of one snapshot that capture
the page its browser loaded, orchestrator/work.py): they are ticked in claim order right after
the record, each logged in the claims log as its own claim and release. One whose turn comes
when the actor drains, stops or has reached its quota, or whose lease no longer covers a run of
its own (the ones before it overran), is handed back: due at once, for any actor.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import datetime

from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from core.extractors.process import CommandCancelled, cancel_requested, run_shutdown_hooks
from orchestrator import claimlog
from orchestrator.claims import claim_next_with_companions, hand_back, reload_claimed
from orchestrator.usage import ACTOR_EXIT_FORMAT, cpu_used
from orchestrator.wakeups import Listener, Wake
from orchestrator.work import WorkType

logger = logging.getLogger(__name__)

ERROR_PAUSE_SECONDS = 0.5  # after a database error while claiming, before the next claim


class Actor:
    """Claim and tick records of ``kind`` until idle for ``idle_exit`` seconds or signalled."""

    def __init__(self, kind: WorkType, *, idle_exit: float, max_records: int | None = None):
        self.kind = kind
        self.idle_exit = idle_exit
        self.max_records = max_records
        self.draining = False
        self.stopping = False
        self._wakeup = threading.Event()  # set by signal handlers when there is no listener
        self.listener: Listener | None = None
        self.last_wake: Wake | None = None  # what ended the last wait for work
        self.done = 0

    def initialize(self) -> None:
        """Listen for wake-ups of this kind (before the first claim: a ping that comes while
        it claims is not lost), install the signal handlers, run the kind's ``prepare`` and
        say hello in the log."""
        try:
            self.listener = Listener(self.kind.name)
        except OSError as error:
            logger.warning("actor %s cannot listen for wake-ups (%s)", self.kind.name, error)
        signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGTERM, self._on_terminate)
        if self.kind.prepare is not None:
            self.kind.prepare()
        logger.info("actor %s started (pid %d)", self.kind.name, os.getpid())

    def _on_interrupt(self, signum, frame) -> None:
        self.draining = True
        self._interrupt()

    def _on_terminate(self, signum, frame) -> None:
        self.stopping = True
        cancel_requested.set()
        self._interrupt()

    def _interrupt(self) -> None:
        self._wakeup.set()
        if self.listener is not None:
            self.listener.interrupt()

    def tick(self) -> bool:
        """Claim one due record (and its companions) and advance each; return False when
        nothing was due."""
        claimed = claim_next_with_companions(
            self.kind.model,
            lease_seconds=self.kind.lease_seconds,
            lease_fields=self.kind.lease_fields,
            related=self.kind.related,
            companions=self.kind.companions,
            admit=self.kind.admit,
        )
        if not claimed:
            return False
        leases = []
        for record in claimed:
            lease_end = record.retry_at
            claimed_at = claimlog.log_claim(self.kind.name, record.pk, until=lease_end)
            logger.info("claimed %s %s until %s", self.kind.name, record.pk, lease_end.isoformat())
            leases.append((record, lease_end, claimed_at))
        first, *companions = leases
        self._tick_one(*first)
        for record, lease_end, claimed_at in companions:
            ready = self._ready(record, lease_end)
            if ready is None:
                self._hand_back(record, lease_end)
            else:
                self._tick_one(ready, lease_end, claimed_at, companion=True)
        return True

    def _tick_one(
        self, record, lease_end: datetime, claimed_at: datetime, *, companion: bool = False
    ) -> None:
        tick = (companion and self.kind.companion_tick) or self.kind.tick
        handed_back = None
        try:
            tick(record)
            handed_back = _handed_back_at(record, lease_end, claimed_at)
        except CommandCancelled:
            logger.info("stopped during %s %s", self.kind.name, record.pk)
        except Exception:
            # The record keeps its lease; when it runs out the next claim recovers it.
            logger.exception("tick of %s %s failed", self.kind.name, record.pk)
        claimlog.log_release(self.kind.name, record.pk, at=handed_back)
        logger.info("released %s %s", self.kind.name, record.pk)
        self.done += 1

    def _ready(self, companion, lease_end: datetime):
        """Return ``companion``, claimed with the record before it, loaded afresh if it may
        start now, else None: the actor goes on (not draining, stopping or at its quota), what
        is left of its lease covers a lease of its own (a run that starts later could outlast
        it, and another actor claim it while it runs), and it is still this actor's and
        runnable (a hold or a failed blocking step may have come since it was claimed)."""
        if self.draining or self.stopping or self._quota_reached():
            return None
        if (lease_end - timezone.now()).total_seconds() < self.kind.lease_seconds(companion):
            return None
        return reload_claimed(companion, lease_end=lease_end, related=self.kind.related)

    def _hand_back(self, companion, lease_end: datetime) -> None:
        """Give back the lease of a companion this actor will not start."""
        given_at = hand_back(companion, lease_end=lease_end)
        if given_at is not None:
            logger.info("handed back %s %s", self.kind.name, companion.pk)
        claimlog.log_release(self.kind.name, companion.pk, at=given_at)

    def run(self) -> int:
        """Loop until idle, drained or stopped; return how many records were ticked."""
        self.initialize()
        idle_since = time.monotonic()
        try:
            while not (self.draining or self.stopping or self._quota_reached()):
                if self._safe_tick():
                    idle_since = time.monotonic()
                    continue
                idle = time.monotonic() - idle_since
                if idle >= self.idle_exit:
                    break
                self.wait(self.idle_exit - idle)
        finally:
            self.shutdown()
        return self.done

    def wait(self, timeout: float) -> Wake | None:
        """Wait up to ``timeout`` seconds for a wake-up of this kind or a signal; return what
        ended the wait (None without a listener, when it just sleeps)."""
        if self.listener is None:
            self._wakeup.wait(timeout)
            return None
        self.last_wake = self.listener.wait(timeout)
        return self.last_wake

    def _safe_tick(self) -> bool:
        try:
            return self.tick()
        except DatabaseError:
            logger.exception("database error while claiming %s", self.kind.name)
            close_old_connections()
            self._wakeup.wait(ERROR_PAUSE_SECONDS)
            return False

    def _quota_reached(self) -> bool:
        return self.max_records is not None and self.done >= self.max_records

    def shutdown(self) -> None:
        """Run the shutdown hooks extractors registered (the shared browser stops, if this actor
        started one), close the database connection and log the count."""
        run_shutdown_hooks()
        close_old_connections()
        if self.listener is not None:
            self.listener.close()
        used = cpu_used()
        logger.info(
            ACTOR_EXIT_FORMAT,
            self.kind.name,
            self.done,
            os.getpid(),
            used.own,
            used.waited,
        )


def _handed_back_at(record, lease_end: datetime, claimed_at: datetime) -> datetime | None:
    """When a tick gave its record back: the save that moved ``retry_at`` off the lease.

    Its commit, just after, lets another actor rightly claim the record at the new ``retry_at``,
    which can come before the tick returns (the actor then wakes the parent, or waits for the
    CPU); a release dated later would show overlaps that never happened. None when the tick left
    the lease in place (the record stays owned until the lease ends, and the release is now).
    """
    saved = record.modified_at
    if record.retry_at != lease_end and saved is not None and saved >= claimed_at:
        return saved
    return None
