"""Claim the next due record with a lease, so that two actors never run the same record.

A claim moves the record's ``retry_at`` forward by its lease in one compare-and-set
(``UPDATE ... WHERE id = %s AND retry_at = %s``): of two actors that read the same candidate, one
update matches and the other matches nothing and moves on. On PostgreSQL the candidate is first
locked with ``SELECT ... FOR UPDATE SKIP LOCKED`` so concurrent actors pick different rows instead
of colliding (DESIGN.md §3).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.db import connection, models, transaction
from django.utils import timezone

CANDIDATES_PER_CLAIM = 20


def claim_next(
    model: type[models.Model], *, lease_seconds: Callable[[models.Model], float]
) -> models.Model | None:
    """Claim and return the next due record of ``model`` (priority first, then oldest), or None.

    The returned instance carries its new ``retry_at`` (the end of its lease).
    """
    if connection.vendor == "postgresql":
        return _claim_skip_locked(model, lease_seconds)
    return _claim_compare_and_set(model, lease_seconds)


def _claim_compare_and_set(model, lease_seconds):
    now = timezone.now()
    for candidate in model.objects.claimable(now).claim_order()[:CANDIDATES_PER_CLAIM]:
        lease_end = now + timedelta(seconds=lease_seconds(candidate))
        won = model.objects.filter(
            pk=candidate.pk, retry_at=candidate.retry_at, status=candidate.status
        ).update(retry_at=lease_end)
        if won:
            candidate.retry_at = lease_end
            return candidate
    return None


def _claim_skip_locked(model, lease_seconds):
    now = timezone.now()
    with transaction.atomic():
        candidate = (
            model.objects.claimable(now)
            .claim_order()
            .select_for_update(skip_locked=True, of=("self",))
            .first()
        )
        if candidate is None:
            return None
        lease_end = now + timedelta(seconds=lease_seconds(candidate))
        model.objects.filter(pk=candidate.pk).update(retry_at=lease_end)
    candidate.retry_at = lease_end
    return candidate
