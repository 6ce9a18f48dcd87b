"""Copying sealed snapshots to storage targets: what a storage-copy actor's tick does.

Each copy is a work item like an archive result: claimed under a lease, one attempt per tick,
a target that is down backs off (up to BACKOFF_CAP between tries) until STORAGE_MAX_ATTEMPTS,
and a worker that dies mid-copy is recovered when its lease runs out. Targets are independent:
one that is down never holds back another. A copy counts as stored only once it has been read
back and every file matched the signed manifest (core/folder/transfers.py).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from core.choices import CopyStatus, FixityOutcome
from core.folder.manifest import MANIFEST_NAME, sha256_file
from core.folder.targets import TargetError, TargetUnavailable, target_names
from core.folder.transfers import upload_snapshot, verify_copy
from core.models import FixityCheck, Snapshot, StorageCopy
from orchestrator.retries import recover_expired_lease, retry_or_fail

logger = logging.getLogger(__name__)


def copies_queue(*, snapshot: Snapshot) -> int:
    """Queue a copy of a just-sealed ``snapshot`` on every storage target; return how many.

    A target that holds an earlier copy (of an earlier run) is copied again. Call inside the
    transaction that seals the snapshot, so a sealed snapshot never lacks its copies.
    """
    queued = 0
    for target in target_names():
        copy, created = StorageCopy.objects.get_or_create(
            snapshot=snapshot, target=target, defaults={"priority": snapshot.priority}
        )
        if not created and copy.status in CopyStatus.final():
            copy.requeue()
            copy.save()
        queued += 1
    return queued


def copy_tick(*, copy: StorageCopy) -> None:
    """Run one attempt of ``copy``: upload the snapshot folder, read it back, record the outcome.

    A copy claimed while still ``started`` was left by a worker that died: that attempt counts
    as a temporary failure. A copy whose target is no longer configured fails with that reason.
    """
    if copy.status == CopyStatus.STARTED:
        with transaction.atomic():
            recover_expired_lease(
                copy,
                max_attempts=settings.STORAGE_MAX_ATTEMPTS,
                back_off=copy.back_off,
                fail=copy.fail,
            )
            copy.save()
        return
    with transaction.atomic():
        copy.start()
        copy.save()
    if copy.target not in settings.STORAGE_TARGETS:
        _record(copy, fatal=f"storage target {copy.target!r} is no longer configured")
        return
    snapshot = copy.snapshot
    folder = snapshot.output_dir
    if _local_manifest_sha256(folder) != snapshot.manifest_sha256:
        # Copying a folder whose manifest is not the one sealed would spread the damage.
        _record(copy, fatal="the local folder's manifest is not the one sealed: "
                            "manage.py verify, then restore, before copying")  # fmt: skip
        return
    try:
        files, size = upload_snapshot(copy.target, folder, str(copy.snapshot_id))
        problems = verify_copy(copy.target, folder, str(copy.snapshot_id))
    except TargetUnavailable as error:
        _record(copy, temporary=str(error))
        return
    except TargetError as error:
        _record(copy, fatal=str(error))
        return
    if problems:
        # Read back different from what was written: a transfer or storage fault; try again.
        _record(copy, temporary=f"copy did not verify: {'; '.join(problems[:5])}")
        return
    with transaction.atomic():
        copy.store(files=files, size=size, manifest_sha256=snapshot.manifest_sha256)
        copy.save()
        FixityCheck.objects.create(
            snapshot_id=copy.snapshot_id, location=copy.target, outcome=FixityOutcome.OK,
            files=files,
        )  # fmt: skip
    logger.info("snapshot %s stored on %s (%d files, %d bytes)", copy.snapshot_id, copy.target,
                files, size)  # fmt: skip


def _local_manifest_sha256(folder) -> str | None:
    """Return the SHA-256 of ``folder``'s manifest, or None when it cannot be read."""
    try:
        return sha256_file(folder / MANIFEST_NAME)
    except OSError:
        return None


def _record(copy: StorageCopy, *, temporary: str = "", fatal: str = "") -> None:
    logger.warning("copy of %s on %s: %s", copy.snapshot_id, copy.target, temporary or fatal)
    with transaction.atomic():
        if fatal:
            copy.fail(error=fatal)
        else:
            retry_or_fail(
                copy,
                temporary,
                max_attempts=settings.STORAGE_MAX_ATTEMPTS,
                back_off=copy.back_off,
                fail=copy.fail,
            )
        copy.save()


def copies_retry(*, copies) -> int:
    """Queue failed or damaged copies again (explicit request); return how many.

    ``copies`` is a StorageCopy queryset; copies in other states are left alone.
    """
    count = 0
    for copy in copies.filter(status__in=[CopyStatus.FAILED, CopyStatus.DAMAGED]):
        with transaction.atomic():
            copy.requeue()
            copy.save()
        count += 1
    return count
