"""Import, in a background thread, the modules the extractors import on first use.

An extractor imports what only it needs (BeautifulSoup and lxml, inscriptis, Playwright,
trafilatura: ``Extractor.lazy_imports``) when it first runs, so that processes that never run
it, the idle orchestrator above all, do not load them. A result actor would then pay for them
between two results: for one URL, title and favicon each spent some 60 ms importing
BeautifulSoup and lxml after wget, while their actors had waited idle for curl and wget. So a
result actor queues them as it starts (orchestrator/work.py), and a thread imports them from
the start of its first command, while the actor has nothing to do but wait (not from the
actor's start: the thread would slow the actor's first claim, under SQLite's write lock).

Not in the actor's own thread, as before: an import holds the GIL for tens of milliseconds at
a time, and the command's egress proxy (core/extractors/egress.py) serves the command from
another thread of the same process, waiting for the GIL at every socket call; wget's result
took 220 ms instead of 180 on one URL. Nor could the actor see its command end in the middle
of an import. While the thread imports, the interpreter's switch
interval is cut from 5 ms to ``SWITCH_INTERVAL_SECONDS``, so that a thread that waits for the
GIL (the proxy's, or the actor's as its command ends) gets it within that time; it is put
back when the queue is empty.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Iterable

logger = logging.getLogger(__name__)

SWITCH_INTERVAL_SECONDS = 0.0005

_queue: list[str] = []  # first queued, first imported
_lock = threading.Lock()
_thread: threading.Thread | None = None


def preload(modules: Iterable[str]) -> None:
    """Queue ``modules`` (dotted names) to be imported once this process runs its next
    command (``start``), first queued first.

    A module that fails to import is logged at debug and passed over: its extractor meets the
    same error when it runs, and reports it on its result.
    """
    with _lock:
        _queue.extend(modules)


def start() -> threading.Thread | None:
    """Start the thread that imports what is queued, unless it runs already or nothing is
    queued; return the thread that imports (None when none does). process.py's
    ``run_command`` calls it as each command starts: the actor then only waits. A thread
    that cannot be started is logged and left for the next call; nothing is lost."""
    global _thread
    with _lock:
        if _thread is None and _queue:
            previous = sys.getswitchinterval()
            thread = threading.Thread(
                target=_import_queued, args=(previous,), name="preloading", daemon=True
            )
            sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
            try:
                thread.start()
            except RuntimeError as error:  # "can't start new thread": out of threads or memory
                sys.setswitchinterval(previous)
                logger.warning("cannot start the preloading thread: %s", error)
                return None
            _thread = thread
        return _thread


def _import_queued(switch_interval: float) -> None:
    try:
        while name := _next():
            try:
                importlib.import_module(name)
            except Exception as error:  # its extractor meets and reports the same error
                logger.debug("preloading %s: %s", name, error)
    finally:
        _stopped(switch_interval)


def _next() -> str | None:
    with _lock:
        return _queue.pop(0) if _queue else None


def _stopped(switch_interval: float) -> None:
    """Forget the thread and put the switch interval back, under the lock: a module queued
    meanwhile waits for the next ``start``."""
    global _thread
    with _lock:
        _thread = None
        sys.setswitchinterval(switch_interval)
