"""Removing snapshots and crawls: their rows and, when asked, their folders in DATA_DIR.

Nothing that is running is removed. A snapshot is refused while an extractor, its finalizing
or an upload of it holds a lease, and while it is unfinished in a crawl that actors still work
on (hold the crawl first). Storage copies on STORAGE_TARGETS are kept: they are the backups,
from which a removal made by mistake can be undone.

A folder is first renamed into ``DATA_DIR/trash/`` (one rename, so no half-deleted folder is
ever left where a snapshot's folder belongs), the rows are deleted, and only then is the
trash emptied. A crash in between leaves the folder in the trash, never a row without it.
Emptying it releases the shared copies (core/folder/blobs.py) no other snapshot links to.

A snapshot whose records other snapshots' revisit records refer to (core/services/dedup.py)
is removed only once those are made whole again, or point at a copy that stays; each
snapshot so changed is re-sealed (new WACZ, manifest and signature, storage copies queued
again), and the change is kept in the history of the result whose WARC it was.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from core.choices import CopyStatus, ResultStatus, SnapshotStatus
from core.folder.blobs import release_unused
from core.folder.manifest import MANIFEST_NAME, TEMP_PREFIX, atomic_write, read_manifest
from core.folder.revisits import RevisitError
from core.folder.signing import SigningKeyError
from core.folder.wacz import PackagingError
from core.models import PayloadRevisit, Snapshot, Tag
from core.services.dedup import DependentsBusy, referrers_release, replay_cache_drop
from core.services.finalizing import snapshot_reseal
from core.services.fixity import local_problems
from crawls.choices import CrawlStatus
from crawls.models import Crawl, crawl_add_bytes

logger = logging.getLogger(__name__)

TRASH_DIR = "trash"
# In the folder of a snapshot being removed: the snapshots made whole for it, not re-sealed yet.
PENDING_NAME = f"{TEMP_PREFIX}reseal-pending.json"


class RemovalRefused(Exception):
    """A snapshot or crawl that cannot be removed now; the message says why and what to do."""


def snapshot_remove(*, snapshot_id: uuid.UUID, delete_files: bool = False) -> None:
    """Delete snapshot ``snapshot_id`` with its results, copies' records and fixity checks,
    the tags nothing else carries, and with ``delete_files`` its folder in DATA_DIR.

    Raises Snapshot.DoesNotExist, and RemovalRefused while any of it is running (see above).
    """
    snapshot = Snapshot.objects.select_related("crawl").get(pk=snapshot_id)
    reason = _busy(snapshot)
    if reason:
        raise RemovalRefused(f"snapshot {snapshot.pk}: {reason}")
    _release_dependents(snapshot)
    trash: Path | None = None
    folder = snapshot.output_dir
    try:
        with transaction.atomic():
            snapshot = (
                Snapshot.objects.select_for_update().select_related("crawl").get(pk=snapshot_id)
            )
            reason = _busy(snapshot) or _referred_to(snapshot)
            if reason:
                raise RemovalRefused(f"snapshot {snapshot.pk}: {reason}")
            if delete_files and folder.exists():
                trash = _move_to_trash(folder)
            _forget_seed(snapshot)
            tag_ids = list(snapshot.tags.values_list("pk", flat=True))
            held = snapshot.results.aggregate(total=Sum("output_size"))["total"] or 0
            snapshot.delete()
            crawl_add_bytes(snapshot.crawl_id, -held)
            tags_drop_unused(tag_ids=tag_ids)
    except BaseException:
        if trash is not None:
            trash.rename(folder)  # the rows stay (the commit too may fail), so the folder goes back
        raise
    replay_cache_drop(snapshot_id=snapshot_id)
    if trash is not None:
        _empty_trash(trash)
    logger.info("snapshot %s removed%s", snapshot_id, " with its folder" if delete_files else "")


def _release_dependents(snapshot: Snapshot) -> None:
    """Make the snapshots whose revisits refer to ``snapshot`` independent of it, and re-seal
    them (those changed by an earlier attempt that stopped before re-sealing too). Raises
    RemovalRefused, leaving ``snapshot`` in place, when one cannot be changed or re-sealed."""
    pending_file = snapshot.output_dir / PENDING_NAME
    pending = set(_read_pending(pending_file))
    _refuse_damaged_referrers(snapshot, pending)
    try:
        changed = referrers_release(snapshot=snapshot)
    except DependentsBusy as error:
        raise RemovalRefused(f"snapshot {snapshot.pk}: {error}") from None
    except (RevisitError, OSError) as error:
        raise RemovalRefused(
            f"snapshot {snapshot.pk}: the snapshots that refer to it cannot be made whole: {error}"
        ) from None
    pending |= {str(referrer.pk) for referrer in changed}
    if not pending:
        return
    if snapshot.output_dir.is_dir():
        atomic_write(pending_file, json.dumps(sorted(pending)).encode())
    for referrer, lines in changed.items():
        logger.info("snapshot %s: made independent of %s: %s", referrer.pk, snapshot.pk,
                    "; ".join(lines))  # fmt: skip
    for referrer in Snapshot.objects.filter(pk__in=pending, status=SnapshotStatus.SEALED):
        try:
            snapshot_reseal(snapshot=referrer)
        except (PackagingError, OSError, SigningKeyError) as error:
            raise RemovalRefused(
                f"snapshot {snapshot.pk}: snapshot {referrer.pk}, made independent of it, "
                f"could not be re-sealed ({error}); remove it again to finish"
            ) from None
    pending_file.unlink(missing_ok=True)


def _refuse_damaged_referrers(snapshot: Snapshot, pending: set[str]) -> None:
    """Raise RemovalRefused when a sealed snapshot whose revisits refer to ``snapshot`` does
    not match its manifest (core/services/fixity.py ``local_problems``): making it whole
    re-seals its folder, and would sign the damage as good. Those ``pending`` (changed by an
    earlier attempt, not re-sealed yet) differ from their manifest by design, and are left to
    finish."""
    referrers = (
        Snapshot.objects.filter(
            status=SnapshotStatus.SEALED, payload_revisits__original__snapshot=snapshot
        )
        .exclude(pk__in=pending)
        .distinct()
    )
    for referrer in referrers:
        problems, _files = local_problems(referrer)
        if problems:
            raise RemovalRefused(
                f"snapshot {snapshot.pk}: snapshot {referrer.pk}, which refers to records of "
                f"it, fails its fixity check ({problems[0]}): restore or re-archive it first"
            )


def _read_pending(path: Path) -> list[str]:
    try:
        return [str(item) for item in json.loads(path.read_bytes())]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError) as error:
        logger.warning("%s unreadable (%s): its snapshots are not re-sealed again", path, error)
        return []


def _referred_to(snapshot: Snapshot) -> str:
    """Say which snapshot's revisits still refer to ``snapshot``, or return ""."""
    referring = PayloadRevisit.objects.filter(original__snapshot=snapshot).first()
    if referring is None:
        return ""
    return (
        f"snapshot {referring.snapshot_id} began to refer to its records meanwhile: remove it again"
    )


def _empty_trash(trash: Path) -> None:
    """Delete a removed folder, then the shared copies only it linked to."""
    try:
        digests = list(read_manifest(trash).values()) if (trash / MANIFEST_NAME).is_file() else []
    except (OSError, UnicodeDecodeError):
        digests = []
    shutil.rmtree(trash, ignore_errors=True)
    released = release_unused(digests)
    if released:
        logger.info("%d shared copies released with %s", released, trash.name)


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
    # The latest sealed first: a revisit refers only to a snapshot sealed before its own, so
    # the crawl's snapshots that refer to others go before those, which need not be made whole.
    latest_first = crawl.snapshots.order_by(F("end_ts").desc(nulls_first=True), "-depth")
    for snapshot_id in latest_first.values_list("pk", flat=True):
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
