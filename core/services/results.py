"""Workflows over archive results (DESIGN.md §2): run one extractor on one snapshot, record
what it left, and back off or fail it.

Fair under faults (issue 19): a result starts only when its host takes one more
(core/services/hosts.py); a run that could not reach the page backs off the snapshot's other
results that have not started with it (``result_share_failure``) and counts towards its host's
circuit breaker.
"""

from __future__ import annotations

import logging
import os
import shutil
from datetime import datetime
from functools import partial
from pathlib import Path

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_fsm import ConcurrentTransition

from core.choices import ResultStatus
from core.extractors.base import ExtractorOutput
from core.extractors.credentials import Credentials
from core.extractors.errors import Outcome
from core.extractors.process import CommandCancelled
from core.extractors.registry import get_extractor
from core.extractors.scrubbing import scrub_folder
from core.folder.manifest import TEMP_PREFIX, file_entries
from core.models import ArchiveResult, Snapshot
from core.services.hosts import host_note_outcome, host_start_wait
from core.services.snapshots import (
    snapshot_queue_outlinks,
    snapshot_screen_outlinks,
    snapshot_wake,
)
from crawls.choices import StepBehaviour
from crawls.models import crawl_add_bytes
from orchestrator.claims import hand_back
from orchestrator.retries import (
    LEASE_EXPIRED,
    backoff_delay,
    recover_expired_lease,
    retry_or_fail,
    share_failure,
)

logger = logging.getLogger(__name__)


def result_tick(*, result: ArchiveResult, keeps_host_slot: bool = False) -> None:
    """Run one attempt of ``result``'s extractor and record how it went.

    A result its claim started (``result_admit``) runs that attempt; one not started yet (a
    companion, or a caller's own) is started first, when its host takes it. A result claimed
    while still ``started`` was left by a worker that died (its lease ran out): that attempt is
    counted as a temporary failure before anything runs again. When the result ends final and
    it was the snapshot's last one to do, the snapshot is woken.
    ``keeps_host_slot``: the result was claimed as a companion of one that just ran in this
    actor (the same page's visit), so it keeps that one's place under HOST_CONCURRENCY; only
    a paused host holds it back (core/services/hosts.py).
    """
    try:
        _result_attempt(result, keeps_host_slot)
    finally:
        if result.status == ResultStatus.FAILED and result.behaviour == StepBehaviour.BLOCKING:
            result_stop_remaining(result=result)
        if result.status in ResultStatus.final() and result.snapshot.all_results_final():
            snapshot_wake(snapshot_id=result.snapshot_id)


def result_admit(*, result: ArchiveResult) -> bool:
    """Start ``result`` in the transaction that claims it (orchestrator/claims.py) when its
    host takes one more now (``host_start_wait``) and return True; else hand it back, due when
    it may try again, wake no one, and return False (the claim moves on to another candidate).

    Started in the claim's transaction, it is counted on its host by the very next claim
    (``ArchiveResultQuerySet.held_back_hosts``): no actor claims what the host would refuse. A
    result still ``started`` (its worker died, its lease ran out) is admitted as it is, and its
    tick recovers it.
    """
    if result.status == ResultStatus.STARTED:
        return True
    result.started_by_claim = _start_if_host_takes(result)
    return result.started_by_claim


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


def _result_attempt(result: ArchiveResult, keeps_host_slot: bool = False) -> None:
    if result.status == ResultStatus.STARTED and not result.started_by_claim:
        result_recover(result=result)
        return
    if result.status != ResultStatus.STARTED and not _start(result, keeps_host_slot):
        return
    extractor = get_extractor(result.extractor)
    snapshot = result.snapshot
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


def _start(result: ArchiveResult, keeps_host_slot: bool) -> bool:
    """Start ``result``, which its claim did not start, when its host takes it; True when it
    did. False when it was handed back, or changed (stopped, deferred) since it was claimed."""
    try:
        with transaction.atomic():
            return _start_if_host_takes(result, keeps_slot=keeps_host_slot)
    except ConcurrentTransition:  # stopped or deferred since it was claimed
        result.refresh_from_db()
        logger.info("%s of %s changed before it started", result.extractor, result.snapshot_id)
        return False


def _start_if_host_takes(result: ArchiveResult, keeps_slot: bool = False) -> bool:
    """In the caller's transaction: start ``result`` when its host takes one more now
    (``host_start_wait``) and return True, else hand it back (``_hand_back_for_host``) and
    return False."""
    wait_until = host_start_wait(result=result, keeps_slot=keeps_slot)
    if wait_until is not None:
        _hand_back_for_host(result, wait_until)
        return False
    result.start()
    result.save()
    return True


def _hand_back_for_host(result: ArchiveResult, wait_until: datetime) -> None:
    """Give back the claim of ``result``, which its host does not take now (paused, as many
    running as it may, or on probation: core/services/hosts.py): due again at ``wait_until``
    (at once, but when its crawl's delay between two starts on the host runs later), for
    whichever actor finds its host free. No idle actor is woken for it: one would only find the
    host as busy (on a single-host crawl every refusal used to wake them all into claiming it
    again, some 90 claims in 200)."""
    given_at = hand_back(result, lease_end=result.retry_at, wake_idle=False, due_at=wait_until)
    if given_at is not None:
        # What the actor dates its release by (actor._handed_back_at): the moment it was given.
        result.retry_at = given_at
        result.modified_at = min(given_at, timezone.now())  # not claimable before given_at
    logger.info(
        "%s of %s handed back: host %s is paused, busy or on probation",
        result.extractor,
        result.snapshot_id,
        result.snapshot.host,
    )


def _run_extractor(extractor, snapshot: Snapshot, work_dir: Path) -> ExtractorOutput:
    """Call ``extractor.run``, turning an unexpected exception into a recorded outcome.

    The extractor runs with the credentials of the crawl's persona meant for the snapshot's
    host (``_persona_credentials``). Whatever way it ends, the credentials in the extractor's
    arguments and all the persona's secrets are then scrubbed from the files it wrote (its
    tool's logs and WARCs, core/extractors/scrubbing.py) before they are kept, moved into
    place or checksummed.
    """
    held = _persona_credentials(snapshot)
    extractor = extractor.with_credentials(held.for_url(snapshot.url) if held else None)
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
        scrub_folder(
            work_dir,
            extractor.arguments,
            tool=next(iter(extractor.binaries), None),
            secrets=held.secrets() if held else (),
            headers=held.headers if held else (),
            persona_in_warcs=bool(held and held.keep_in_warcs),
        )


# The persona credentials decrypted last in this process, with what they are for: (snapshot id,
# persona id, the persona's modified_at and encrypted secrets). A snapshot's extractors run one
# after the other in one actor (the visit's companions, orchestrator/work.py), so its persona is
# decrypted once for all of them; another snapshot, or a persona changed since, decrypts anew.
_decrypted: tuple[tuple, Credentials] | None = None


def _persona_credentials(snapshot: Snapshot) -> Credentials | None:
    """The decrypted credentials of the persona ``snapshot``'s crawl signs in as, or None; the
    caller gives an extractor those for the snapshot's host (Credentials.for_url).

    A persona whose secrets the key no longer opens gives none (logged): the page is then
    captured signed out, as with no persona, rather than not at all.
    """
    global _decrypted
    persona = snapshot.crawl.persona if snapshot.crawl_id else None
    if persona is None:
        return None
    key = (snapshot.pk, persona.pk, persona.modified_at, persona.secrets)
    if _decrypted is not None and _decrypted[0] == key:
        return _decrypted[1]
    try:
        credentials = persona.credentials()
    except ValueError as error:
        logger.warning("persona %s of crawl %s: %s", persona.name, snapshot.crawl_id, error)
        return None
    _decrypted = (key, credentials)
    return credentials


def result_record(*, result: ArchiveResult, output: ExtractorOutput, work_dir: Path) -> None:
    """Transition ``result`` by ``output.outcome``; on success, move ``work_dir`` into place.

    A run that could not reach the page (``output.unreachable``) backs off the snapshot's
    results that have not started with it (``result_share_failure``); every outcome is told to
    the host's circuit breaker (core/services/hosts.py).
    """
    _result_transition(result, output, work_dir)
    if output.unreachable:
        result_share_failure(result=result, error=output.error)
    host_note_outcome(host=result.snapshot.host, extractor=result.extractor, output=output)


def _result_transition(result: ArchiveResult, output: ExtractorOutput, work_dir: Path) -> None:
    snapshot = result.snapshot
    if output.outcome is Outcome.SUCCEEDED:
        files, size = _move_into_place(work_dir, snapshot.output_dir / result.extractor)
        links = output.facts.get("outlinks")
        # robots.txt may be fetched: before the transaction, not while it holds the database.
        screened = (
            None if links is None else snapshot_screen_outlinks(snapshot=snapshot, urls=links)
        )
        with transaction.atomic():
            result.succeed(output=output, files=files, size=size)
            result.save()
            crawl_add_bytes(snapshot.crawl_id, size)
            if screened is not None:
                snapshot_queue_outlinks(snapshot=snapshot, screened=screened)
        return
    _keep_logs(work_dir, snapshot.output_dir / "logs", f"{result.extractor}.{result.attempts}")
    with transaction.atomic():
        if output.outcome is Outcome.SKIPPED:
            result.skip(reason=output.error, output=output)
        elif output.outcome is Outcome.FATAL:
            result.fail(error=output.error, output=output)
        else:
            # A temporary error: back off, or fail once the extractor's max_attempts
            # (settings.MAX_ATTEMPTS unless EXTRACTOR_OPTIONS says) are used.
            retry_or_fail(
                result,
                output.error,
                max_attempts=get_extractor(result.extractor).max_attempts,
                back_off=partial(result.back_off, output=output),
                fail=partial(result.fail, output=output),
                retry_after=output.retry_after,
            )
        result.save()


def result_share_failure(*, result: ArchiveResult, error: str) -> int:
    """After ``result``'s run could not reach the page (``error``: its server did not resolve,
    refused or reset the connection, or did not answer in time), back off the snapshot's
    other results that have not started, rather than let each meet the same; return how many.

    Each shares the failed attempt (``retries.share_failure``): it backs off for as long as
    ``result`` does (when ``result`` failed for good, the retry rule's delay after the attempt),
    its error "page did not answer <extractor>: <error>", or fails with attempts exhausted; a
    blocking step that fails so stops the snapshot's remaining steps. Not when a result of the
    snapshot has succeeded: the page answered that one, and may answer again.

    Queued results are taken even when an actor has just claimed one (its start then finds it
    changed, as after a stop); results in backoff only when due (one whose ``retry_at`` lies
    ahead waits already, or is claimed). The rows are read and changed in one transaction:
    under SQLite's write lock, or locked on PostgreSQL (``SKIP LOCKED``: one being claimed at
    this instant is left to its actor).
    """
    snapshot = result.snapshot
    if snapshot.results.filter(status=ResultStatus.SUCCEEDED).exists():
        return 0
    now = timezone.now()
    if result.status == ResultStatus.BACKOFF:
        delay = max((result.retry_at - now).total_seconds(), 0.0)
    else:
        delay = backoff_delay(result.attempts)
    shared_error = f"page did not answer {result.extractor}: {error}"
    not_started = Q(status=ResultStatus.QUEUED) | Q(status=ResultStatus.BACKOFF, retry_at__lte=now)
    with transaction.atomic():
        others = list(
            snapshot.results.filter(not_started)
            .exclude(pk=result.pk)
            .select_for_update(skip_locked=True, of=("self",))
        )
        for other in others:
            share_failure(
                other,
                shared_error,
                max_attempts=get_extractor(other.extractor).max_attempts,
                delay=delay,
                defer=other.defer,
                give_up=other.give_up,
            )
            other.save()
    for other in others:
        if other.status == ResultStatus.FAILED and other.behaviour == StepBehaviour.BLOCKING:
            result_stop_remaining(result=other)
    if others:
        logger.info(
            "snapshot %s: %s could not reach the page; %d results back off with it",
            snapshot.pk,
            result.extractor,
            len(others),
        )
    return len(others)


def result_recover(*, result: ArchiveResult) -> None:
    """Count the attempt of a result whose worker died, then back off or fail it."""
    with transaction.atomic():
        recover_expired_lease(
            result,
            max_attempts=get_extractor(result.extractor).max_attempts,
            back_off=result.back_off,
            fail=result.fail,
        )
        result.save()
    logger.warning("recovered %s of %s: %s", result.extractor, result.snapshot_id, LEASE_EXPIRED)


def _move_into_place(work_dir: Path, final_dir: Path) -> tuple[list[str], int]:
    """Replace ``final_dir`` with ``work_dir``; return its files (relative to the snapshot
    folder, sorted) and their total size in bytes."""
    if final_dir.exists():
        stale = final_dir.with_name(f"{TEMP_PREFIX}old-{final_dir.name}")
        shutil.rmtree(stale, ignore_errors=True)
        final_dir.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    work_dir.rename(final_dir)
    # A scandir walk stats the files alone (some 20 of wget's at every success), where rglob
    # and pathlib's tests took five times as long.
    start = len(os.fspath(final_dir.parent)) + 1  # the path relative to the snapshot folder
    found = {
        entry.path[start:]: entry.stat(follow_symlinks=False).st_size
        for entry in file_entries(final_dir, temporary=True)
    }
    files = sorted(found, key=lambda relative: relative.split("/"))  # as Paths sort
    return files, sum(found.values())


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
