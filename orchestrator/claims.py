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

CANDIDATES_PER_CLAIM = 5
CLAIM_FIELDS = ("pk", "retry_at", "status")


def claim_next(
    model: type[models.Model],
    *,
    lease_seconds: Callable[[models.Model], float],
    lease_fields: tuple[str, ...] = (),
    related: tuple[str, ...] = (),
) -> models.Model | None:
    """Claim and return the next due record of ``model`` (priority first, then oldest), or None.

    Candidates are read lean (``pk``, ``retry_at``, ``status`` and the ``lease_fields`` that
    ``lease_seconds`` reads); the record won is then loaded once, with ``related`` joined in.
    The returned instance carries its new ``retry_at`` (the end of its lease).
    """
    fields = CLAIM_FIELDS + lease_fields
    if connection.vendor == "postgresql":
        won = _claim_skip_locked(model, lease_seconds, fields)
    else:
        won = _claim_compare_and_set(model, lease_seconds, fields)
    if won is None:
        return None
    return model.objects.select_related(*related).get(pk=won)


def _claim_compare_and_set(model, lease_seconds, fields):
    now = timezone.now()
    candidates = model.objects.claimable(now).claim_order().only(*fields)
    for candidate in candidates[:CANDIDATES_PER_CLAIM]:
        lease_end = now + timedelta(seconds=lease_seconds(candidate))
        won = model.objects.filter(
            pk=candidate.pk, retry_at=candidate.retry_at, status=candidate.status
        ).update(retry_at=lease_end)
        if won:
            return candidate.pk
    return None


def _claim_skip_locked(model, lease_seconds, fields):
    now = timezone.now()
    with transaction.atomic():
        candidate = (
            model.objects.claimable(now)
            .claim_order()
            .only(*fields)
            .select_for_update(skip_locked=True, of=("self",))
            .first()
        )
        if candidate is None:
            return None
        lease_end = now + timedelta(seconds=lease_seconds(candidate))
        model.objects.filter(pk=candidate.pk).update(retry_at=lease_end)
    return candidate.pk
