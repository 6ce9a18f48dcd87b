"""Workflows over the whole queue: hold it and release it (the global hold)."""

from __future__ import annotations

import logging

from django.db import transaction

from orchestrator.models import QueueState
from orchestrator.wakeups import notify_due, notify_final

logger = logging.getLogger(__name__)


def queue_hold(*, reason: str = "") -> QueueState:
    """Hold the whole queue: no crawl, snapshot, archive result or storage copy is claimed
    until it is released, on every machine sharing the database; work under way finishes.
    Raises TransitionNotAllowed when it is already held."""
    with transaction.atomic():
        state = QueueState.objects.select_for_update().get(pk=QueueState.current().pk)
        state.hold(reason=reason)
        state.save()
        notify_final("queue")  # an add --wait stops waiting at once
    logger.warning("queue held%s", f": {reason}" if reason else "")
    return state


def queue_release() -> QueueState:
    """Release the whole queue: due work is claimed again, from where it stopped. Raises
    TransitionNotAllowed when it is not held."""
    with transaction.atomic():
        state = QueueState.objects.select_for_update().get(pk=QueueState.current().pk)
        state.release()
        state.save()
        notify_due("queue")  # orchestrators count every kind again at once
    logger.info("queue released")
    return state
