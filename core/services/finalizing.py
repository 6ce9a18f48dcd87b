"""Finalizing a snapshot (DESIGN.md §2): check its outputs, package, describe, sign and seal it.

The steps run in this order, each idempotent so that a crash part-way repeats it safely:

1. clean up the working folders of attempts that crashed;
2. check every succeeded result's outputs (core/folder/integrity.py); corrupt ones are removed
   and their results go back to backoff, and the snapshot back to ``started`` to wait for them;
3. write as revisit records the responses whose payload a sealed snapshot already holds
   (core/services/dedup.py), and keep the last capture's PDF or SingleFile page in place of
   one that differs from it only in the time its tool wrote into it
   (core/services/unchanged_outputs.py);
4. package the WARCs, page list and screenshot as ``snapshot.wacz`` (core/folder/wacz.py), unless
   a WARC now holds revisits: such a WACZ could not replay alone, so none is stored, and replay
   and exports package one made whole on demand (core/services/dedup.py);
5. write ``index.json``, then ``manifest-sha256.txt`` over every file, then its Ed25519 signature
   (core/folder/signing.py);
6. take the digest of the page's readable text (core/services/captures.py: what tells an
   unchanged page on the URL's timeline);
7. make each file that another snapshot holds too a hard link to one shared copy
   (core/folder/blobs.py);
8. seal the snapshot, index its payloads, and queue one copy per storage target
   (core/services/copies.py copies them).

A recoverable error (disk full, a packaging timeout, an unreadable key) retries with backoff;
past MAX_ATTEMPTS the snapshot fails with the reason, logged as an error.
"""

from __future__ import annotations

import logging
import shutil
from functools import partial
from pathlib import Path

from django.conf import settings
from django.db import models, transaction

from core.choices import ResultStatus
from core.extractors.registry import find_extractor, get_extractor
from core.folder.blobs import share_files
from core.folder.index_json import snapshot_index, write_index
from core.folder.integrity import check_snapshot
from core.folder.manifest import TEMP_PREFIX, read_manifest, write_manifest
from core.folder.revisits import RevisitError
from core.folder.signing import (
    SigningKeyError,
    ensure_signing_key,
    sign_manifest,
)
from core.folder.wacz import WACZ_NAME, PackagingError, build_wacz
from core.models import ArchiveResult, Snapshot
from core.services.captures import snapshot_content_digest
from core.services.copies import copies_queue
from core.services.dedup import (
    has_revisits,
    payloads_record,
    replay_cache_drop,
    snapshot_deduplicate,
)
from core.services.search import snapshot_index_text, snapshot_page_text
from core.services.unchanged_outputs import snapshot_keep_unchanged_outputs
from crawls.choices import CrawlStatus
from crawls.models import Crawl, crawl_add_bytes
from orchestrator.models import WakeStatement
from orchestrator.prepared import Statement
from orchestrator.retries import exhausted, recover_expired_lease, retry_or_fail

logger = logging.getLogger(__name__)


# What makes a finalizing step fail but may pass on a later attempt.
RECOVERABLE = (OSError, ValueError, SigningKeyError, RevisitError)


def snapshot_finalize(*, snapshot: Snapshot, attempt_counted: bool = False) -> None:
    """Run the finalizing steps of ``snapshot`` (in ``finalizing``) and seal it.

    Each attempt is counted before it runs, so a worker that dies while finalizing uses one up
    too: here, or by the caller with ``attempt_counted`` (the first attempt, counted in the
    commit that moved the snapshot to ``finalizing``: core/services/snapshots.py). A
    ValueError here is a file name that cannot be encoded.
    """
    if not attempt_counted and not _count_attempt(snapshot):
        return
    results = snapshot.results_in_order()
    found = _given_title(snapshot) or _title_from(results) or _unchanged_title(snapshot)
    snapshot.title = found or snapshot.title
    try:
        corrupt = _check_outputs(snapshot, results)
        if corrupt:
            _send_back(snapshot, results, corrupt)
            return
        originals = snapshot_deduplicate(snapshot=snapshot, results=results)
        snapshot_keep_unchanged_outputs(snapshot=snapshot, results=results)
        manifest_sha256, signed_by = _write_proofs(snapshot, results)
        content_digest = snapshot_content_digest(snapshot=snapshot)
    except PackagingError as error:
        if error.temporary:
            _back_off_finalizing_or_fail(snapshot, f"finalizing failed: {error}")
        else:  # py-wacz refuses these WARCs: trying again gives the same answer
            _finalizing_failed(snapshot, f"finalizing failed: {error}")
        return
    except RECOVERABLE as error:
        _back_off_finalizing_or_fail(snapshot, f"finalizing failed: {error}")
        return
    _share(snapshot)
    with transaction.atomic():
        snapshot.seal(
            manifest_sha256=manifest_sha256, signed_by=signed_by, content_digest=content_digest
        )
        snapshot.save()
        payloads_record(snapshot=snapshot, originals=originals)
        copies_queue(snapshot=snapshot)
        snapshot_index_text(snapshot=snapshot)
    wake_crawl_if_done(snapshot)


def _count_attempt(snapshot: Snapshot) -> bool:
    """Count one more finalizing attempt of ``snapshot`` and return True; or, with none
    left, recover the attempt whose worker died and return False."""
    if exhausted(snapshot.attempts, settings.MAX_ATTEMPTS):
        # An attempt that ends seals, fails or backs off with attempts left: claimed with none
        # left, the snapshot's last attempt neither sealed nor failed, its worker died.
        recover_expired_lease(
            snapshot,
            max_attempts=settings.MAX_ATTEMPTS,
            back_off=partial(_retry_finalizing, snapshot),
            fail=partial(_finalizing_failed, snapshot),
            earlier_error=snapshot.error,
        )
        return False
    with transaction.atomic():
        snapshot.begin_finalizing()
        snapshot.save()
    return True


def snapshot_reseal(*, snapshot: Snapshot) -> None:
    """Write the proofs of a sealed ``snapshot`` whose folder was rewritten without changing
    what it holds (revisits made whole: core/services/removal.py) again: its WACZ,
    ``index.json``, manifest and signature; then re-seal it and queue its storage copies again.

    Raises PackagingError, OSError or SigningKeyError when a proof cannot be written; the
    snapshot then stays sealed with its earlier manifest, which its folder no longer matches
    (calling this again finishes the job).
    """
    results = snapshot.results_in_order()
    manifest_sha256, signed_by = _write_proofs(snapshot, results)
    _share(snapshot)
    with transaction.atomic():
        snapshot.reseal(manifest_sha256=manifest_sha256, signed_by=signed_by)
        snapshot.save()
        copies_queue(snapshot=snapshot)
    replay_cache_drop(snapshot_id=snapshot.pk)
    logger.info("snapshot %s re-sealed: manifest %s", snapshot.pk, manifest_sha256[:16])


def _share(snapshot: Snapshot) -> None:
    """Link the snapshot's files that others hold too to one shared copy (DEDUPLICATE on).

    Sharing saves space and changes no byte: a failure is logged, never a finalizing error.
    """
    if not settings.DEDUPLICATE:
        return
    folder = snapshot.output_dir
    try:
        shared = share_files(folder, read_manifest(folder))
    except OSError as error:
        logger.warning("snapshot %s: files not shared: %s", snapshot.pk, error)
        return
    if shared.linked:
        logger.info("snapshot %s: %d files (%d bytes) share a copy held elsewhere",
                    snapshot.pk, shared.linked, shared.bytes)  # fmt: skip


def _check_outputs(snapshot: Snapshot, results: list[ArchiveResult]) -> dict[str, list[str]]:
    """Clean up crashed attempts, then return ``{extractor: problems}`` for corrupt outputs."""
    folder = snapshot.output_dir
    folder.mkdir(parents=True, exist_ok=True)
    _remove_temporary(folder)
    succeeded = [result for result in results if result.status == ResultStatus.SUCCEEDED]
    return check_snapshot(folder, succeeded)


def _write_proofs(snapshot: Snapshot, results: list[ArchiveResult]) -> tuple[str, str]:
    """Package, describe and sign the folder; return the manifest's SHA-256 and the signer."""
    folder = snapshot.output_dir
    ensure_signing_key()  # index.json names the key, so it must exist before the index
    if has_revisits(snapshot):
        # Its revisits' payloads are in other snapshots: a WACZ of these WARCs would not
        # replay alone, and one made whole would store those payloads again.
        (folder / WACZ_NAME).unlink(missing_ok=True)
    elif settings.PACKAGE_WACZ:
        build_wacz(
            folder,
            url=snapshot.url,
            title=snapshot.title,
            archived_at=snapshot.start_ts or snapshot.created_at,
            timeout=settings.WACZ_TIMEOUT,
            text=snapshot_page_text(snapshot=snapshot),
        )
    write_index(folder, snapshot_index(snapshot, results))
    manifest_sha256 = write_manifest(folder)
    return manifest_sha256, sign_manifest(folder)


def _send_back(
    snapshot: Snapshot, results: list[ArchiveResult], corrupt: dict[str, list[str]]
) -> None:
    """Remove corrupt outputs, send their results back to backoff (or fail them when their
    attempts are used up), and make the snapshot wait for them again."""
    folder = snapshot.output_dir
    for extractor in corrupt:
        _discard(folder / extractor)
    summary = "; ".join(f"{name}: {', '.join(problems)}" for name, problems in corrupt.items())
    logger.warning("snapshot %s: corrupt outputs sent back: %s", snapshot.pk, summary)
    with transaction.atomic():
        for result in results:
            if result.extractor not in corrupt:
                continue
            crawl_add_bytes(snapshot.crawl_id, -result.output_size)
            retry_or_fail(
                result,
                f"output failed the integrity check: {'; '.join(corrupt[result.extractor])}",
                max_attempts=get_extractor(result.extractor).max_attempts,
                back_off=result.reject,
                fail=result.reject_finally,
            )
            result.save()
        snapshot.reopen(error=f"corrupt outputs: {summary}", delay=settings.POLL_INTERVAL)
        snapshot.save()


def _discard(path: Path) -> None:
    """Remove a corrupt output folder: renamed first, so a crash mid-way leaves only a
    temporary folder, which the next attempt's clean-up removes."""
    if not path.exists():
        return
    doomed = path.with_name(f"{TEMP_PREFIX}corrupt-{path.name}")
    shutil.rmtree(doomed, ignore_errors=True)
    path.rename(doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def _back_off_finalizing_or_fail(snapshot: Snapshot, reason: str) -> None:
    """Back off after the recoverable finalizing error ``reason``, or fail with it (as it is:
    it says "finalizing failed") once MAX_ATTEMPTS are used."""
    logger.warning("snapshot %s: %s", snapshot.pk, reason)
    retry_or_fail(
        snapshot,
        reason,
        max_attempts=settings.MAX_ATTEMPTS,
        back_off=partial(_retry_finalizing, snapshot),
        fail=partial(_finalizing_failed, snapshot),
        say_exhausted=False,
    )


def _retry_finalizing(snapshot: Snapshot, *, error: str, delay: float) -> None:
    """Save the snapshot backing off for ``delay`` seconds after the recoverable ``error``."""
    with transaction.atomic():
        snapshot.retry_finalizing(error=error, delay=delay)
        snapshot.save()


def _finalizing_failed(snapshot: Snapshot, error: str) -> None:
    """Fail the snapshot with ``error``, clean up its working files, and tell the crawl."""
    with transaction.atomic():
        snapshot.fail(error=error)
        snapshot.save()
    logger.error("snapshot %s (%s) failed: %s", snapshot.pk, snapshot.url, error)
    if snapshot.output_dir.is_dir():
        _remove_temporary(snapshot.output_dir)
    wake_crawl_if_done(snapshot)


def wake_crawl_if_done(snapshot: Snapshot) -> None:
    """Once a crawl's last snapshot is final, make the crawl due now (see snapshot_wake)."""
    if CRAWL_ACTIVE.exists(snapshot.crawl_id):
        return
    CRAWL_WAKE.wake(snapshot.crawl_id)


def _started_crawl(crawl_id: int) -> models.QuerySet:
    """Crawl ``crawl_id`` while it is started (what ``CRAWL_WAKE`` wakes)."""
    return Crawl.objects.filter(pk=crawl_id, status=CrawlStatus.STARTED)


def _active_in_crawl(crawl_id: int) -> models.QuerySet:
    """The snapshots of crawl ``crawl_id`` that are not final."""
    return Snapshot.objects.active().filter(crawl_id=crawl_id)


# Every sealed snapshot may be its crawl's last (wake_crawl_if_done): compiled once.
CRAWL_ACTIVE = Statement(
    "active snapshots of a crawl", _active_in_crawl, (int,), actors=("snapshot",)
)
CRAWL_WAKE = WakeStatement("a started crawl", Crawl, _started_crawl, (int,), actors=("snapshot",))


def _given_title(snapshot: Snapshot) -> str:
    """The title the crawl's input gave this URL (a bookmark's or feed entry's): a person chose
    it, so it is kept over the page's own (which the title extractor keeps in title.txt)."""
    if snapshot.depth > 0:
        return ""  # a page found by following links: no input named it
    return (snapshot.crawl.seed_given(snapshot.url) or {}).get("title", "")


def _unchanged_title(snapshot: Snapshot) -> str:
    """The title of the capture whose page an unchanged one found again ("" for others)."""
    return snapshot.unchanged_since.title if snapshot.unchanged_since_id else ""


def _title_from(results: list[ArchiveResult]) -> str:
    """The output of the first succeeded result whose extractor ``gives_title``, else ""."""
    for result in results:
        extractor = find_extractor(result.extractor)
        if extractor and extractor.gives_title and result.status == ResultStatus.SUCCEEDED:
            return result.output
    return ""


def _remove_temporary(folder: Path) -> None:
    """Remove working folders left by attempts that crashed (they never count as output), and
    the temporary files a WARC's rewriting leaves beside it (core/folder/revisits.py) when its
    process is killed."""
    for path in [*folder.glob(f"{TEMP_PREFIX}*"), *folder.glob(f"*/warc/{TEMP_PREFIX}*")]:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
