"""The kinds of work the orchestrator schedules: model, tick service, lease, actor limit and,
for archive results, the companions an actor claims with a record (orchestrator/claims.py).

An archive result whose extractor shares the browser's visit (``Extractor.shares_visit``: the
screenshot, pdf, dom and singlefile) comes with the same snapshot's other claimable results that
share it: one actor runs them one after the other, so its browser loads the page once for all
of them instead of once per actor (DESIGN.md §4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import models

from core.extractors.preloading import preload
from core.extractors.registry import EXTRACTORS, get_extractor, profile_lazy_imports
from core.models import ArchiveResult, Snapshot, StorageCopy
from core.services.copies import copy_tick
from core.services.crawls import crawl_tick
from core.services.results import result_admit, result_tick
from core.services.snapshots import snapshot_tick
from crawls.models import Crawl
from orchestrator.claims import compile_claims
from orchestrator.prepared import compile_declared


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
    # The records to claim with a claimed one and run right after it (None: none ever)
    companions: Callable[[models.Model], models.QuerySet] | None = None
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
        prepared.py): the orchestrator does so before it forks the first of them, so that
        each starts with it compiled (``compile_ahead``)."""
        compile_claims(
            self.model,
            lease_fields=self.lease_fields,
            related=self.related,
            admitted=self.admit is not None,
        )
        compile_declared(self.name)


def _fixed_lease(_record) -> float:
    return settings.LEASE_SECONDS


def _copy_lease(_copy) -> float:
    """A storage copy uploads a whole snapshot folder and reads it back: a long lease."""
    return settings.STORAGE_LEASE_SECONDS


def _result_lease(result) -> float:
    """An archive result is owned for its extractor's timeout plus a margin."""
    return get_extractor(result.extractor).timeout + settings.LEASE_MARGIN


def _visit_companions(result: ArchiveResult) -> models.QuerySet:
    """The same snapshot's other results whose extractor shares the browser's visit, when
    ``result``'s does (none otherwise); claims.claim_companions takes the due ones."""
    sharing = [extractor.name for extractor in EXTRACTORS if extractor.shares_visit]
    if result.extractor not in sharing:
        return ArchiveResult.objects.none()
    return ArchiveResult.objects.filter(
        snapshot_id=result.snapshot_id, extractor__in=sharing
    ).exclude(pk=result.pk)


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
            companions=_visit_companions,
            companion_tick=lambda r: result_tick(result=r, keeps_host_slot=True),
            admit=lambda r: result_admit(result=r),
            prepare=_preload_extractors,
        ),
        WorkType(
            "storagecopy", StorageCopy, lambda c: copy_tick(copy=c), _copy_lease,
            "ACTORS_STORAGECOPY", related=("snapshot",),
        ),
    ]  # fmt: skip
    return {kind.name: kind for kind in kinds}
