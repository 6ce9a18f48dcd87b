"""The orchestrator: one long-running process that spawns actors for due work (DESIGN.md §3).

Built like huey's consumer: ``initialize()`` validates configuration and installs signal handlers,
``tick()`` only schedules (reap finished actors, count due work, spawn actors up to each kind's
concurrency and never more than the due work), ``shutdown()`` stops the actors. Signal handlers
only set flags: SIGINT drains (actors finish their current record), SIGTERM stops, and a second
SIGINT stops too. Idle, it sleeps between ticks and costs no CPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, close_old_connections

from orchestrator.diskguard import disk_usage
from orchestrator.work import WorkType, work_types

logger = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 10
QUICK_TICK_SECONDS = 0.2


class Orchestrator:
    """Spawn and watch actor subprocesses until stopped, idle (``exit_on_idle``) or ``until()``."""

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
        self.actors: dict[str, list[subprocess.Popen]] = {name: [] for name in self.kinds}
        self.draining = False
        self.stopping = False
        self._wakeup = threading.Event()  # set by signal handlers to cut a pause short
        self.spawned = 0
        self.crashed = 0
        self.disk_held = False
        self.shutting_down = False  # set once shutdown() signals the actors

    # --- lifecycle ------------------------------------------------------------------------------

    def initialize(self) -> None:
        """Check the configuration, create the log folder and install signal handlers.

        Raises ImproperlyConfigured when DATA_DIR cannot be written.
        """
        settings.LOGS_DIR.mkdir(parents=True, exist_ok=True)
        if not os.access(settings.DATA_DIR, os.W_OK):
            raise ImproperlyConfigured(f"DATA_DIR {settings.DATA_DIR} is not writable")
        signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGTERM, self._on_terminate)
        limits = ", ".join(f"{name} {kind.concurrency}" for name, kind in self.kinds.items())
        logger.info("orchestrator started (pid %d); actors at most: %s", os.getpid(), limits)

    def _on_interrupt(self, signum, frame) -> None:
        if self.draining:
            self.stopping = True
        self.draining = True
        self._wakeup.set()

    def _on_terminate(self, signum, frame) -> None:
        self.stopping = True
        self._wakeup.set()

    def run(self) -> None:
        """Tick until asked to stop, or until idle / ``until()`` when so configured."""
        self.initialize()
        try:
            while not (self.draining or self.stopping):
                spawned = self.tick()
                if self.on_tick:
                    self.on_tick(self)
                if self._finished():
                    break
                # Right after spawning, look again soon: the new actors create more work.
                pause = QUICK_TICK_SECONDS if spawned else settings.ORCHESTRATOR_TICK
                self._wakeup.wait(min(pause, settings.ORCHESTRATOR_TICK))
        finally:
            self.shutdown()

    def tick(self) -> int:
        """Reap finished actors, then spawn actors for due work; return how many were spawned."""
        self.reap()
        self.watch_disk()
        try:
            due = {
                name: kind.model.objects.claimable().count() for name, kind in self.kinds.items()
            }
        except DatabaseError:
            logger.exception("could not count due work; trying again next tick")
            close_old_connections()
            return 0
        spawned = 0
        for name, kind in self.kinds.items():
            wanted = min(kind.concurrency, due[name]) - len(self.actors[name])
            for _ in range(max(wanted, 0)):
                self.spawn(name)
                spawned += 1
        return spawned

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
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                _send(process, signal.SIGKILL)
                process.wait()
        self.reap()
        close_old_connections()
        logger.info(
            "orchestrator stopped; %d actors spawned, %d crashed", self.spawned, self.crashed
        )

    # --- actors -----------------------------------------------------------------------------------

    def spawn(self, name: str) -> subprocess.Popen:
        """Start one ``manage.py actor <name>`` subprocess; its stderr goes to logs/actors.log."""
        cmd = [sys.executable, str(settings.BASE_DIR / "manage.py"), "actor", name]
        with open(settings.LOGS_DIR / "actors.log", "ab") as log:
            process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.actors[name].append(process)
        self.spawned += 1
        logger.debug("spawned %s actor pid %d", name, process.pid)
        return process

    def reap(self) -> None:
        """Forget actors that exited; count and log the ones that crashed (health check)."""
        for name, processes in self.actors.items():
            alive = []
            for process in processes:
                code = process.poll()
                if code is None:
                    alive.append(process)
                elif code != 0 and not self._asked_to_stop(code):
                    self.crashed += 1
                    logger.warning("%s actor pid %d exited with %d", name, process.pid, code)
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

    def running(self) -> list[subprocess.Popen]:
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


def _send(process: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)
