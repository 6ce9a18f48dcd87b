"""Running a finished snapshot again: re-archive it as a new run, or retry its failed results."""

from __future__ import annotations

import logging
from pathlib import Path

from django.db import transaction
from django.db.models import Q

from core.choices import ResultStatus
from core.folder.manifest import INDEX_NAME
from core.folder.wacz import WACZ_NAME
from core.models import Snapshot, SnapshotQuerySet
from core.models.results import STOPPED_PREFIX
from core.services.dedup import payloads_moved, replay_cache_drop
from crawls.choices import CrawlStatus
from crawls.models import Crawl, crawl_add_bytes

logger = logging.getLogger(__name__)

HISTORY_DIR = "history"  # earlier runs' files, in the snapshot folder (snapshot_rearchive)


def snapshot_rearchive(*, snapshot: Snapshot) -> str:
    """Archive a sealed or failed snapshot again; return where its earlier run now lies.

    Every result starts a new run, keeping the earlier one's record in its ``history``; the
    earlier files (outputs, logs, ``index.json``) move to ``history/<run>/`` in the snapshot
    folder, where the next manifest covers them too. The transition comes first, so a snapshot
    that changed meanwhile raises before anything moves; moving is repeatable, so a crash before
    the commit loses nothing: asking again finishes the job. A sealed crawl reopens. Raises
    TransitionNotAllowed when the snapshot is not sealed or failed, ConcurrentTransition when
    another process changed it since it was read.
    """
    started = snapshot.start_ts or snapshot.created_at
    moved_to = f"{HISTORY_DIR}/{started.strftime('%Y%m%dT%H%M%S.%fZ')}"
    folder = snapshot.output_dir
    with transaction.atomic():
        _reopen_crawl(snapshot.crawl_id)
        snapshot.rearchive()
        snapshot.save()
        results = list(snapshot.results.all())
        for name in [result.extractor for result in results] + ["logs", INDEX_NAME, WACZ_NAME]:
            _move_aside(folder / name, folder / moved_to / name)
        # The earlier run's files stay (in history/), but its bytes are not this run's.
        moved = sum(result.output_size for result in results)
        crawl_add_bytes(snapshot.crawl_id, -moved)
        for result in results:
            result.rearchive(moved_to=moved_to)
            result.save()
        payloads_moved(snapshot=snapshot, moved_to=moved_to)
    replay_cache_drop(snapshot_id=snapshot.pk)
    logger.info("snapshot %s queued again; its earlier run is in %s", snapshot.pk, moved_to)
    return moved_to


def snapshot_retry_failed(*, snapshot: Snapshot, extractor: str | None = None) -> int:
    """Run the failed results of a sealed or failed snapshot again (with ``extractor``, only
    that extractor's); return how many.

    Each failed result, and each one a failed blocking step stopped, starts over with fresh
    attempts (its earlier command log stays in ``logs/``); the snapshot goes back to started
    and is finalized again once they are final, so a snapshot whose finalizing failed is
    retried too; with ``extractor`` and no failure of it, nothing changes. A sealed crawl
    reopens. Raises TransitionNotAllowed when the snapshot is still in progress.
    """
    failed = snapshot.results.filter(
        Q(status=ResultStatus.FAILED)
        | Q(status=ResultStatus.SKIPPED, error__startswith=STOPPED_PREFIX)
    )
    if extractor:
        failed = failed.filter(extractor=extractor)
        if not failed.exists():
            return 0  # nothing of that extractor to run: the snapshot stays as it is
    with transaction.atomic():
        _reopen_crawl(snapshot.crawl_id)
        snapshot.retry_failed()
        snapshot.save()
        failed = list(failed)
        for result in failed:
            result.retry()
            result.save()
    logger.info("snapshot %s: %d failed results queued again", snapshot.pk, len(failed))
    return len(failed)


def snapshots_retry_failed(*, snapshots: SnapshotQuerySet, extractor: str | None = None) -> int:
    """Retry the failed results of every finished snapshot of ``snapshots`` that has some (see
    snapshot_retry_failed); return how many results were queued again."""
    return sum(
        snapshot_retry_failed(snapshot=snapshot, extractor=extractor)
        for snapshot in snapshots.with_failures()
    )


def _reopen_crawl(crawl_id: int) -> None:
    """Reopen a sealed crawl whose snapshot runs again (call inside a transaction, first).

    The crawl row stays locked until the commit, and crawl_tick locks it before it seals, so a
    crawl is never sealed with a snapshot of it queued again at the same moment.
    """
    crawl = Crawl.objects.select_for_update().lean().get(pk=crawl_id)
    if crawl.status == CrawlStatus.SEALED:
        crawl.reopen()
        crawl.save()


def _move_aside(source: Path, target: Path) -> None:
    """Move ``source`` to ``target``; a no-op when it moved already (a repeated call).

    Raises FileExistsError when both exist: moving would lose one of the two.
    """
    if not source.exists():
        return
    if target.exists():
        raise FileExistsError(f"cannot move {source} aside: {target} exists already")
    target.parent.mkdir(parents=True, exist_ok=True)
    source.rename(target)
