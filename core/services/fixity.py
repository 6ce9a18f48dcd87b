"""Fixity audits: re-hash stored snapshots against their signed manifests, and repair damage.

A check of the local copy (``DATA_DIR/archive/<id>/``) finds it sound when:

- the manifest is the one sealed (its SHA-256 equals ``Snapshot.manifest_sha256``);
- its Ed25519 signature verifies with the key ``index.json`` names, and that key is one this
  archive trusts (core/folder/signing.py);
- every file it lists is present with the listed SHA-256, and no file is missing from it
  (RFC 8493 §3 asks the same of a bag's payload).

A check of a storage copy reads every file back from the target (core/folder/transfers.py). Each
check is recorded as a FixityCheck row; a stored copy found damaged moves to ``damaged``. A damaged
local folder is restored from a sound storage copy (``snapshot_restore``); a damaged storage copy is
copied again from the local folder (``copies_retry``).
"""

from __future__ import annotations

import json
import logging
import shutil
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.choices import CopyStatus, FixityOutcome, SnapshotStatus
from core.folder.blobs import blob_path
from core.folder.manifest import (
    INDEX_NAME,
    MANIFEST_NAME,
    MISMATCH,
    read_manifest,
    sha256_file,
    verify_manifest,
)
from core.folder.signing import SigningKeyError, verify_signature
from core.folder.targets import TargetError, TargetUnavailable
from core.folder.transfers import download_snapshot, verify_copy
from core.models import FixityCheck, Snapshot, StorageCopy
from core.models.preservation import LOCAL
from core.services.copies import copies_retry

logger = logging.getLogger(__name__)


class RestoreError(Exception):
    """A snapshot that cannot be restored from a storage copy; the message says why."""


def snapshot_audit(*, snapshot: Snapshot, remote: bool = True) -> list[FixityCheck]:
    """Check the local copy of a sealed ``snapshot`` and, with ``remote``, each storage copy
    that is stored or damaged; record and return one FixityCheck per location.

    Raises ValueError when the snapshot is not sealed (nothing is signed yet to check against).
    """
    if snapshot.status != SnapshotStatus.SEALED:
        raise ValueError(f"snapshot {snapshot.pk} is {snapshot.status}, not sealed")
    checks = [_record_local(snapshot)]
    if remote:
        copies = snapshot.copies.filter(status__in=[CopyStatus.STORED, CopyStatus.DAMAGED])
        checks += [_audit_copy(copy, snapshot) for copy in copies]
    return checks


def local_problems(snapshot: Snapshot) -> tuple[list[str], int]:
    """Return the problems of ``snapshot``'s local folder and how many files its manifest lists."""
    folder = snapshot.output_dir
    if not folder.is_dir():
        return [f"folder missing: {folder}"], 0
    manifest = folder / MANIFEST_NAME
    try:
        listed = read_manifest(folder)
        manifest_sha256 = sha256_file(manifest)
    except FileNotFoundError:
        return [f"missing: {MANIFEST_NAME}"], 0
    except (OSError, UnicodeDecodeError) as error:
        return [f"cannot read {MANIFEST_NAME}: {error}"], 0
    problems = []
    if manifest_sha256 != snapshot.manifest_sha256:
        problems.append(f"{MANIFEST_NAME} is not the one sealed (sha256 {manifest_sha256[:16]}…)")
    problems += _signature_problems(folder)
    problems += [_naming_shared_damage(folder, listed, p) for p in verify_manifest(folder)]
    return problems, len(listed)


def _naming_shared_damage(folder: Path, listed: dict[str, str], problem: str) -> str:
    """``problem`` (one of verify_manifest's), saying, for a changed file that is one of a
    blob's names (core/folder/blobs.py), how many other snapshot files hold the same bytes,
    damaged too: repairing this snapshot gives it a file of its own, and only an audit of
    every snapshot finds the others. ``listed``: the manifest, ``{relative path: sha256}``."""
    if not problem.startswith(MISMATCH):
        return problem
    relative = problem.removeprefix(MISMATCH)
    digest = listed.get(relative)  # verify_manifest read the manifest again: it may differ
    others = _other_names(folder / relative, digest) if digest else 0
    if not others:
        return problem
    files = "file" if others == 1 else "files"
    verify = "manage.py verify --all flags them too"
    return f"{problem} (its bytes are shared with {others} other snapshot {files}: {verify})"


def _other_names(path: Path, digest: str) -> int:
    """How many names besides ``path`` and the blob itself the file at ``path`` has, when it
    is the blob of ``digest`` (0 when it is a file of its own)."""
    try:
        own, blob = path.stat(), blob_path(digest).stat()
    except (OSError, ValueError):
        return 0
    if (own.st_dev, own.st_ino) != (blob.st_dev, blob.st_ino):
        return 0
    return max(own.st_nlink - 2, 0)


def _signature_problems(folder: Path) -> list[str]:
    """Check the manifest's signature with the key ``index.json`` names (a trusted one)."""
    try:
        index = json.loads((folder / INDEX_NAME).read_bytes())
        public_pem = index.get("signing_key", {}).get("public_key")
    except (OSError, ValueError, AttributeError) as error:
        # The manifest check reports a missing or altered index.json by name; this says why the
        # signature could not be checked with its key. Trusted keys are tried instead.
        logger.info("%s: cannot read the signing key from %s: %s", folder, INDEX_NAME, error)
        public_pem = None
    try:
        return verify_signature(folder, public_pem)
    except SigningKeyError as error:
        return [f"signature not checked: {error}"]


def _record_local(snapshot: Snapshot) -> FixityCheck:
    problems, files = local_problems(snapshot)
    return _record(snapshot, LOCAL, problems, files)


def _audit_copy(copy: StorageCopy, snapshot: Snapshot) -> FixityCheck:
    if copy.target not in settings.STORAGE_TARGETS:
        return _record(snapshot, copy.target, None, 0, f"target {copy.target!r} not configured")
    try:
        problems = verify_copy(copy.target, snapshot.output_dir, str(snapshot.pk))
    except (TargetUnavailable, TargetError) as error:
        return _record(snapshot, copy.target, None, 0, str(error))
    with transaction.atomic():
        if problems and copy.status == CopyStatus.STORED:
            copy.flag(problems=problems)
        elif not problems and copy.status == CopyStatus.STORED:
            copy.confirm()
        elif not problems:
            copy.recover()
        copy.save()
        return _record(snapshot, copy.target, problems, copy.files)


def _record(
    snapshot: Snapshot, location: str, problems: list[str] | None, files: int, note: str = ""
) -> FixityCheck:
    """Write one FixityCheck; ``problems`` None means the location could not be read."""
    if problems is None:
        outcome, problems = FixityOutcome.UNREACHABLE, [note]
    else:
        outcome = FixityOutcome.FLAGGED if problems else FixityOutcome.OK
    logger.info("fixity: snapshot %s on %s: %s %s", snapshot.pk, location, outcome, problems)
    return FixityCheck.objects.create(
        snapshot=snapshot, location=location, outcome=outcome, problems=problems, files=files
    )


def fixity_audit_due(*, now: datetime | None = None, limit: int | None = None) -> int:
    """Audit sealed snapshots whose local copy was not checked in FIXITY_AUDIT_INTERVAL_DAYS,
    the earliest sealed first; return how many were audited (the scheduled task's work).

    Each snapshot found damaged is logged as an error: no one is watching a scheduled audit.
    """
    now = now or timezone.now()
    cutoff = now - timezone.timedelta(days=settings.FIXITY_AUDIT_INTERVAL_DAYS)
    due = Snapshot.objects.audit_due(cutoff)
    if limit is not None:
        due = due[:limit]
    audited = 0
    for snapshot in due.iterator(chunk_size=100):
        for check in snapshot_audit(snapshot=snapshot):
            if check.outcome == FixityOutcome.FLAGGED:
                logger.error("fixity audit: snapshot %s (%s) on %s: %s", snapshot.pk,
                             snapshot.url, check.location, "; ".join(check.problems))  # fmt: skip
        audited += 1
    return audited


def snapshot_restore(*, snapshot: Snapshot, target: str | None = None) -> str:
    """Replace ``snapshot``'s local folder with a sound storage copy; return the target used.

    The copy is downloaded next to the archive (``DATA_DIR/tmp/``), each file checked against
    the copy's manifest, and that manifest must be the one sealed, with a valid signature. Only
    then is the damaged folder moved to ``DATA_DIR/quarantine/`` (kept, not deleted) and the
    copy moved into its place. Raises RestoreError when no copy is usable.
    """
    copies = snapshot.copies.filter(status=CopyStatus.STORED)
    if target:
        copies = copies.filter(target=target)
    candidates = [copy.target for copy in copies if copy.target in settings.STORAGE_TARGETS]
    if not candidates:
        where = f" on {target}" if target else ""
        raise RestoreError(f"snapshot {snapshot.pk} has no stored copy{where} to restore from")
    reasons = []
    for name in candidates:
        try:
            _restore_from(snapshot, name)
        except RestoreError as error:
            reasons.append(f"{name}: {error}")
            continue
        _record_local(snapshot)
        logger.info("snapshot %s restored from %s", snapshot.pk, name)
        return name
    raise RestoreError("; ".join(reasons))


def _restore_from(snapshot: Snapshot, target: str) -> None:
    staging = settings.DATA_DIR / "tmp" / f"restore-{snapshot.pk}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        download_snapshot(target, str(snapshot.pk), staging)
        if sha256_file(staging / MANIFEST_NAME) != snapshot.manifest_sha256:
            raise RestoreError("its manifest is not the one sealed")
        problems = _signature_problems(staging) + verify_manifest(staging)
        if problems:
            raise RestoreError("; ".join(problems[:5]))
    except (TargetUnavailable, TargetError, OSError) as error:
        shutil.rmtree(staging, ignore_errors=True)
        # Storage errors name their target already; the caller names it too.
        raise RestoreError(str(error).removeprefix(f"{target}: ")) from None
    except RestoreError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    folder = snapshot.output_dir
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    quarantine = settings.DATA_DIR / "quarantine" / f"{snapshot.pk}-{stamp}"
    try:
        if folder.exists():
            quarantine.parent.mkdir(parents=True, exist_ok=True)
            folder.rename(quarantine)
        staging.rename(folder)
    except OSError as error:
        # Either rename failing leaves the damaged folder where it was or in quarantine, and the
        # sound copy in staging: nothing is lost, and restoring again starts over.
        raise RestoreError(f"cannot move the restored copy into place: {error}") from None


def snapshot_repair(*, snapshot: Snapshot, target: str | None = None) -> list[str]:
    """Repair whatever a fixity audit flagged on ``snapshot``; return what was done, one line
    each ([] when all was sound).

    A damaged local folder is restored from a sound storage copy (``target`` if given); then,
    with the local folder sound, damaged or failed storage copies are queued to be copied
    again. Raises RestoreError when the local folder is damaged and no copy can restore it.
    """
    done = []
    problems, _files = local_problems(snapshot)
    if problems:
        _record(snapshot, LOCAL, problems, 0)
        used = snapshot_restore(snapshot=snapshot, target=target)
        done.append(f"restored the local folder from {used}")
    queued = copies_retry(copies=snapshot.copies.all())
    if queued:
        done.append(f"queued {queued} damaged or failed storage copies to be copied again")
    return done
