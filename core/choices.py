"""State vocabulary: snapshots, archive results, hosts, storage copies, fixity checks
(DESIGN.md §2)."""

from django.db import models


class SnapshotStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    STARTED = "started", "Started"
    FINALIZING = "finalizing", "Finalizing"
    SEALED = "sealed", "Sealed"
    FAILED = "failed", "Failed"

    @classmethod
    def active(cls) -> tuple[str, ...]:
        return (cls.QUEUED, cls.STARTED, cls.FINALIZING)

    @classmethod
    def final(cls) -> tuple[str, ...]:
        return (cls.SEALED, cls.FAILED)


class ResultStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    STARTED = "started", "Started"
    BACKOFF = "backoff", "Backoff"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"

    @classmethod
    def active(cls) -> tuple[str, ...]:
        return (cls.QUEUED, cls.STARTED, cls.BACKOFF)

    @classmethod
    def final(cls) -> tuple[str, ...]:
        return (cls.SUCCEEDED, cls.FAILED, cls.SKIPPED)


class HostStatus(models.TextChoices):
    """States of a host's circuit breaker (core/models/hosts.py): its results run, or it is
    paused after connection failures (once the pause has passed, one result is let through)."""

    OK = "ok", "OK"
    PAUSED = "paused", "Paused"


class CopyStatus(models.TextChoices):
    """States of one copy of a sealed snapshot on one storage target."""

    QUEUED = "queued", "Queued"
    STARTED = "started", "Started"
    BACKOFF = "backoff", "Backoff"
    STORED = "stored", "Stored"
    FAILED = "failed", "Failed"
    DAMAGED = "damaged", "Damaged"  # a fixity audit found it no longer matches the manifest

    @classmethod
    def active(cls) -> tuple[str, ...]:
        return (cls.QUEUED, cls.STARTED, cls.BACKOFF)

    @classmethod
    def final(cls) -> tuple[str, ...]:
        return (cls.STORED, cls.FAILED, cls.DAMAGED)


class FixityOutcome(models.TextChoices):
    """What one fixity check of one copy of a snapshot found."""

    OK = "ok", "OK"
    FLAGGED = "flagged", "Flagged"  # files missing, altered, or the signature does not verify
    UNREACHABLE = "unreachable", "Unreachable"  # the storage could not be read: nothing learnt
