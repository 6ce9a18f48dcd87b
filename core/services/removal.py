"""Removing snapshots and crawls: their rows and, when asked, their folders in DATA_DIR.

Nothing that is running is removed. A snapshot is refused while an extractor, its finalizing
or an upload of it holds a lease, and while it is unfinished in a crawl that actors still work
on (hold the crawl first). Storage copies on STORAGE_TARGETS are kept: they are the backups,
from which a removal made by mistake can be undone.

A folder is first renamed into ``DATA_DIR/trash/`` (one rename, so no half-deleted folder is
ever left where a snapshot's folder belongs), the rows are deleted, and only then is the
trash emptied. A crash in between leaves the folder in the trash, never a row without it.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.choices import CopyStatus, ResultStatus, SnapshotStatus
from core.models import Snapshot, Tag
from crawls.choices import CrawlStatus
from crawls.models import Crawl

logger = logging.getLogger(__name__)

TRASH_DIR = "trash"


class RemovalRefused(Exception):
    """A snapshot or crawl that cannot be removed now; the message says why and what to do."""


def snapshot_remove(*, snapshot_id: uuid.UUID, delete_files: bool = False) -> None:
    """Delete snapshot ``snapshot_id`` with its results, copies' records and fixity checks,
    the tags nothing else carries, and with ``delete_files`` its folder in DATA_DIR.

    Raises Snapshot.DoesNotExist, and RemovalRefused while any of it is running (see above).
    """
    trash: Path | None = None
    with transaction.atomic():
        snapshot = Snapshot.objects.select_for_update().select_related("crawl").get(pk=snapshot_id)
        reason = _busy(snapshot)
        if reason:
            raise RemovalRefused(f"snapshot {snapshot.pk}: {reason}")
        folder = snapshot.output_dir
        if delete_files and folder.exists():
            trash = _move_to_trash(folder)
        try:
            _forget_seed(snapshot)
            tag_ids = list(snapshot.tags.values_list("pk", flat=True))
            snapshot.delete()
            tags_drop_unused(tag_ids=tag_ids)
        except BaseException:
            if trash is not None:
                trash.rename(folder)  # the rows stay, so the folder goes back
            raise
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)
    logger.info("snapshot %s removed%s", snapshot_id, " with its folder" if delete_files else "")


def crawl_remove(*, crawl_id: int, delete_files: bool = False) -> int:
    """Remove every snapshot of crawl ``crawl_id`` (as snapshot_remove does), then the crawl
    and the tags nothing else carries; return how many snapshots were removed.

    Raises Crawl.DoesNotExist, and RemovalRefused when the crawl is queued or started (hold it
    first) or when one of its snapshots is still running (the others are removed, the crawl is
    kept).
    """
    crawl = Crawl.objects.get(pk=crawl_id)
    if crawl.status in CrawlStatus.active():
        raise RemovalRefused(
            f"crawl {crawl.pk} is {crawl.status}: hold it first (manage.py hold {crawl.pk})"
        )
    removed, refused = 0, []
    for snapshot_id in crawl.snapshots.order_by("-depth").values_list("pk", flat=True):
        try:
            snapshot_remove(snapshot_id=snapshot_id, delete_files=delete_files)
            removed += 1
        except RemovalRefused as error:
            refused.append(str(error))
    if refused:
        raise RemovalRefused(f"crawl {crawl.pk} kept: " + "; ".join(refused[:5]))
    with transaction.atomic():
        tag_ids = list(crawl.tags.values_list("pk", flat=True))
        crawl.delete()
        tags_drop_unused(tag_ids=tag_ids)
    logger.info("crawl %s removed (%d snapshots)", crawl_id, removed)
    return removed


def tags_drop_unused(*, tag_ids: list[int]) -> int:
    """Delete the tags among ``tag_ids`` that no crawl and no snapshot carries any more (a tag
    lives as long as what uses it); return how many were deleted."""
    unused = Tag.objects.filter(pk__in=tag_ids, crawls__isnull=True, snapshots__isnull=True)
    return unused.delete()[0]


def _busy(snapshot: Snapshot) -> str:
    """Say why ``snapshot`` cannot be removed now, or return ""."""
    now = timezone.now()
    crawl = snapshot.crawl
    if snapshot.status not in SnapshotStatus.final() and crawl.status in CrawlStatus.active():
        return (
            f"it is {snapshot.status} and its crawl {crawl.pk} is {crawl.status}: hold the crawl "
            f"first (manage.py hold {crawl.pk})"
        )
    if (
        snapshot.status == SnapshotStatus.FINALIZING
        and snapshot.retry_at
        and snapshot.retry_at > now
    ):
        return "it is being finalized"
    running = snapshot.results.filter(status=ResultStatus.STARTED, retry_at__gt=now)
    extractors = list(running.values_list("extractor", flat=True))
    if extractors:
        return f"extractors are running ({', '.join(sorted(extractors))})"
    uploading = snapshot.copies.filter(status=CopyStatus.STARTED, retry_at__gt=now)
    targets = list(uploading.values_list("target", flat=True))
    if targets:
        return f"it is being copied to {', '.join(sorted(targets))}"
    return ""


def _forget_seed(snapshot: Snapshot) -> None:
    """Take a removed seed out of its held crawl: releasing the crawl starts it again from its
    seeds, which would queue the URL anew."""
    crawl = snapshot.crawl
    if snapshot.depth != 0 or crawl.status != CrawlStatus.HELD:
        return
    crawl.seeds = "\n".join(url for url in crawl.seed_list() if url != snapshot.url)
    crawl.save(update_fields=["seeds", "modified_at"])


def _move_to_trash(folder: Path) -> Path:
    """Rename ``folder`` into DATA_DIR/trash/ (same file system: one atomic rename)."""
    trash = settings.DATA_DIR / TRASH_DIR
    trash.mkdir(parents=True, exist_ok=True)
    target = trash / f"{folder.name}-{timezone.now():%Y%m%dT%H%M%S.%fZ}"
    folder.rename(target)
    return target
