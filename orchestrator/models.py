"""The abstract work item that crawls, snapshots and archive results share, and the state of the
whole queue (a global hold).

A work item is due when it is in an active state and its ``retry_at`` has passed. Claiming it
moves ``retry_at`` forward by a lease (orchestrator/claims.py): a future ``retry_at`` on an active
record means an actor owns it, or that it waits for a retry; ``NULL`` means final.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from django.db import models
from django.db.models import Exists
from django.utils import timezone
from django_fsm import FSMField, transition

from orchestrator.prepared import UpdateStatement
from orchestrator.retries import next_poll
from orchestrator.saving import save_row
from orchestrator.wakeups import notify_due, notify_final


class WorkQuerySet(models.QuerySet):
    """Named filters every work item shares; each model says which states are active."""

    ACTIVE_STATES: tuple[str, ...] = ()

    def active(self) -> WorkQuerySet:
        """Records not yet in a final state."""
        return self.filter(status__in=self.ACTIVE_STATES)

    def only(self, *fields: str) -> WorkQuerySet:
        """As Django's ``only()``, with the state always loaded: django-fsm reads it as it makes
        each record (ConcurrentTransitionMixin), and a deferred state would be loaded by a query
        of its own, one per record."""
        return super().only(*fields, *({"status"} - set(fields)))

    def runnable(self) -> WorkQuerySet:
        """Active records that no hold pauses: the work still to do (none while the whole queue
        is held). Models narrow this further, starting from it.

        The queue's hold is a subquery of the same statement, not a read of its own: no extra
        round trip per claim, and no moment between reading the hold and reading the records.
        """
        return self.active().exclude(Exists(QueueState.objects.held()))

    def due(self, now=None) -> WorkQuerySet:
        """Runnable records whose ``retry_at`` has passed (claimable now)."""
        return self.runnable().filter(retry_at__lte=now or timezone.now())

    def claimable(self, now=None, *, variant: str | None = None) -> WorkQuerySet:
        """Due records an actor may take now (a model may hold some back, see Snapshot).
        ``variant``: the form of the statement that applies (``claimable_variant``)."""
        return self.due(now)

    def claimable_variant(self) -> str:
        """Which form ``claimable``'s statement takes now, by state the database does not hold
        (Snapshot's: the disk guard); "" for a model whose statement has one form. A statement
        compiled once (orchestrator/prepared.py) is compiled, and keyed, by it."""
        return ""

    def wake(self) -> int:
        """Make these records due now where they only wait for their next poll; return how many.

        Polling every POLL_INTERVAL is only the safety net. A record under lease is never
        touched: its ``retry_at`` lies LEASE_SECONDS ahead, far past the next poll of a waiting
        one (settings make sure the lease is the longer), so no two actors ever hold it.
        """
        now = timezone.now()
        rows, values = self.waking(next_poll(now), now)
        return rows.update(**values)

    def waking(self, poll: datetime, now: datetime) -> tuple[WorkQuerySet, dict[str, datetime]]:
        """What ``wake()`` at ``now`` changes, whose next poll is ``poll``: the rows due by
        then, and ``retry_at`` now (WakeStatement compiles it with both as arguments)."""
        return self.filter(retry_at__lte=poll), {"retry_at": now}

    def update(self, **kwargs) -> int:
        """Update as Django does; when it makes records due now (``retry_at`` now or past) or
        final (``retry_at`` NULL), wake the orchestrator and idle actors once it commits
        (orchestrator/wakeups.py). A lease (``retry_at`` ahead) wakes nobody."""
        rows = super().update(**kwargs)
        self.model.announce_update(rows, kwargs)
        return rows

    def update_quietly(self, **kwargs) -> int:
        """Update as Django does and wake nobody: for a record made due that no idle actor could
        take now either (see claims.hand_back)."""
        return super().update(**kwargs)

    def bulk_create(self, objs, *args, **kwargs) -> list:
        """Create as Django does; when a record created is due now, wake the orchestrator and
        idle actors once it commits."""
        created = super().bulk_create(objs, *args, **kwargs)
        now = timezone.now()
        if any(obj.retry_at is not None and obj.retry_at <= now for obj in created):
            notify_due(self.model._meta.model_name)
        return created

    def count_by_status(self) -> dict[str, int]:
        """Return ``{state: count}`` for the states that occur (one grouped query)."""
        grouped = self.order_by().values_list("status").annotate(n=models.Count("pk"))
        return dict(grouped.values_list("status", "n"))

    def claim_order(self) -> WorkQuerySet:
        """Highest priority first, then the record that has waited longest (DESIGN.md §3)."""
        return self.order_by("-priority", "retry_at", "pk")


class WorkItem(models.Model):
    """Fields of a record that actors claim and tick: lease, priority and timestamps."""

    retry_at = models.DateTimeField(
        null=True,
        blank=True,
        default=timezone.now,
        db_index=True,
        help_text="When this record next needs attention (future while leased); empty when final.",
    )
    priority = models.SmallIntegerField(default=0, help_text="Higher is claimed first.")
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)
    modified_at = models.DateTimeField(auto_now=True)
    start_ts = models.DateTimeField(null=True, blank=True, help_text="When work on it started.")
    end_ts = models.DateTimeField(null=True, blank=True, help_text="When it reached a final state.")

    # Whether a record's end may make another of its kind claimable (a snapshot held back by
    # the window of started ones, SnapshotQuerySet.claimable): its end then pings that kind's
    # idle actors as due work does, not only the orchestrator.
    END_MAY_RELEASE_ANOTHER: ClassVar[bool] = False

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        """Save, then ``announce()`` the record's new ``retry_at``. A record read from the
        database is saved by one UPDATE written once per process (orchestrator/saving.py)."""
        if args or kwargs or not save_row(self):
            super().save(*args, **kwargs)
        self.announce()

    @classmethod
    def announce_update(cls, rows: int, values: dict) -> None:
        """After ``rows`` records were updated to ``values``: when that made them due now
        (``retry_at`` now or past) or final (``retry_at`` NULL), wake the orchestrator and idle
        actors once it commits (orchestrator/wakeups.py). A lease (``retry_at`` ahead) wakes
        nobody. Every update of work items tells of itself so, compiled (prepared_update) or
        not (``WorkQuerySet.update``)."""
        if rows and "retry_at" in values:
            _announce(cls, values["retry_at"])

    def announce(self) -> None:
        """Once the transaction commits, wake the orchestrator and idle actors of this kind if
        the record is due now, and the orchestrator if it is final (a crawl ``add --wait``
        waits for), with the idle actors too when its end may release another
        (``END_MAY_RELEASE_ANOTHER``: a snapshot whose end lets a held-back one start); nothing
        while ``retry_at`` lies ahead (a lease, a backoff). See orchestrator/wakeups.py."""
        _announce(type(self), self.retry_at)


class WakeStatement(UpdateStatement):
    """``rows(*args).wake()`` (``WorkQuerySet.wake``) as one UPDATE compiled once per process
    (orchestrator/prepared.py): for the wake-ups of every page, a snapshot whose results have
    ended, a crawl whose last snapshot is final. ``rows`` must select records of ``model``."""

    def __init__(
        self,
        key: str,
        model: type[WorkItem],
        rows: Callable[..., WorkQuerySet],
        arg_types: tuple[type, ...],
        *,
        actors: tuple[str, ...],
    ):
        def build(*args):
            *keys, poll, now = args
            return rows(*keys).waking(poll, now)

        super().__init__(f"wake {key}", build, (*arg_types, datetime, datetime), actors=actors)
        self.model = model

    def wake(self, *args) -> int:
        """Wake the records ``rows(*args)`` selects, as ``wake()`` does; return how many."""
        now = timezone.now()
        woken = self.run(*args, next_poll(now), now)
        self.model.announce_update(woken, {"retry_at": now})
        return woken


def _announce(model: type[WorkItem], retry_at) -> None:
    """Ping about records of ``model`` whose ``retry_at`` became ``retry_at``."""
    kind = model._meta.model_name
    if retry_at is None:
        notify_final(kind)
        if model.END_MAY_RELEASE_ANOTHER:
            notify_due(kind)
    elif isinstance(retry_at, datetime) and retry_at <= timezone.now():
        notify_due(kind)


class QueueStatus(models.TextChoices):
    """States of the whole work queue: open, or held by an operator (DESIGN.md §2, holds)."""

    OPEN = "open", "Open"
    HELD = "held", "Held"


class QueueStateQuerySet(models.QuerySet):
    def held(self) -> QueueStateQuerySet:
        """The queue's row while it is held; empty while it is open."""
        return self.filter(pk=QueueState.SINGLETON, status=QueueStatus.HELD)


class QueueState(models.Model):
    """The one row that says whether the whole queue is held: while it is, no crawl, snapshot,
    archive result or storage copy is claimed; work under way finishes. Shared by every
    machine that uses the same database, so one ``manage.py hold --queue`` pauses them all.
    """

    SINGLETON = 1

    status = FSMField(default=QueueStatus.OPEN, choices=QueueStatus.choices, protected=True)
    reason = models.CharField(max_length=200, blank=True, help_text="Why the queue is held.")
    held_since = models.DateTimeField(null=True, blank=True)

    objects = QueueStateQuerySet.as_manager()

    class Meta:
        verbose_name = "queue state"

    def __str__(self) -> str:
        if self.status == QueueStatus.OPEN:
            return "queue open"
        return f"queue held since {self.held_since:%Y-%m-%d %H:%M} UTC" + (
            f": {self.reason}" if self.reason else ""
        )

    @classmethod
    def current(cls) -> QueueState:
        """Return the queue's state (the row is created, open, on first use)."""
        state, _created = cls.objects.get_or_create(pk=cls.SINGLETON)
        return state

    @transition(field=status, source=QueueStatus.OPEN, target=QueueStatus.HELD)
    def hold(self, *, reason: str = "") -> None:
        """Pause the whole queue: nothing more is claimed until it is released."""
        self.reason = reason
        self.held_since = timezone.now()

    @transition(field=status, source=QueueStatus.HELD, target=QueueStatus.OPEN)
    def release(self) -> None:
        """Resume the queue where it stopped."""
        self.reason = ""
        self.held_since = None


def queue_held() -> bool:
    """True while the whole queue is held (one indexed read of one row)."""
    return QueueState.objects.held().exists()
