"""Handing a crawl over to the orchestrator that stays on this machine (``add --wait``).

Deployed, an orchestrator runs all the time under supervisord. ``add --wait`` then leaves the
crawl to it instead of starting a second orchestrator beside it, which would fork actors of its
own up to every kind's limit again (twice the result actors configured, each rendering one with
a Chromium of its own) and pay an orchestrator's start and first forks once more. The command
only watches: it wakes on ``final`` pings (orchestrator/wakeups.py, topic ``watch``) and at
least every HANDOVER_POLL_SECONDS, to show progress and to check that the orchestrator still
listens. When it stopped before the crawl ended (supervisord stopped it, or it was suspended),
the caller archives the rest itself.

The orchestrator works with its own settings: a crawl without a profile runs the EXTRACTORS of
the process that makes its snapshots, the orchestrator's actors.
"""

from __future__ import annotations

import enum
import logging
import signal
from collections.abc import Callable

from django.db import DatabaseError, close_old_connections

from orchestrator.wakeups import WATCH, Listener, staying_orchestrators

logger = logging.getLogger(__name__)

# Seconds between two checks that the orchestrator still listens (and two progress updates):
# the crawl's end itself comes at once, by its final ping.
HANDOVER_POLL_SECONDS = 0.5
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class WaitEnd(enum.Enum):
    """How a wait for the staying orchestrator ended."""

    DONE = "done"  # ``done()`` became true
    ORCHESTRATOR_STOPPED = "orchestrator stopped"  # none listens any more; not done
    INTERRUPTED = "interrupted"  # SIGINT (Ctrl-C) or SIGTERM: the crawl goes on without us


class CannotWait(Exception):
    """The waiting command's FIFO cannot be made (DATA_DIR not writable, disk full)."""


def staying_orchestrator() -> int | None:
    """Return the process id of an orchestrator that stays and listens on this machine now,
    or None."""
    running = staying_orchestrators()
    return running[0] if running else None


def wait_for_staying_orchestrator(
    done: Callable[[], bool], on_wait: Callable[[], None] | None = None
) -> WaitEnd:
    """Wait until ``done()`` is true while an orchestrator that stays listens on this machine;
    say how the wait ended (WaitEnd).

    ``on_wait`` runs after each wake-up (a ``final`` ping, or HANDOVER_POLL_SECONDS passing):
    progress to show. SIGINT and SIGTERM end the wait (their handlers only set a flag and cut
    the wait short) and are restored as they were. A database error in ``done`` or ``on_wait``
    is logged and the next wake-up tries again. Raises CannotWait when the FIFO cannot be made.
    """
    signalled: list[int] = []
    listener: Listener | None = None

    def on_signal(signum, _frame) -> None:
        signalled.append(signum)
        if listener is not None:
            listener.interrupt()

    previous = {signum: signal.signal(signum, on_signal) for signum in ENDING_SIGNALS}
    try:
        try:
            listener = Listener(WATCH)  # before the first check: no final ping falls between
        except OSError as error:
            raise CannotWait(str(error)) from None
        with listener:
            return _watch(listener, done, on_wait, signalled)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _watch(listener: Listener, done, on_wait, signalled: list[int]) -> WaitEnd:
    while not signalled:
        try:
            if done():
                return WaitEnd.DONE
            if not staying_orchestrators():
                # It may have ended the crawl just before it stopped.
                return WaitEnd.DONE if done() else WaitEnd.ORCHESTRATOR_STOPPED
            listener.wait(HANDOVER_POLL_SECONDS)
            if on_wait is not None and not signalled:
                on_wait()
        except DatabaseError as error:  # a restarted server, a lock held too long: try again
            logger.warning("add --wait: %s; trying again", error)
            close_old_connections()
            listener.wait(HANDOVER_POLL_SECONDS)
    return WaitEnd.INTERRUPTED
