"""Workflows over snapshots and archive results: what an actor's tick does to each.

Every state change goes through a model transition inside ``transaction.atomic()``; this module
decides which transition, runs extractors and moves their outputs into place.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django_fsm import TransitionNotAllowed

from core.choices import SnapshotStatus
from core.folder.wacz import warm_up_packaging
from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_hold, snapshots_tag_like_crawl
from core.services.finalizing import snapshot_finalize, wake_crawl_if_done
from core.services.unchanged import snapshot_find_unchanged
from crawls.models import Crawl
from crawls.seeds import InvalidURL, normalize_url
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
        snapshot.save()
    if blocking is None:
        snapshot_finalize(snapshot=snapshot)
    else:
        logger.warning("snapshot %s (%s) failed: %s", snapshot.pk, snapshot.url, snapshot.error)
        wake_crawl_if_done(snapshot)


def snapshot_wake(*, snapshot_id) -> bool:
    """Make a started snapshot that waits for its results due now; return True if it was.

    A snapshot under lease is left alone (WorkQuerySet.wake).
    """
    return bool(Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.STARTED).wake())


def snapshot_queue_outlinks(*, snapshot: Snapshot, urls: list[str]) -> int:
    """Queue child snapshots for the links of ``snapshot`` while the crawl has depth left.

    Links are normalized; invalid ones and, unless the crawl allows any host, links to other
    hosts are left out. Each URL is archived once per crawl (the unique constraint decides).
    Return how many new snapshots were queued.
    """
    crawl = snapshot.crawl
    if snapshot.depth >= crawl.depth:
        return 0
    wanted = _followable(urls, base_host=urlsplit(snapshot.url).netloc, any_host=crawl.any_host)
    if not wanted:
        return 0
    existing = set(crawl.snapshots.filter(url__in=wanted).values_list("url", flat=True))
    children = [
        Snapshot(
            crawl=crawl,
            url=url,
            depth=snapshot.depth + 1,
            parent=snapshot,
            priority=snapshot.priority,
        )
        for url in wanted
        if url not in existing
    ]
    with transaction.atomic():
        Snapshot.objects.bulk_create(children, ignore_conflicts=True)
        created = crawl.snapshots.filter(parent=snapshot, url__in=[c.url for c in children])
        created_ids = list(created.values_list("pk", flat=True))
        snapshots_tag_like_crawl(crawl=crawl, snapshot_ids=created_ids)
    return len(created_ids)


def _followable(urls: list[str], *, base_host: str, any_host: bool) -> list[str]:
    wanted: dict[str, None] = {}
    for raw in urls:
        try:
            url = normalize_url(raw)
        except InvalidURL:
            continue
        if any_host or urlsplit(url).netloc == base_host:
            wanted[url] = None
    return list(wanted)


# --- archive results ---------------------------------------------------------------------------
