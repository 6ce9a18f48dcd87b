"""The retry rule every work item follows (DESIGN.md §2): after a temporary error, back off with
a growing delay while attempts are left, else fail with "attempts exhausted (n): <error>"; a
record whose worker died (its lease ran out) counts that attempt as such an error; a record that
has not started shares the failed attempt of another that met what it would meet (its page's
server did not answer); a record that waits on others looks again after POLL_INTERVAL.

The rule calls each model's own transitions, passed in as callables: this module sits below the
models and knows none of them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from django.conf import settings
from django.utils import timezone

LEASE_EXPIRED = "worker stopped before finishing (lease expired)"


class Attempted(Protocol):
    """A record that counts its attempts (the current one included, counted when it starts)."""

    attempts: int


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


def exhausted(attempts: int, max_attempts: int) -> bool:
    """True when ``attempts`` made leave none of ``max_attempts`` for another try."""
    return attempts >= max_attempts


def exhausted_reason(attempts: int, error: str) -> str:
    """Return the final error of a record that used up its attempts on ``error``:
    ``"attempts exhausted (<attempts>): <error>"``."""
    return f"attempts exhausted ({attempts}): {error}"


def retry_or_fail(
    record: Attempted,
    error: str,
    *,
    max_attempts: int,
    back_off: Callable[..., object],
    fail: Callable[..., object],
    retry_after: float | None = None,
    say_exhausted: bool = True,
) -> None:
    """After the temporary ``error`` of ``record``'s current attempt, try again later or give up.

    With attempts left, call ``back_off(error=error, delay=seconds)``, the delay growing with
    ``record.attempts`` (backoff_delay, at least ``retry_after`` seconds); else call
    ``fail(error=...)`` with exhausted_reason's text, or ``error`` alone when ``say_exhausted``
    is False (a snapshot's finalizing error already says "finalizing failed"). ``back_off`` and
    ``fail`` are the record's transitions (or a function that runs and saves one); the caller
    saves the record after a bare transition.
    """
    if not exhausted(record.attempts, max_attempts):
        back_off(error=error, delay=backoff_delay(record.attempts, retry_after))
    elif say_exhausted:
        fail(error=exhausted_reason(record.attempts, error))
    else:
        fail(error=error)


def share_failure(
    record: Attempted,
    error: str,
    *,
    max_attempts: int,
    delay: float,
    defer: Callable[..., object],
    give_up: Callable[..., object],
) -> None:
    """Count, for ``record``, which has not started, the attempt of another record that failed
    with the temporary ``error`` and that ``record``'s own would repeat (the same page's server
    did not answer): with attempts left after it, call ``defer(error=error, delay=delay)``, the
    delay the other record backs off for; else ``give_up(error=...)`` with exhausted_reason's
    text. Both transitions count the attempt themselves.
    """
    attempts = record.attempts + 1
    if exhausted(attempts, max_attempts):
        give_up(error=exhausted_reason(attempts, error))
    else:
        defer(error=error, delay=delay)


def recover_expired_lease(
    record: Attempted,
    *,
    max_attempts: int,
    back_off: Callable[..., object],
    fail: Callable[..., object],
    earlier_error: str = "",
) -> None:
    """Count the attempt of ``record`` whose worker died (its lease ran out while the record
    was under way) as a temporary error, LEASE_EXPIRED, and back off or fail as retry_or_fail.

    ``earlier_error``, when given, is the error the record held before that attempt; the
    reason then ends with ``"; before that: <earlier_error>"``.
    """
    error = LEASE_EXPIRED + (f"; before that: {earlier_error}" if earlier_error else "")
    retry_or_fail(record, error, max_attempts=max_attempts, back_off=back_off, fail=fail)


def next_poll(now: datetime | None = None) -> datetime:
    """Return when a record that waits on others looks again: ``now`` (default: the current
    time) plus POLL_INTERVAL seconds. Until then a waiting record is not under lease, whose
    ``retry_at`` lies LEASE_SECONDS (more than twice POLL_INTERVAL) ahead."""
    return (now or timezone.now()) + timedelta(seconds=settings.POLL_INTERVAL)
