"""Handing a crawl over to the orchestrator already running on this machine (``add --wait``).

Deployed, an orchestrator runs all the time under supervisord. ``add --wait`` then leaves the
crawl to it instead of starting a second orchestrator beside it, which would fork actors of its
own up to every kind's limit again (twice the result actors configured, each rendering one with
a Chromium of its own) and pay an orchestrator's start and first forks once more. The command
only watches: it wakes on ``final`` pings (orchestrator/wakeups.py, topic ``watch``) and at
least every HANDOVER_POLL_SECONDS, to show progress and to check that the orchestrator still
listens. When it stopped before the crawl ended (stopped by supervisord, or another ``add
--wait`` whose own crawl is done), the caller archives the rest itself.

The running orchestrator works with its own settings: a crawl without a profile runs the
EXTRACTORS of the process that makes its snapshots, the orchestrator's actors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from orchestrator.wakeups import WATCH, Listener, listening_orchestrators

logger = logging.getLogger(__name__)

HANDOVER_POLL_SECONDS = 0.5


def running_orchestrator() -> int | None:
    """The process id of an orchestrator listening on this machine now, or None."""
    running = listening_orchestrators()
    return running[0] if running else None


def wait_in_running_orchestrator(
    done: Callable[[], bool], on_wait: Callable[[], None] | None = None
) -> bool:
    """Wait until ``done()`` is true while an orchestrator of this machine listens; return
    True when it is, False as soon as none listens any more (``done()`` still false).

    ``on_wait`` runs after each wake-up (a ``final`` ping, or HANDOVER_POLL_SECONDS passing):
    progress to show. KeyboardInterrupt (Ctrl-C) is raised as it comes: the crawl goes on in
    the orchestrator. Raises OSError when the FIFO cannot be made (DATA_DIR not writable).
    """
    with Listener(WATCH) as listener:  # before the first check: no final ping falls between
        while not done():
            if not listening_orchestrators():
                return done()  # it may have ended the crawl just before it stopped
            listener.wait(HANDOVER_POLL_SECONDS)
            if on_wait is not None:
                on_wait()
    return True
