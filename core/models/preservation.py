"""Proofs that an archived snapshot survives: its copies on storage targets and fixity checks."""

from __future__ import annotations

from django.db import models
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from core.choices import CopyStatus, FixityOutcome, SnapshotStatus
from crawls.choices import CrawlStatus
from orchestrator.models import WorkItem, WorkQuerySet

LOCAL = "local"  # the location name of the copy in DATA_DIR/archive/


class StorageCopyQuerySet(WorkQuerySet):
    ACTIVE_STATES = CopyStatus.active()

    def runnable(self) -> StorageCopyQuerySet:
        """Active copies of sealed snapshots of crawls that are not held (a snapshot archived
        again is copied once it is sealed again: copying a folder that is being rewritten would
        store a mix; a held crawl's copies wait, as when its storage is being moved)."""
        return (
            super()
            .runnable()
            .filter(snapshot__status=SnapshotStatus.SEALED)
            .exclude(snapshot__crawl__status=CrawlStatus.HELD)
        )

    def verified(self) -> StorageCopyQuerySet:
        """Copies stored and read back intact."""
        return self.filter(status=CopyStatus.STORED)


class StorageCopy(ConcurrentTransitionMixin, WorkItem):
    """One copy of one sealed snapshot's folder on one storage target (settings.STORAGE_TARGETS).

    ``queued → started → stored``; a target that is down goes ``started → backoff → started``
    until STORAGE_MAX_ATTEMPTS, then ``failed``. A fixity audit that finds a stored copy altered
    or incomplete moves it to ``damaged`` (and back to ``stored`` if a later audit finds it
    intact); ``requeue`` copies it again (after a re-archive, a repair or an explicit retry).
    """

    snapshot = models.ForeignKey("core.Snapshot", on_delete=models.CASCADE, related_name="copies")
    target = models.CharField(max_length=64, help_text="A name in STORAGE_TARGETS.")
    status = FSMField(
        default=CopyStatus.QUEUED, choices=CopyStatus.choices, protected=True, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why it failed, backed off or was flagged.")
    files = models.PositiveIntegerField(default=0, help_text="Files copied, tag files included.")
    size = models.BigIntegerField(default=0, help_text="Bytes copied.")
    manifest_sha256 = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the manifest this copy holds."
    )
    verified_at = models.DateTimeField(
        null=True, blank=True, help_text="When the copy was last read back and found intact."
    )

    objects = StorageCopyQuerySet.as_manager()

    class Meta:
        ordering = ["snapshot", "target"]
        verbose_name_plural = "storage copies"
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "target"], name="unique_copy_per_target")
        ]

    def __str__(self) -> str:
        return f"{self.snapshot_id} on {self.target}"

    @transition(
        field=status, source=[CopyStatus.QUEUED, CopyStatus.BACKOFF], target=CopyStatus.STARTED
    )
    def start(self) -> None:
        """Begin one attempt (counted now, so a worker that dies mid-copy still uses it up)."""
        self.attempts += 1
        self.start_ts = timezone.now()
        self.end_ts = None

    @transition(field=status, source=CopyStatus.STARTED, target=CopyStatus.STORED)
    def store(self, *, files: int, size: int, manifest_sha256: str) -> None:
        """The copy is written and was read back intact."""
        self.files, self.size, self.manifest_sha256 = files, size, manifest_sha256
        self.error = ""
        self.end_ts = self.verified_at = timezone.now()
        self.retry_at = None

    @transition(field=status, source=CopyStatus.STARTED, target=CopyStatus.BACKOFF)
    def back_off(self, *, error: str, delay: float) -> None:
        """A temporary error (target down, copy incomplete): try again after ``delay`` seconds."""
        self.error = error
        self.retry_at = timezone.now() + timezone.timedelta(seconds=delay)

    @transition(
        field=status, source=[CopyStatus.STARTED, CopyStatus.BACKOFF], target=CopyStatus.FAILED
    )
    def fail(self, *, error: str) -> None:
        """A permanent error, or attempts exhausted: final, with its reason."""
        self.error = error
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=CopyStatus.STORED, target=CopyStatus.STORED)
    def confirm(self) -> None:
        """A fixity audit read the copy back and found it intact."""
        self.verified_at = timezone.now()

    @transition(field=status, source=CopyStatus.STORED, target=CopyStatus.DAMAGED)
    def flag(self, *, problems: list[str]) -> None:
        """A fixity audit found files missing or altered: the copy no longer counts."""
        self.error = "; ".join(problems)

    @transition(field=status, source=CopyStatus.DAMAGED, target=CopyStatus.STORED)
    def recover(self) -> None:
        """A later audit read a damaged copy back intact (mended by hand, a passing fault)."""
        self.error = ""
        self.verified_at = timezone.now()

    @transition(field=status, source=CopyStatus.final(), target=CopyStatus.QUEUED)
    def requeue(self) -> None:
        """Copy the snapshot again from DATA_DIR (re-sealed, repaired or retried); due now."""
        self.attempts = 0
        self.error = ""
        self.retry_at = timezone.now()
        self.end_ts = None


class FixityCheckQuerySet(models.QuerySet):
    def conclusive(self) -> FixityCheckQuerySet:
        """Checks that read their copy (an unreachable storage says nothing about the copy)."""
        return self.exclude(outcome=FixityOutcome.UNREACHABLE)

    def since_seal(self) -> FixityCheckQuerySet:
        """Checks made since their snapshot was last sealed (``end_ts``): archived again, it
        holds new files under a new manifest, and what a check found of the earlier run says
        nothing of them. A re-seal (Snapshot.reseal) keeps its seal time, and so the checks:
        it signs the same bytes again. Of a snapshot without a seal time (being archived
        again now) every check is kept."""
        return self.filter(
            Q(snapshot__end_ts__isnull=True) | Q(checked_at__gte=F("snapshot__end_ts"))
        )

    def latest_per_location(self) -> FixityCheckQuerySet:
        """Checks that no later conclusive check of the same snapshot and location replaced."""
        later = FixityCheck.objects.conclusive().filter(
            snapshot=OuterRef("snapshot"),
            location=OuterRef("location"),
            checked_at__gt=OuterRef("checked_at"),
        )
        return self.exclude(Exists(later))

    def flagged(self) -> FixityCheckQuerySet:
        """The latest conclusive checks since the seal that found a problem (what is damaged
        now)."""
        return self.since_seal().latest_per_location().filter(outcome=FixityOutcome.FLAGGED)


class FixityCheck(models.Model):
    """One fixity check of one copy of a snapshot (the folder in DATA_DIR, or a storage target):
    the files re-hashed against the signed manifest, and what was found. Never changed once
    written: the table is the snapshot's audit trail (PREMIS calls these fixity check events).
    """

    snapshot = models.ForeignKey(
        "core.Snapshot", on_delete=models.CASCADE, related_name="fixity_checks"
    )
    location = models.CharField(
        max_length=64, help_text=f"'{LOCAL}' (DATA_DIR) or a storage target's name."
    )
    checked_at = models.DateTimeField(default=timezone.now, db_index=True)
    outcome = models.CharField(max_length=16, choices=FixityOutcome.choices)
    problems = models.JSONField(default=list, blank=True, help_text="What did not match.")
    files = models.PositiveIntegerField(default=0, help_text="Files re-hashed.")

    objects = FixityCheckQuerySet.as_manager()

    class Meta:
        ordering = ["-checked_at", "-pk"]
        indexes = [models.Index(fields=["snapshot", "location", "checked_at"])]

    def __str__(self) -> str:
        return f"{self.location} {self.outcome} at {self.checked_at:%Y-%m-%d %H:%M}"
