"""Workflows over snapshots and archive results: what an actor's tick does to each.

Every state change goes through a model transition inside ``transaction.atomic()``; this module
decides which transition, runs extractors and moves their outputs into place.
"""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django_fsm import TransitionNotAllowed

from core.choices import SnapshotStatus
from core.folder.wacz import warm_up_packaging
from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_hold, snapshots_tag_like_crawl
from core.services.finalizing import snapshot_finalize, wake_crawl_if_done
from core.services.scope import Screened, crawl_admit, crawl_over_bytes, crawl_screen
from core.services.unchanged import snapshot_find_unchanged
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.models import WakeStatement
from orchestrator.retries import next_poll

logger = logging.getLogger(__name__)


# --- snapshots -----------------------------------------------------------------------------------


def snapshot_tick(*, snapshot: Snapshot) -> None:
    """Advance ``snapshot`` one step, whatever active state it is in."""
    if snapshot.status == SnapshotStatus.QUEUED:
        snapshot_start(snapshot=snapshot)
    elif snapshot.status == SnapshotStatus.STARTED:
        snapshot_check_results(snapshot=snapshot)
    elif snapshot.status == SnapshotStatus.FINALIZING:
        snapshot_finalize(snapshot=snapshot)


def snapshot_start(*, snapshot: Snapshot) -> None:
    """Start ``snapshot``: create one queued ArchiveResult per step of its crawl's profile; or,
    when its crawl keeps only changes and the page serves its last capture's bytes, none
    (core/services/unchanged.py).

    A profile that no longer passes its rules (an extractor since removed from the registry)
    holds the crawl with the reason, and the snapshot waits: fix the profile, then release.
    """
    try:
        steps = snapshot.crawl.planned_steps()
    except ValidationError as error:
        _hold_for_profile(snapshot.crawl_id, "; ".join(error.messages))
        return
    if crawl_over_bytes(crawl=snapshot.crawl):
        _leave_out(snapshot, f"max-bytes {snapshot.crawl.max_bytes} reached")
        return
    since = snapshot_find_unchanged(snapshot=snapshot)
    if since is not None:
        with transaction.atomic():
            snapshot.start_unchanged(since=since)
            snapshot.save()
        snapshot_check_results(snapshot=snapshot)  # no result to wait for: finalize now
        return
    with transaction.atomic():
        snapshot.start()
        snapshot.retry_at = next_poll()
        snapshot.save()
        ArchiveResult.objects.bulk_create(
            [ArchiveResult.for_step(snapshot, step) for step in steps], ignore_conflicts=True
        )
    if settings.PACKAGE_WACZ:
        # This actor most likely finalizes the snapshot too, once its results are final.
        warm_up_packaging()


def _leave_out(snapshot: Snapshot, reason: str) -> None:
    """Leave ``snapshot`` out of its crawl, which reached a limit before it started."""
    with transaction.atomic():
        crawl = Crawl.objects.select_for_update().lean().get(pk=snapshot.crawl_id)
        snapshot.leave_out(reason=reason)
        snapshot.save()
        if not crawl.stop_reason and crawl.status == CrawlStatus.STARTED:
            crawl.stop_growing(reason=reason)
            crawl.save()
    logger.info("snapshot %s (%s) left out: %s", snapshot.pk, snapshot.url, reason)
    wake_crawl_if_done(snapshot)


def _hold_for_profile(crawl_id: int, problem: str) -> None:
    profile = Crawl.objects.filter(pk=crawl_id).values_list("profile__name", flat=True).first()
    reason = f"its profile {profile} is invalid: {problem}"
    try:
        crawl_hold(crawl_id=crawl_id, reason=reason)
    except TransitionNotAllowed:
        return  # held already (or sealed): its snapshots are not claimed either way
    logger.error("crawl %s held: %s", crawl_id, reason)


def snapshot_check_results(*, snapshot: Snapshot) -> None:
    """Once all results of a started snapshot are final, finalize it, or fail it when a
    blocking step failed (crawls/profiles.py)."""
    if not snapshot.all_results_final():
        snapshot.retry_at = next_poll()
        snapshot.save(update_fields=["retry_at", "modified_at"])
        return
    blocking = snapshot.failed_blocking_result()
    with transaction.atomic():
        if blocking is not None:
            snapshot.abandon(error=f"blocking step {blocking.extractor} failed: {blocking.error}")
        else:
            snapshot.finish()
            snapshot.begin_finalizing()  # its first attempt, counted in this same commit
        snapshot.save()
    if blocking is None:
        snapshot_finalize(snapshot=snapshot, attempt_counted=True)
    else:
        logger.warning("snapshot %s (%s) failed: %s", snapshot.pk, snapshot.url, snapshot.error)
        wake_crawl_if_done(snapshot)


def snapshot_wake(*, snapshot_id) -> bool:
    """Make a started snapshot that waits for its results due now; return True if it was.

    A snapshot under lease is left alone (WorkQuerySet.wake).
    """
    return bool(SNAPSHOT_WAKE.wake(snapshot_id))


def _started_snapshot(snapshot_id: uuid.UUID) -> models.QuerySet:
    """Snapshot ``snapshot_id`` while it is started (what ``SNAPSHOT_WAKE`` wakes)."""
    return Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.STARTED)


# Each page's last result wakes its snapshot (core/services/results.py): compiled once.
SNAPSHOT_WAKE = WakeStatement(
    "a started snapshot", Snapshot, _started_snapshot, (uuid.UUID,), actors=("archiveresult",)
)


def snapshot_screen_outlinks(*, snapshot: Snapshot, urls: list[str]) -> Screened | None:
    """Screen the links of ``snapshot`` by its crawl's rules (core/services/scope.py: may fetch
    robots.txt, so call it outside a transaction); None when the crawl has no depth left
    below this snapshot (its links are not met at all)."""
    crawl = snapshot.crawl
    if snapshot.depth >= crawl.depth:
        return None
    return crawl_screen(crawl=crawl, urls=urls, found_on=snapshot.url)


def snapshot_queue_outlinks(*, snapshot: Snapshot, screened: Screened) -> int:
    """Queue child snapshots for the links of ``snapshot`` that its crawl's rules let through.

    ``screened`` comes from ``snapshot_screen_outlinks`` (links normalized and screened by the
    crawl's scope, patterns and robots.txt, outside any transaction: robots.txt may be
    fetched); they are admitted here within the crawl's page and byte limits
    (core/services/scope.py), and those left out are recorded with their reason. Each URL is
    archived once per crawl (the unique constraint decides). Return how many new snapshots
    were queued.
    """
    with transaction.atomic():
        crawl = Crawl.objects.select_for_update().lean().get(pk=snapshot.crawl_id)
        known = crawl.snapshots.filter(url__in=screened.wanted).values_list("url", flat=True)
        existing = set(known)
        wanted = crawl_admit(crawl=crawl, screened=screened, known=existing)
        if not wanted:
            return 0
        children = [
            Snapshot(
                crawl=crawl,
                url=url,
                depth=snapshot.depth + 1,
                parent=snapshot,
                priority=snapshot.priority,
            )
            for url in wanted
        ]
        Snapshot.objects.bulk_create(children, ignore_conflicts=True)
        created = crawl.snapshots.filter(parent=snapshot, url__in=wanted)
        created_ids = list(created.values_list("pk", flat=True))
        snapshots_tag_like_crawl(crawl=crawl, snapshot_ids=created_ids)
    return len(created_ids)


# --- archive results ---------------------------------------------------------------------------
