"""How long to wait before the next attempt after a temporary error."""

from __future__ import annotations

import random

from django.conf import settings

LEASE_EXPIRED = "worker stopped before finishing (lease expired)"


def backoff_delay(attempt: int, retry_after: float | None = None) -> float:
    """Return seconds to wait before attempt ``attempt + 1``.

    Exponential: ``BACKOFF_BASE * 2**(attempt - 1)`` with "full jitter" between half and all of it
    (so retries of many records spread out), never less than the server's Retry-After (RFC 9110
    §10.2.3), and never more than ``BACKOFF_CAP``.
    """
    exponential = settings.BACKOFF_BASE * 2 ** max(attempt - 1, 0)
    delay = random.uniform(exponential / 2, exponential)
    if retry_after:
        delay = max(delay, retry_after)
    return min(delay, settings.BACKOFF_CAP)
