"""Workflows over snapshots and archive results: what an actor's tick does to each.

Every state change goes through a model transition inside ``transaction.atomic()``; this module
decides which transition, runs extractors and moves their outputs into place.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.extractors.process import CommandCancelled
from core.extractors.registry import get_extractor
from core.extractors.scrubbing import scrub_folder
from core.folder.manifest import INDEX_NAME, TEMP_PREFIX
from core.folder.wacz import WACZ_NAME
from core.models import ArchiveResult, Snapshot, SnapshotQuerySet
from core.models.archive import STOPPED_PREFIX
from core.services.finalizing import snapshot_finalize, wake_crawl_if_done
from crawls.choices import CrawlStatus, StepBehaviour
from crawls.models import Crawl
from crawls.seeds import InvalidURL, normalize_url
from orchestrator.retries import LEASE_EXPIRED, backoff_delay

logger = logging.getLogger(__name__)

HISTORY_DIR = "history"  # earlier runs' files, in the snapshot folder (snapshot_rearchive)


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
    """Start ``snapshot``: create one queued ArchiveResult per step of its crawl's profile.

    A profile that no longer passes its rules (an extractor since removed from the registry)
    holds the crawl with the reason, and the snapshot waits: fix the profile, then release.
    """
    try:
        steps = snapshot.crawl.planned_steps()
    except ValidationError as error:
        _hold_for_profile(snapshot.crawl_id, "; ".join(error.messages))
        return
    with transaction.atomic():
        snapshot.start()
        snapshot.retry_at = timezone.now() + timezone.timedelta(seconds=settings.POLL_INTERVAL)
        snapshot.save()
        ArchiveResult.objects.bulk_create(
            [ArchiveResult.for_step(snapshot, step) for step in steps], ignore_conflicts=True
        )


def _hold_for_profile(crawl_id: int, problem: str) -> None:
    from core.services.crawls import crawl_hold  # core.services.crawls imports this module

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
        snapshot.retry_at = timezone.now() + timezone.timedelta(seconds=settings.POLL_INTERVAL)
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
        for result in results:
            result.rearchive(moved_to=moved_to)
            result.save()
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
    crawl = Crawl.objects.select_for_update().get(pk=crawl_id)
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


def snapshot_wake(*, snapshot_id) -> bool:
    """Make a started snapshot that waits for its results due now; return True if it was.

    Polling every POLL_INTERVAL is only the safety net. A snapshot under lease is never touched:
    its ``retry_at`` lies LEASE_SECONDS ahead, far past the ``now + POLL_INTERVAL`` of a waiting
    one (settings make sure the lease is the longer), so no two actors ever hold it.
    """
    now = timezone.now()
    waiting_until = now + timezone.timedelta(seconds=settings.POLL_INTERVAL)
    woken = Snapshot.objects.filter(
        pk=snapshot_id, status=SnapshotStatus.STARTED, retry_at__lte=waiting_until
    ).update(retry_at=now)
    return bool(woken)


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


def snapshots_tag_like_crawl(*, crawl: Crawl, snapshot_ids: list) -> None:
    """Give the snapshots ``snapshot_ids`` every tag of ``crawl`` (tags they have are kept)."""
    tag_ids = list(crawl.tags.values_list("pk", flat=True))
    if not tag_ids or not snapshot_ids:
        return
    through = Snapshot.tags.through
    through.objects.bulk_create(
        [through(snapshot_id=pk, tag_id=tag) for pk in snapshot_ids for tag in tag_ids],
        ignore_conflicts=True,
    )


# --- archive results ---------------------------------------------------------------------------


def result_tick(*, result: ArchiveResult) -> None:
    """Run one attempt of ``result``'s extractor and record how it went.

    A result claimed while still ``started`` was left by a worker that died (its lease ran out):
    that attempt is counted as a temporary failure before anything runs again. When the result
    ends final and it was the snapshot's last one to do, the snapshot is woken.
    """
    try:
        _result_attempt(result)
    finally:
        if result.status == ResultStatus.FAILED and result.behaviour == StepBehaviour.BLOCKING:
            result_stop_remaining(result=result)
        if result.status in ResultStatus.final() and result.snapshot.all_results_final():
            snapshot_wake(snapshot_id=result.snapshot_id)


def result_stop_remaining(*, result: ArchiveResult) -> int:
    """Stop the snapshot's results that have not run yet, but ``finally`` steps, after the
    blocking step ``result`` failed; return how many.

    A result another actor is running at that moment finishes on its own (it is under lease).
    """
    remaining = (
        result.snapshot.results.filter(status__in=[ResultStatus.QUEUED, ResultStatus.BACKOFF])
        .exclude(behaviour=StepBehaviour.FINALLY)
        .exclude(pk=result.pk)
    )
    stopped = 0
    for other in remaining:
        try:
            with transaction.atomic():
                other.stop(blocking=result.extractor, error=result.error)
                other.save()
            stopped += 1
        except ConcurrentTransition:
            continue  # claimed meanwhile: it runs, and its outcome is recorded as usual
    logger.info(
        "snapshot %s: %s failed, %d steps stopped", result.snapshot_id, result.extractor, stopped
    )
    return stopped


def _result_attempt(result: ArchiveResult) -> None:
    if result.status == ResultStatus.STARTED:
        result_recover(result=result)
        return
    extractor = get_extractor(result.extractor)
    snapshot = result.snapshot
    try:
        with transaction.atomic():
            result.start()
            result.save()
    except ConcurrentTransition:  # stopped by a failed blocking step since it was claimed
        result.refresh_from_db()
        logger.info("%s of %s changed before it started", result.extractor, snapshot.pk)
        return
    applies, reason = extractor.should_run(snapshot)
    if not applies:
        with transaction.atomic():
            result.skip(reason=reason)
            result.save()
        return
    work_dir = snapshot.output_dir / f"{TEMP_PREFIX}{extractor.name}-{result.attempts}"
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    try:
        output = _run_extractor(extractor, snapshot, work_dir)
        result_record(result=result, output=output, work_dir=work_dir)
    except CommandCancelled as cancelled:
        result_record(
            result=result,
            output=ExtractorOutput(outcome=Outcome.TEMPORARY, error=f"interrupted: {cancelled}"),
            work_dir=work_dir,
        )
        raise
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _run_extractor(extractor, snapshot: Snapshot, work_dir: Path) -> ExtractorOutput:
    """Call ``extractor.run``, turning an unexpected exception into a recorded outcome.

    Whatever way it ends, the credentials in the extractor's arguments are then scrubbed from
    the files it wrote (its tool's logs and WARCs, core/extractors/scrubbing.py) before they
    are kept, moved into place or checksummed.
    """
    try:
        return extractor.run(snapshot, work_dir)
    except CommandCancelled:
        raise
    except OSError as error:  # disk full, permissions, a binary that vanished: may pass
        logger.warning("%s on %s: %s", extractor.name, snapshot.url, error)
        return ExtractorOutput(outcome=Outcome.TEMPORARY, error=f"{type(error).__name__}: {error}")
    except Exception as error:
        logger.exception("%s crashed on %s", extractor.name, snapshot.url)
        return ExtractorOutput(
            outcome=Outcome.FATAL, error=f"internal error: {type(error).__name__}: {error}"
        )
    finally:
        scrub_folder(work_dir, extractor.arguments, tool=next(iter(extractor.binaries), None))


def result_record(*, result: ArchiveResult, output: ExtractorOutput, work_dir: Path) -> None:
    """Transition ``result`` by ``output.outcome``; on success, move ``work_dir`` into place."""
    snapshot = result.snapshot
    if output.outcome is Outcome.SUCCEEDED:
        files, size = _move_into_place(work_dir, snapshot.output_dir / result.extractor)
        with transaction.atomic():
            result.succeed(output=output, files=files, size=size)
            result.save()
            if "outlinks" in output.facts:
                snapshot_queue_outlinks(snapshot=snapshot, urls=output.facts["outlinks"])
        return
    _keep_logs(work_dir, snapshot.output_dir / "logs", f"{result.extractor}.{result.attempts}")
    with transaction.atomic():
        if output.outcome is Outcome.SKIPPED:
            result.skip(reason=output.error, output=output)
        elif output.outcome is Outcome.FATAL:
            result.fail(error=output.error, output=output)
        else:
            _retry_or_fail(result, output.error, output=output, retry_after=output.retry_after)
        result.save()


def result_recover(*, result: ArchiveResult) -> None:
    """Count the attempt of a result whose worker died, then back off or fail it."""
    with transaction.atomic():
        _retry_or_fail(result, LEASE_EXPIRED)
        result.save()
    logger.warning("recovered %s of %s: %s", result.extractor, result.snapshot_id, LEASE_EXPIRED)


def _retry_or_fail(
    result: ArchiveResult,
    error: str,
    *,
    output: ExtractorOutput | None = None,
    retry_after: float | None = None,
) -> None:
    """A temporary error: back off for another attempt, or fail once the extractor's
    ``max_attempts`` (settings.MAX_ATTEMPTS unless EXTRACTOR_OPTIONS says) are used."""
    if result.attempts >= get_extractor(result.extractor).max_attempts:
        result.fail(error=f"attempts exhausted ({result.attempts}): {error}", output=output)
    else:
        delay = backoff_delay(result.attempts, retry_after)
        result.back_off(error=error, delay=delay, output=output)


def _move_into_place(work_dir: Path, final_dir: Path) -> tuple[list[str], int]:
    """Replace ``final_dir`` with ``work_dir``; return its files (relative to the snapshot
    folder, sorted) and their total size in bytes."""
    if final_dir.exists():
        stale = final_dir.with_name(f"{TEMP_PREFIX}old-{final_dir.name}")
        shutil.rmtree(stale, ignore_errors=True)
        final_dir.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    work_dir.rename(final_dir)
    snapshot_dir = final_dir.parent
    paths = sorted(p for p in final_dir.rglob("*") if p.is_file() and not p.is_symlink())
    files = [p.relative_to(snapshot_dir).as_posix() for p in paths]
    return files, sum(p.stat().st_size for p in paths)


def _keep_logs(work_dir: Path, logs_dir: Path, stem: str) -> None:
    """Keep an unsuccessful attempt's command logs as ``logs/<extractor>.<attempt>.log``."""
    for index, log in enumerate(sorted(work_dir.glob("*.log"))):
        logs_dir.mkdir(parents=True, exist_ok=True)
        suffix = f"-{index}" if index else ""
        target = logs_dir / f"{stem}{suffix}.log"
        # A retried result counts its attempts from 1 again: keep the earlier run's log too.
        retry = 1
        while target.exists():
            retry += 1
            target = logs_dir / f"{stem}{suffix}.run{retry}.log"
        shutil.move(str(log), target)
