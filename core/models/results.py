"""Archive results: one extractor run on one snapshot, with the queryset that schedules them."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Case, Count, Exists, F, OuterRef, Value, When
from django.db.models.functions import Concat
from django.db.models.lookups import Contains
from django.utils import timezone
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.registry import READS_SAVED
from core.models.hosts import Host
from core.models.snapshots import Snapshot
from crawls.choices import CrawlStatus, StepBehaviour
from orchestrator.models import WorkItem, WorkQuerySet
from orchestrator.prepared import Statement
from orchestrator.retries import next_poll

STOPPED_PREFIX = "stopped: "  # the reason of a result skipped because a blocking step failed


class ArchiveResultQuerySet(WorkQuerySet):
    ACTIVE_STATES = ResultStatus.active()

    def runnable(self) -> ArchiveResultQuerySet:
        """Active results of started snapshots of crawls that are not held (a re-archived
        snapshot's results wait until it starts, behind the disk guard and the window), and
        that wait for no step still to finish."""
        return self._held_by_nothing().exclude(self._waiting_on_dependencies())

    def waiting_only_for(self, extractor: str, not_leased=None) -> ArchiveResultQuerySet:
        """Results that wait for the step ``extractor`` and nothing else, their snapshot and
        crawl held by nothing: runnable the moment that step ends. The actor that claims the
        step takes them with it (orchestrator/work.py), to run right after it. Under no lease:
        ``retry_at`` no later than ``not_leased`` (default: the next poll from now; a lease
        lies further ahead, orchestrator/retries.py ``next_poll``)."""
        return self._held_by_nothing().filter(
            status__in=[ResultStatus.QUEUED, ResultStatus.BACKOFF],
            depends_on=f",{extractor},",
            retry_at__lte=not_leased or next_poll(),
        )

    def _held_by_nothing(self) -> ArchiveResultQuerySet:
        return (
            super()
            .runnable()
            .filter(snapshot__status=SnapshotStatus.STARTED)
            .exclude(snapshot__crawl__status=CrawlStatus.HELD)
        )

    @staticmethod
    def _waiting_on_dependencies() -> models.Q:
        """Match results with a step they wait for (``depends_on``) not final yet on the same
        snapshot: readability waits for dom, later steps for a blocking one (crawls/profiles.py).
        """
        unfinished = ArchiveResult.objects.filter(
            snapshot=OuterRef("snapshot"), status__in=ResultStatus.active()
        ).filter(Contains(OuterRef("depends_on"), Concat(Value(","), F("extractor"), Value(","))))
        return models.Q(depends_on__gt="") & models.Q(Exists(unfinished))

    def claimable(self, now=None, *, variant: str | None = None) -> ArchiveResultQuerySet:
        """Due results, but none that would start on a host that may not take one more now
        (``held_back_hosts``); a started one whose worker died is always claimable (claiming it
        recovers it, and runs nothing)."""
        now = now or timezone.now()
        waiting = models.Q(status__in=[ResultStatus.QUEUED, ResultStatus.BACKOFF])
        return self.due(now).exclude(waiting & self.held_back_hosts(now))

    @staticmethod
    def held_back_hosts(now) -> models.Q:
        """Match results whose snapshot's host (core/models/hosts.py) may start none at ``now``:
        it is paused; or, unless the result ``reads_saved`` (it asks the host nothing), it is
        busy (``_busy_hosts``: on trial with a result running, or running HOST_CONCURRENCY) or
        on probation with a result running while a result of another host waits
        (``waiting_elsewhere``).

        Subqueries that do not depend on the row, each computed once per query. The claim's
        transaction checks again, exactly, and starts the result there (result_admit in
        core/services/results.py): this filter only keeps actors from claiming what the host
        would refuse.
        """
        running = ArchiveResult.objects.running(now)
        busy = ArchiveResultQuerySet._busy_hosts(now, running)
        if settings.HOST_CONCURRENCY:
            busy |= models.Q(snapshot__host__in=ArchiveResultQuerySet._on_probation(now, running))
        return ArchiveResultQuerySet._paused_hosts(now) | (
            busy & ~models.Q(extractor__in=READS_SAVED)
        )

    def running(self, now) -> ArchiveResultQuerySet:
        """Results that run at ``now`` on their host: started, under a live lease, of an
        extractor that asks the host for pages (not ``reads_saved``)."""
        return self.filter(status=ResultStatus.STARTED, retry_at__gt=now).exclude(
            extractor__in=READS_SAVED
        )

    @staticmethod
    def _paused_hosts(now) -> models.Q:
        """Match results of a host paused at ``now``."""
        return models.Q(snapshot__host__in=Host.objects.paused(now).values("name"))

    @staticmethod
    def _busy_hosts(now, running: models.QuerySet) -> models.Q:
        """Match results of a host that takes no more of those that ask it for pages at ``now``
        (``running`` being what runs then): on trial with one running, or running
        HOST_CONCURRENCY (0: no limit)."""
        on_trial = Host.objects.on_trial(now).values("name")
        busy = models.Q(
            snapshot__host__in=running.filter(snapshot__host__in=on_trial).values("snapshot__host")
        )
        if settings.HOST_CONCURRENCY:
            full = (
                running.order_by()
                .values("snapshot__host")
                .annotate(running=Count("pk"))
                .filter(running__gte=settings.HOST_CONCURRENCY)
                .values("snapshot__host")
            )
            busy |= models.Q(snapshot__host__in=full)
        return busy

    @staticmethod
    def _on_probation(now, running: models.QuerySet) -> models.QuerySet:
        """The hosts on probation (core/models/hosts.py) with a result ``running`` while a
        result of another host waits (``waiting_elsewhere``), as names. A host with no row yet
        counts as on probation: its first result's admission makes one, and only a result that
        started without it (a test's) has none. Correlated with the few running results only,
        so that the claim computes it once, not for each candidate."""
        unproven = running.exclude(snapshot__host__in=Host.objects.proven().values("name"))
        elsewhere = ArchiveResult.objects.waiting_elsewhere(now).exclude(
            snapshot__host=OuterRef("snapshot__host")
        )
        return unproven.filter(Exists(elsewhere)).values("snapshot__host")

    def waiting_elsewhere(self, now) -> ArchiveResultQuerySet:
        """Results that wait to start at ``now`` and could: runnable (no hold on them, no step
        they wait for unfinished), queued or in backoff and due, asking their host for pages
        (not ``reads_saved``), of a host neither paused nor busy (``_busy_hosts``). What a host
        on probation leaves its second place to (core/models/hosts.py); the caller leaves out
        that host's own. A crawl's own host limit or delay is not looked at: such a result only
        keeps a host on probation at one result a little longer (until its first success)."""
        held = self._paused_hosts(now) | self._busy_hosts(now, ArchiveResult.objects.running(now))
        return (
            self.runnable()
            .filter(status__in=[ResultStatus.QUEUED, ResultStatus.BACKOFF], retry_at__lte=now)
            .exclude(extractor__in=READS_SAVED)
            .exclude(held)
            .order_by()
        )

    def claim_order(self) -> ArchiveResultQuerySet:
        """Results whose worker died first (still started, lease run out: recovering one takes
        an instant, and it must not wait behind the whole queue), then DESIGN.md §3's order."""
        worker_died_first = Case(When(status=ResultStatus.STARTED, then=Value(0)), default=Value(1))
        return self.order_by(worker_died_first, "-priority", "retry_at", "pk")

    def final(self) -> ArchiveResultQuerySet:
        return self.filter(status__in=ResultStatus.final())


class ArchiveResult(ConcurrentTransitionMixin, WorkItem):
    """One extractor run on one snapshot: what ran, with which version, and what it produced.

    ``queued → started → succeeded | failed | skipped``; a temporary error goes
    ``started → backoff → started`` until ``max_attempts``, then ``failed``. When another
    result of the snapshot could not reach the page, one not started yet shares that failed
    attempt: ``queued | backoff → backoff`` (``defer``), or ``→ failed`` (``give_up``).
    """

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="results")
    extractor = models.CharField(max_length=32, db_index=True)
    behaviour = models.CharField(
        max_length=16,
        choices=StepBehaviour.choices,
        default=StepBehaviour.NONBLOCKING,
        help_text="Its step's behaviour in the crawl's profile (crawls/profiles.py).",
    )
    depends_on = models.CharField(
        max_length=512,
        blank=True,
        help_text="Extractors that must be final first, stored as ',dom,wget,' ('' for none).",
    )
    status = FSMField(
        default=ResultStatus.QUEUED, choices=ResultStatus.choices, protected=True, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    cmd = models.JSONField(default=list, blank=True, help_text="The command line that ran.")
    cmd_version = models.CharField(max_length=128, blank=True, help_text="Binary's version.")
    exit_code = models.IntegerField(null=True, blank=True)
    output = models.CharField(
        max_length=1024,
        blank=True,
        help_text="Main output: a path in the snapshot folder, or a value.",
    )
    output_files = models.JSONField(
        default=list, blank=True, help_text="Files written, relative to the snapshot folder."
    )
    output_size = models.BigIntegerField(default=0, help_text="Bytes written.")
    error = models.TextField(blank=True, help_text="Why it failed or backed off; for skipped, why.")
    refused = models.JSONField(
        default=list,
        blank=True,
        help_text="What the address policy refused in the last run: 'target: reason' strings.",
    )
    missing = models.JSONField(
        default=list,
        blank=True,
        help_text="Files the last run's capture lacks (a page requisite that never arrived): "
        '{"url", "reason"} objects. What the address policy refused is in refused instead.',
    )
    history = models.JSONField(
        default=list,
        blank=True,
        help_text="Earlier runs' records, oldest first; a re-archive moves the current one here.",
    )

    objects = ArchiveResultQuerySet.as_manager()

    # Not a field: True on the instance its claim started (core/services/results.py,
    # result_admit), whose tick runs that attempt; a result found started otherwise was left by
    # a worker that died, and is recovered.
    started_by_claim = False

    class Meta:
        ordering = ["snapshot", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["snapshot", "extractor"], name="unique_result_per_extractor"
            )
        ]

    def __str__(self) -> str:
        return f"{self.extractor} of {self.snapshot.url}"

    @classmethod
    def for_step(cls, snapshot: Snapshot, step) -> ArchiveResult:
        """A new queued result (unsaved) running ``step`` (a crawls.profiles.PlannedStep).

        One that waits for other steps (``depends_on``, created with it and not final yet) is
        due at its next poll, not now: the end of what it waits for makes it due at once
        (``announce``), and until then no claim has to look at it. The poll is the safety net.
        """
        now = timezone.now()
        return cls(
            snapshot=snapshot,
            extractor=step.extractor,
            behaviour=step.behaviour,
            depends_on=f",{','.join(step.depends_on)}," if step.depends_on else "",
            priority=snapshot.priority,
            retry_at=next_poll(now) if step.depends_on else now,
        )

    def announce(self) -> None:
        """A result's end makes due the results that wait for it (``depends_on``), in the
        transaction that saves it, and wakes the idle actors once it commits: its snapshot is
        woken by the last of its results (core/services/results.py), and waking the
        orchestrator for every result would cost more than it gives."""
        if self.retry_at is not None:
            super().announce()
        elif self.unblocks_others():
            _waiting_for(self.snapshot_id, f",{self.extractor},", next_poll()).wake()

    def unblocks_others(self) -> bool:
        """True when a result of the same snapshot waits for this one and only for its next
        poll: not one under lease (a reader its actor claimed with this one, which runs it
        next), nor one running (a re-run's reader, which another actor would then recover as
        if its worker had died). The readers an actor claims with wget make this false, and
        their wake-up costs a prepared read, no update."""
        waiting = f",{self.extractor},"
        return WAITING_FOR_ONE.exists(self.snapshot_id, waiting, next_poll())

    @property
    def waits_for(self) -> list[str]:
        """The extractors this result waits for (``depends_on`` as a list)."""
        return [name for name in self.depends_on.split(",") if name]

    @property
    def was_stopped(self) -> bool:
        """True when a blocking step's failure stopped this result before it ran."""
        return self.status == ResultStatus.SKIPPED and self.error.startswith(STOPPED_PREFIX)

    # --- transitions ----------------------------------------------------------------------------

    @transition(
        field=status,
        source=[ResultStatus.QUEUED, ResultStatus.BACKOFF],
        target=ResultStatus.STARTED,
    )
    def start(self) -> None:
        """Begin one attempt (counted now, so a worker that dies mid-run still uses it up)."""
        self.attempts += 1
        self.start_ts = timezone.now()
        self.end_ts = None

    @transition(field=status, source=ResultStatus.STARTED, target=ResultStatus.SUCCEEDED)
    def succeed(self, *, output, files: list[str], size: int) -> None:
        """Record a successful run (``output`` is an ExtractorOutput)."""
        self._record_run(output)
        self.output = output.output
        self.output_files = files
        self.output_size = size
        self.error = ""
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(
        field=status,
        source=[ResultStatus.QUEUED, ResultStatus.STARTED],
        target=ResultStatus.SKIPPED,
    )
    def skip(self, *, reason: str, output=None) -> None:
        """The extractor does not apply (binary missing, not HTML, disabled...): final."""
        if output is not None:
            self._record_run(output)
        self.error = reason
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(
        field=status,
        source=[ResultStatus.QUEUED, ResultStatus.BACKOFF],
        target=ResultStatus.SKIPPED,
    )
    def stop(self, *, blocking: str, error: str) -> None:
        """The blocking step ``blocking`` (an extractor name) failed with ``error``: this one
        will not run. Final; ``retry`` of the snapshot runs it again."""
        self.error = f"{STOPPED_PREFIX}blocking step {blocking} failed: {error}"[:2000]
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=ResultStatus.STARTED, target=ResultStatus.BACKOFF)
    def back_off(self, *, error: str, delay: float, output=None) -> None:
        """A temporary error: try again after ``delay`` seconds."""
        if output is not None:
            self._record_run(output)
        self.error = error
        self.retry_at = timezone.now() + timezone.timedelta(seconds=delay)

    @transition(
        field=status,
        source=[ResultStatus.QUEUED, ResultStatus.BACKOFF],
        target=ResultStatus.BACKOFF,
    )
    def defer(self, *, error: str, delay: float) -> None:
        """Another result of the snapshot could not reach the page (``error``): this one
        would meet the same, so it shares that attempt (counted here) and tries again after
        ``delay`` seconds, without running now."""
        self.attempts += 1
        self.error = error
        self.retry_at = timezone.now() + timezone.timedelta(seconds=delay)

    @transition(
        field=status,
        source=[ResultStatus.QUEUED, ResultStatus.BACKOFF],
        target=ResultStatus.FAILED,
    )
    def give_up(self, *, error: str) -> None:
        """As ``defer``, but the shared attempt was this one's last: final, with ``error``."""
        self.attempts += 1
        self.error = error
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(
        field=status,
        source=[ResultStatus.STARTED, ResultStatus.BACKOFF],
        target=ResultStatus.FAILED,
    )
    def fail(self, *, error: str, output=None) -> None:
        """A fatal error, or attempts exhausted: final, with its reason."""
        if output is not None:
            self._record_run(output)
        self.error = error
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=ResultStatus.SUCCEEDED, target=ResultStatus.BACKOFF)
    def reject(self, *, error: str, delay: float) -> None:
        """Its output failed the integrity check (and was removed): run it again after
        ``delay`` seconds, as after a temporary error."""
        self._forget_output()
        self.error = error
        self.retry_at = timezone.now() + timezone.timedelta(seconds=delay)

    @transition(field=status, source=ResultStatus.SUCCEEDED, target=ResultStatus.FAILED)
    def reject_finally(self, *, error: str) -> None:
        """Its output failed the integrity check and its attempts are used up: final."""
        self._forget_output()
        self.error = error
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(
        field=status,
        source=[ResultStatus.FAILED, ResultStatus.SKIPPED],
        target=ResultStatus.QUEUED,
    )
    def retry(self) -> None:
        """Try a final result again with a fresh attempt count (explicit request only)."""
        self._queue_again()

    @transition(field=status, source=ResultStatus.final(), target=ResultStatus.QUEUED)
    def rearchive(self, *, moved_to: str) -> None:
        """Start a new run (explicit re-archive): keep this run's record in ``history``.

        ``moved_to`` is the folder, relative to the snapshot folder, that now holds this run's
        output files (``history/<run>/``); the recorded file paths point there.
        """
        self.history = [*self.history, self._run_record(moved_to)]
        self._queue_again()
        self.cmd, self.cmd_version, self.exit_code = [], "", None
        self.output, self.output_files, self.output_size = "", [], 0
        self.start_ts = self.end_ts = None

    def _forget_output(self) -> None:
        self.output, self.output_files, self.output_size = "", [], 0

    def _queue_again(self) -> None:
        self.attempts = 0
        self.error = ""
        self.retry_at = timezone.now()

    def _run_record(self, moved_to: str) -> dict:
        """This run as one ``history`` entry (JSON): its files now lie under ``moved_to``."""
        return {
            "output_dir": f"{moved_to}/{self.extractor}",
            "status": self.status,
            "attempts": self.attempts,
            "cmd": self.cmd,
            "cmd_version": self.cmd_version,
            "exit_code": self.exit_code,
            "output": self.output,
            "output_files": [f"{moved_to}/{path}" for path in self.output_files],
            "output_size": self.output_size,
            "error": self.error,
            "start_ts": self.start_ts.isoformat() if self.start_ts else None,
            "end_ts": self.end_ts.isoformat() if self.end_ts else None,
        }

    def _record_run(self, output) -> None:
        self.cmd = output.cmd  # ExtractorOutput holds it redacted (core/extractors/base.py)
        self.cmd_version = output.cmd_version
        self.exit_code = output.exit_code
        self.refused = [str(refusal) for refusal in output.refusals]
        self.missing = list(output.missing)


def _waiting_for(snapshot_id: uuid.UUID, pattern: str, not_leased: datetime) -> models.QuerySet:
    """The results of snapshot ``snapshot_id`` that wait to run (queued or backed off) and
    for ``pattern`` (``,<extractor>,`` in their ``depends_on``), under no lease: ``retry_at``
    no later than ``not_leased``, their next poll (a lease lies further ahead)."""
    return ArchiveResult.objects.filter(
        snapshot_id=snapshot_id,
        status__in=[ResultStatus.QUEUED, ResultStatus.BACKOFF],
        depends_on__contains=pattern,
        retry_at__lte=not_leased,
    )


# Run by the result actors as each result ends (``unblocks_others``).
WAITING_FOR_ONE = Statement(
    "results waiting for one", _waiting_for, (uuid.UUID, str, datetime), actors=("archiveresult",)
)
