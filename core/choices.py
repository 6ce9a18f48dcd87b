"""State vocabulary of snapshots and archive results (DESIGN.md §2)."""

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
