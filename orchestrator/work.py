"""The kinds of work the orchestrator schedules: model, tick service, lease, actor limit and,
for archive results, the companions an actor claims with a record (orchestrator/claims.py).

An archive result whose extractor shares the browser's visit (``Extractor.shares_visit``: the
screenshot, pdf, dom and singlefile) comes with the same snapshot's other claimable results that
share it: one actor runs them one after the other, so its browser loads the page once for all
of them instead of once per actor (DESIGN.md §4). A wget result comes with the readers that
wait for it alone (title, favicon, htmltotext...): they read its WARC right after it, in the
same process, where the WARC's index and the parsed page are at hand.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.extractors.preloading import preload
from core.extractors.registry import EXTRACTORS, get_extractor, profile_lazy_imports
from core.models import ArchiveResult, Snapshot, StorageCopy
from core.services.copies import copy_tick
from core.services.crawls import crawl_tick
from core.services.results import result_admit, result_tick
from core.services.snapshots import snapshot_tick
from crawls.models import Crawl
from orchestrator.claims import CLAIM_FIELDS, claim_compilations, companion_rows
from orchestrator.prepared import Statement, declared_compilations
from orchestrator.retries import next_poll


@dataclass(frozen=True)
class WorkType:
    """One kind of work item: its model, its tick service, its lease and its actor limit."""

    name: str
    model: type[models.Model]
    tick: Callable[[models.Model], None]
    lease_seconds: Callable[[models.Model], float]
    concurrency_setting: str
    lease_fields: tuple[str, ...] = ()  # what lease_seconds reads of a candidate
    related: tuple[str, ...] = ()  # joined in when the claimed record is loaded
    # The records to claim with a claimed one and run right after it
    # (rows in claim order, as claims.companion_rows reads them; None: none ever)
    companions: Callable[[models.Model], Sequence[models.Model]] | None = None
    # How a companion is ticked (None: as ``tick``): it runs in the slot its claim's first
    # record took, so a per-host limit does not hold it back.
    companion_tick: Callable[[models.Model], None] | None = None
    # Asked in the claim's transaction whether the claimed record may start (claims.py);
    # None: every claim stands.
    admit: Callable[[models.Model], bool] | None = None
    # Run once as an actor of this kind starts, before its first claim (None: nothing).
    prepare: Callable[[], None] | None = None

    @property
    def concurrency(self) -> int:
        """Most actors of this kind at once (from settings, e.g. ACTORS_SNAPSHOT)."""
        return getattr(settings, self.concurrency_setting)

    def compile_statements(self) -> None:
        """Compile what this kind's actors run on each claim and tick (orchestrator/
        prepared.py), so that each actor forked afterwards starts with it compiled
        (``compile_ahead``)."""
        for step in self.compilations():
            step()

    def compilations(self) -> list[Callable[[], None]]:
        """``compile_statements`` as steps of one statement each (the orchestrator runs them
        while nothing waits for it, between wake-ups)."""
        claims = claim_compilations(
            self.model,
            lease_fields=self.lease_fields,
            related=self.related,
            admitted=self.admit is not None,
            companions=self.companions is not None,
        )
        return [*claims, *declared_compilations(self.name)]


def _fixed_lease(_record) -> float:
    return settings.LEASE_SECONDS


def _copy_lease(_copy) -> float:
    """A storage copy uploads a whole snapshot folder and reads it back: a long lease."""
    return settings.STORAGE_LEASE_SECONDS


def _result_lease(result) -> float:
    """An archive result is owned for its extractor's timeout plus a margin, and never for
    less than twice POLL_INTERVAL: a lease must lie past the next poll of a waiting record,
    which is what tells the two apart when a step's end makes its waiting readers due
    (ArchiveResult.announce, WorkQuerySet.wake), as LEASE_SECONDS does for the others."""
    own = get_extractor(result.extractor).timeout + settings.LEASE_MARGIN
    return max(own, 2 * settings.POLL_INTERVAL)


VISIT_SHARING = tuple(extractor.name for extractor in EXTRACTORS if extractor.shares_visit)
# Extractor -> the extractors that read its output (``Extractor.depends_on``): wget's WARC is
# read by title, favicon and the other page readers.
READERS = {
    read.name: readers
    for read in EXTRACTORS
    if (readers := tuple(reader.name for reader in EXTRACTORS if read.name in reader.depends_on))
}
# What a result's lease is worked out from (``_result_lease``), with what every claim reads.
RESULT_CLAIM_FIELDS = (*CLAIM_FIELDS, "extractor")


def _visit_rows(snapshot_id: uuid.UUID, pk: int, now: datetime) -> models.QuerySet:
    due = ArchiveResult.objects.filter(snapshot_id=snapshot_id, extractor__in=VISIT_SHARING)
    return companion_rows(due.exclude(pk=pk).due(now), RESULT_CLAIM_FIELDS)


def _reader_rows(extractor: str, snapshot_id: uuid.UUID, not_leased: datetime) -> models.QuerySet:
    readers = ArchiveResult.objects.filter(
        snapshot_id=snapshot_id, extractor__in=READERS[extractor]
    )
    return companion_rows(readers.waiting_only_for(extractor, not_leased), RESULT_CLAIM_FIELDS)


# Compiled once (orchestrator/prepared.py): built with Django's ORM at every claim, they cost
# more than the rest of the claim.
VISIT_COMPANIONS = Statement(
    "visit companions", _visit_rows, (uuid.UUID, int, datetime), actors=("archiveresult",)
)
WAITING_READERS = {
    name: Statement(
        f"readers waiting for {name}",
        partial(_reader_rows, name),
        (uuid.UUID, datetime),
        actors=("archiveresult",),
    )
    for name in READERS
}


def _result_companions(result: ArchiveResult) -> list[ArchiveResult]:
    """What a result actor claims with ``result`` (claims.claim_companions), to run right
    after it, as rows in claim order: the same snapshot's due results whose extractor shares
    the browser's visit, when ``result``'s does (DESIGN.md §4); then its readers that wait for
    it alone (``waiting_only_for``), whose reading of what it saved is then this process's
    second look at files it has just written (wget's WARC: core/extractors/warc_index.py),
    and which no other actor claims one by one when it ends (``_companion_tick`` says how each
    starts)."""
    now = timezone.now()
    rows = []
    if result.extractor in VISIT_SHARING:
        rows += VISIT_COMPANIONS.records(result.snapshot_id, result.pk, now)
    if result.extractor in WAITING_READERS:
        rows += WAITING_READERS[result.extractor].records(result.snapshot_id, next_poll(now))
    return rows


def _companion_tick(result: ArchiveResult) -> None:
    """Tick a companion: one that shares the visit keeps the place on its host that the
    claim's first result took (it loads no page of its own); a reader starts under the host's
    limit as any result does, and one the host does not take then is handed back."""
    result_tick(result=result, keeps_host_slot=result.extractor in VISIT_SHARING)


def _preload_extractors() -> None:
    """Have a result actor import what its extractors import on first use in a thread of its
    own from its first command on, not on its way from one result to the next (core/
    extractors/preloading.py). The orchestrator, which forks it, never loads them."""
    preload(profile_lazy_imports())


def work_types() -> dict[str, WorkType]:
    """Return every kind of work by name, in the order the orchestrator spawns them."""
    kinds = [
        WorkType("crawl", Crawl, lambda c: crawl_tick(crawl=c), _fixed_lease, "ACTORS_CRAWL"),
        WorkType(
            "snapshot", Snapshot, lambda s: snapshot_tick(snapshot=s), _fixed_lease,
            "ACTORS_SNAPSHOT", related=("crawl",),
        ),
        WorkType(
            "archiveresult", ArchiveResult, lambda r: result_tick(result=r), _result_lease,
            "ACTORS_ARCHIVERESULT", lease_fields=("extractor",), related=("snapshot__crawl",),
            companions=_result_companions,
            companion_tick=_companion_tick,
            admit=lambda r: result_admit(result=r),
            prepare=_preload_extractors,
        ),
        WorkType(
            "storagecopy", StorageCopy, lambda c: copy_tick(copy=c), _copy_lease,
            "ACTORS_STORAGECOPY", related=("snapshot",),
        ),
    ]  # fmt: skip
    return {kind.name: kind for kind in kinds}
