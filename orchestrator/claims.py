"""Claim the next due record with a lease, so that two actors never run the same record.

A claim moves the record's ``retry_at`` forward by its lease in one compare-and-set
(``UPDATE ... WHERE id = %s AND retry_at = %s``): of two actors that read the same candidate, one
update matches and the other matches nothing and moves on. On PostgreSQL the candidate is first
locked with ``SELECT ... FOR UPDATE SKIP LOCKED`` so concurrent actors pick different rows instead
of colliding (DESIGN.md §3).

A record may bring companions: records best run by the same actor right after it (the same
snapshot's screenshot, pdf, dom and singlefile capture the one page the actor's browser loaded,
DESIGN.md §4; title and favicon read the WARC wget wrote, orchestrator/work.py).
``claim_next_with_companions`` claims them in the same transaction as the record, each by the
same compare-and-set (and SKIP LOCKED), with leases laid end to end: the k-th
companion's lease ends where the one before it ends plus its own lease time, so every record
stays owned until the actor, running them one after the other, can have reached its end. A
companion another actor holds is not taken; one the actor does not start is handed back
(``hand_back``) to be claimed at once by anyone.

A kind of record may be admitted in the claim's transaction (``admit``): an archive result is
started there when its host takes one more, and put back when it does not (core/services/
results.py). Had the claim committed first and the start come in a transaction of its own,
other actors' claims in between would count the host one result short, claim what it then
refused, and hand it back (237 of 1,037 claims on 200 pages of one host; none now, and 6 to
9 % less CPU).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cache, partial

from django.db import connection, models, transaction
from django.utils import timezone

from orchestrator.prepared import (
    UpdateBuild,
    compile_ahead,
    compile_by_pk,
    pk_type,
    prepared_exists,
    prepared_records,
    prepared_update,
    record_by_pk,
    update_compiled_at,
    with_related,
)

CANDIDATES_PER_CLAIM = 5
CLAIM_FIELDS = ("pk", "retry_at", "status")

Companions = Callable[[models.Model], models.QuerySet]
Admit = Callable[[models.Model], bool]


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
    claimed = claim_next_with_companions(
        model, lease_seconds=lease_seconds, lease_fields=lease_fields, related=related
    )
    return claimed[0] if claimed else None


def claim_next_with_companions(
    model: type[models.Model],
    *,
    lease_seconds: Callable[[models.Model], float],
    lease_fields: tuple[str, ...] = (),
    related: tuple[str, ...] = (),
    companions: Companions | None = None,
    admit: Admit | None = None,
) -> list[models.Model]:
    """Claim the next due record of ``model`` as ``claim_next`` does and, in the same
    transaction, the claimable records of ``companions(record)`` (see ``claim_companions``).

    ``admit``, when given, is asked in the claim's transaction about the record just claimed
    (not about its companions), with ``related`` loaded: True lets the claim stand (it may act
    on the record there, e.g. start it, so that no claim after this one sees it waiting); False
    means it has put the record back itself (``hand_back``), and the next candidate is tried.

    Return ``[record, *its companions in claim order]``, each carrying the end of its lease as
    ``retry_at``: the record loaded with ``related``, its companions as their rows were read
    (``claim_companions``); ``[]`` when nothing is due (or admitted).
    """
    fields = CLAIM_FIELDS + lease_fields
    now = timezone.now()

    def load(pk) -> list[models.Model]:
        record = record_by_pk(model, pk, related)
        if admit is not None and not admit(record):
            return []
        if companions is None:
            return [record]
        others = claim_companions(record, companions(record), lease_seconds=lease_seconds)
        return [record, *others]

    limit, skip_locked = _claim_shape(admitted=admit is not None)
    if skip_locked:  # PostgreSQL
        with transaction.atomic():
            for candidate in _candidates(model, fields, now, limit, skip_locked=True):
                lease_end = now + timedelta(seconds=lease_seconds(candidate))
                model.objects.filter(pk=candidate.pk).update(retry_at=lease_end)
                if claimed := load(candidate.pk):
                    return claimed
        return []
    if admit is None:
        # Read without the write lock, every candidate may be lost to other actors' claims
        # before its own: read again until one is won or none is left, so that [] means
        # nothing is due. Each lost candidate was another claim's win, so this ends.
        while candidates := _candidates(model, fields, now, limit):
            for candidate in candidates:
                # An immediate transaction on SQLite (archive/settings.py): no other claim
                # comes between the record's and its companions'.
                with transaction.atomic():
                    lease_end = now + timedelta(seconds=lease_seconds(candidate))
                    if _compare_and_set(candidate, lease_end):
                        return load(candidate.pk)
        return []
    # Candidates that may be refused are read under the write lock too: what the claim's
    # filter counts then stays true until the admission, which refuses only what the filter
    # cannot know (a crawl's own limit or delay). But first without it: a ping wakes every
    # idle actor of its kind and one of them takes the work, so half the claims of a batch
    # found nothing, each after waiting for SQLite's write lock and making every writer wait
    # meanwhile. Work that becomes due after this read pings this actor's listener, which
    # holds the wake-up until it next waits (orchestrator/wakeups.py).
    if not _any_candidate(model, fields, now, limit):
        return []
    with transaction.atomic():
        for candidate in _candidates(model, fields, now, limit):
            lease_end = now + timedelta(seconds=lease_seconds(candidate))
            if _compare_and_set(candidate, lease_end) and (claimed := load(candidate.pk)):
                return claimed
    return []


def claim_companions(
    first: models.Model,
    candidates: Sequence[models.Model],
    *,
    lease_seconds: Callable[[models.Model], float],
) -> list[models.Model]:
    """Claim the records of ``candidates``, in claim order, to run one after the other after
    ``first``, which this actor holds with a lease ending ``first.retry_at``; return the rows
    won, each with the end of its lease as ``retry_at``. They are not loaded whole here: the
    actor loads each afresh, with what it needs, right before it runs it (``reload_claimed``,
    which also finds out whether it is still runnable by then).

    ``candidates`` are the rows that may be taken (orchestrator/work.py): due ones, or ones
    that wait for ``first`` alone and will be runnable once it ends; read in this transaction,
    in claim order, with CLAIM_FIELDS and ``lease_fields`` (and on PostgreSQL locked ``FOR
    UPDATE SKIP LOCKED``), as ``companion_rows`` reads a queryset. Not claimable: what a model
    holds back from a claim (an archive result of a host that runs as many as it may) was asked
    of ``first``, and the companions run in its place, one after the other in this actor. Held
    back by the count ``first`` itself just made, they would be claimed one by one by other
    actors later, each loading the page again.

    The lease of each ends at the end of the one before it plus ``lease_seconds`` of itself
    (the k-th: ``first.retry_at`` + the lease times of companions 1 to k). Each is taken by
    compare-and-set on its ``retry_at`` and status, on PostgreSQL after ``SELECT ... FOR UPDATE
    SKIP LOCKED``: one that another actor holds or is claiming is left to it. Run it in the
    transaction that claimed ``first``, so that no other claim comes between.
    """
    lease_end = first.retry_at
    won = []
    # No savepoint within the claim's transaction: a failure here fails the whole claim.
    with transaction.atomic(savepoint=False):
        for row in candidates:
            end = lease_end + timedelta(seconds=lease_seconds(row))
            if _compare_and_set(row, end):
                lease_end = row.retry_at = end
                won.append(row)
    return won


def companion_rows(candidates: models.QuerySet, fields: tuple[str, ...]) -> models.QuerySet:
    """``candidates`` as ``claim_companions`` reads them: in claim order, with ``fields``
    only, and on PostgreSQL locked ``FOR UPDATE SKIP LOCKED`` (run it in a transaction)."""
    rows = candidates.claim_order().only(*fields)
    if connection.vendor == "postgresql":
        rows = rows.select_for_update(skip_locked=True, of=("self",))
    return rows


def reload_claimed(
    record: models.Model, *, lease_end: datetime, related: tuple[str, ...] = ()
) -> models.Model | None:
    """Return ``record`` loaded afresh with ``related`` if it still holds the lease ending
    ``lease_end`` and is runnable (its model's ``runnable()``: still active, no hold pauses it,
    nothing it waits for unfinished), else None: a companion claimed minutes ago is checked
    so before it starts. Compiled once per process (orchestrator/prepared.py): building the
    statement, the model's runnable filter with ``related`` joined in, took 30 times as long
    as running it."""
    model = type(record)
    found = prepared_records(*_reload_query(model, related), record.pk, lease_end)
    return found[0] if found else None


def _reload_query(
    model: type[models.Model], related: tuple[str, ...]
) -> tuple[str, Callable[..., models.QuerySet]]:
    """The key and build of ``reload_claimed``'s statement."""

    def build(pk, lease_end: datetime) -> models.QuerySet:
        return with_related(model.objects.runnable().filter(pk=pk, retry_at=lease_end), related)

    return f"reload claimed {model._meta.label} with {related}", build


def hand_back(
    record: models.Model,
    *,
    lease_end: datetime,
    wake_idle: bool = True,
    due_at: datetime | None = None,
) -> datetime | None:
    """Give up the lease, ending ``lease_end``, of a claimed ``record`` that was not started:
    make it due now (or at ``due_at`` when that is later), so that any actor may claim it
    then. Return that moment (no other actor can have claimed the record before it), or None
    when the record no longer holds that lease (it changed since: it is not this actor's to
    give).

    ``wake_idle=False`` pings no idle actor: for a record handed back because what it needs
    is busy (its host's places, core/services/hosts.py), which an idle actor woken now could
    only claim and hand back again. The actor that frees the place claims next by itself, and
    the orchestrator's tick is the safety net.
    """
    now = timezone.now()
    if due_at is not None and due_at > now:
        now = due_at
    still_held = type(record).objects.filter(pk=record.pk, retry_at=lease_end)
    if wake_idle:
        given = still_held.update(retry_at=now)
    else:
        given = still_held.update_quietly(retry_at=now)
    return now if given else None


def _claim_shape(*, admitted: bool) -> tuple[int, bool]:
    """How many candidates a claim reads, and whether it locks them ``FOR UPDATE SKIP
    LOCKED``, on this database. On PostgreSQL one candidate is enough when it cannot be
    refused (no ``admit``); others lock a few, and try them in turn in one transaction (their
    own locks do not hide them from a second SELECT). SQLite has no row locks."""
    if connection.vendor == "postgresql":
        return (CANDIDATES_PER_CLAIM if admitted else 1), True
    return CANDIDATES_PER_CLAIM, False


def _claimable(
    queryset: models.QuerySet, now: datetime, fields: tuple[str, ...], variant: str | None = None
):
    return queryset.claimable(now, variant=variant).claim_order().only(*fields)


def _candidates(
    model: type[models.Model],
    fields: tuple[str, ...],
    now: datetime,
    limit: int,
    *,
    skip_locked: bool = False,
) -> list[models.Model]:
    """The first ``limit`` records of ``model`` claimable at ``now``, in claim order, with
    ``fields`` loaded; on PostgreSQL with ``skip_locked``, locked ``FOR UPDATE SKIP LOCKED``
    (run it in a transaction). Compiled once per process for each ``claimable_variant``
    (orchestrator/prepared.py): it is the statement every claim runs."""
    variant = model.objects.claimable_variant()
    return prepared_records(*_candidates_query(model, fields, limit, skip_locked, variant), now)


def _any_candidate(
    model: type[models.Model], fields: tuple[str, ...], now: datetime, limit: int
) -> bool:
    """Whether ``_candidates`` would find any: the same statement asked ``EXISTS``, which
    SQLite ends at the first row it finds rather than reading them all to sort them."""
    variant = model.objects.claimable_variant()
    return prepared_exists(*_candidates_query(model, fields, limit, False, variant), now)


def _candidates_query(
    model: type[models.Model],
    fields: tuple[str, ...],
    limit: int,
    skip_locked: bool,
    variant: str,
) -> tuple[str, Callable[[datetime], models.QuerySet]]:
    """The key and build of ``_candidates``'s statement."""

    def build(at: datetime) -> models.QuerySet:
        candidates = _claimable(model.objects.all(), at, fields, variant)
        if skip_locked:
            candidates = candidates.select_for_update(skip_locked=True, of=("self",))
        return candidates[:limit]

    key = f"claim {model._meta.label} {','.join(fields)} {limit} {skip_locked} {variant}"
    return key, build


def claim_compilations(
    model: type[models.Model],
    *,
    lease_fields: tuple[str, ...] = (),
    related: tuple[str, ...] = (),
    admitted: bool = False,
    companions: bool = False,
) -> list[Callable[[], None]]:
    """The steps that compile ahead, one statement each, what a claim of ``model`` runs on this
    database (its candidates, the load of the record won and, with ``companions``, the reload of
    a companion before it runs), as ``claim_next_with_companions`` would with these arguments
    (``admitted``: with an ``admit``), without running them."""
    limit, skip_locked = _claim_shape(admitted=admitted)
    variant = model.objects.claimable_variant()
    query = _candidates_query(model, CLAIM_FIELDS + lease_fields, limit, skip_locked, variant)
    steps = [partial(compile_ahead, *query, (datetime,)), partial(compile_by_pk, model, related)]
    lease_types = (pk_type(model), datetime, str, datetime)
    steps.append(
        partial(compile_ahead, *_compare_and_set_query(model), lease_types, update_compiled_at)
    )
    if companions:
        reload = _reload_query(model, related)
        steps.append(partial(compile_ahead, *reload, (pk_type(model), datetime)))
    return steps


def _compare_and_set(candidate: models.Model, lease_end: datetime) -> bool:
    """Move ``candidate``'s ``retry_at`` to ``lease_end`` if it still has the ``retry_at`` and
    status it was read with; True when it did (the record is now this actor's).

    One UPDATE compiled once per process, some ten times a page; the model is then told of it
    (``WorkItem.announce_update``), which wakes nobody for a lease ahead."""
    model = type(candidate)
    args = (candidate.pk, candidate.retry_at, candidate.status, lease_end)
    taken = prepared_update(*_compare_and_set_query(model), *args)
    model.announce_update(taken, {"retry_at": lease_end})
    return bool(taken)


@cache
def _compare_and_set_query(model: type[models.Model]) -> tuple[str, UpdateBuild]:
    """The key and build of ``_compare_and_set``'s UPDATE: ``(pk, retry_at read, status read,
    lease end)``."""

    def build(pk, retry_at: datetime, status: str, lease_end: datetime):
        rows = model.objects.filter(pk=pk, retry_at=retry_at, status=status)
        return rows, {"retry_at": lease_end}

    return f"compare and set {model._meta.label}", build
