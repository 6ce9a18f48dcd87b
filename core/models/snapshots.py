"""Snapshots (one URL in one crawl) and the tags people give them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Exists, Func, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Concat, StrIndex, Substr
from django.db.models.lookups import GreaterThanOrEqual
from django.utils import timezone
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.behaviours import BehaviourOptions
from core.models.hosts import Host
from core.models.preservation import LOCAL, FixityCheck
from crawls.choices import CrawlStatus, StepBehaviour
from crawls.models import visible_filter
from orchestrator.diskguard import disk_held
from orchestrator.models import WorkItem, WorkQuerySet
from orchestrator.prepared import Statement

if TYPE_CHECKING:
    from core.models.results import ArchiveResult

# The variant of the snapshot claim while the disk guard holds (SnapshotQuerySet.claimable).
DISK_HELD = "disk held"


def url_host(field: str) -> Substr:
    """The ``host[:port]`` of the URL in ``field``, as a database expression: what lies between
    ``://`` and the next ``/`` (a normalized URL has no credentials and a path, crawls/seeds.py).
    Immutable, so that it can define a stored generated column."""
    after_scheme = Substr(field, StrIndex(field, Value("://")) + 3)
    end = StrIndex(Concat(after_scheme, Value("/")), Value("/"))
    return Substr(after_scheme, 1, end - 1)


class Tag(models.Model):
    """A label a person gives to crawls and their snapshots (``add --tag``)."""

    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SnapshotQuerySet(WorkQuerySet):
    ACTIVE_STATES = SnapshotStatus.active()

    def runnable(self) -> SnapshotQuerySet:
        """Active snapshots of crawls that are not held."""
        return super().runnable().exclude(crawl__status=CrawlStatus.HELD)

    def claimable(self, now=None, *, variant: str | None = None) -> SnapshotQuerySet:
        """Due snapshots, but queued ones only while fewer than MAX_STARTED_SNAPSHOTS are started
        and the disk guard is open (orchestrator/diskguard.py), and none of a paused host
        (core/models/hosts.py).

        The window keeps a crawl's frontier small: result actors always have work, started
        snapshots finish in order, and few of them poll for their results at a time. It is a
        soft limit (two actors may both start one at the edge). Snapshots of a paused host
        neither start nor count: their results wait, and must not keep other hosts' snapshots
        out of the window.

        The window is counted in the statement itself, so that a statement compiled once
        (orchestrator/prepared.py) counts it afresh each time it runs. The disk guard is no
        database state: ``variant`` (``claimable_variant()``, worked out here when not given)
        says whether it holds, and a statement compiled once is compiled for each.
        """
        now = now or timezone.now()
        due = self.due(now)
        if (self.claimable_variant() if variant is None else variant) == DISK_HELD:
            return due.exclude(status=SnapshotStatus.QUEUED)
        paused = Host.objects.paused(now).values("name")
        due = due.exclude(status=SnapshotStatus.QUEUED, host__in=paused)
        # Started snapshots of held crawls do not count: they would block every other crawl.
        started = Snapshot.objects.runnable().filter(status=SnapshotStatus.STARTED)
        counted = started.exclude(host__in=paused).order_by()
        count = Func("pk", function="COUNT", output_field=models.IntegerField())
        started_count = Subquery(counted.annotate(n=count).values("n"))
        window_full = GreaterThanOrEqual(started_count, settings.MAX_STARTED_SNAPSHOTS)
        return due.exclude(Q(status=SnapshotStatus.QUEUED) & Q(window_full))

    def claimable_variant(self) -> str:
        """DISK_HELD while the disk guard holds new snapshots back, else "" (``claimable``)."""
        return DISK_HELD if disk_held() else ""

    def final(self) -> SnapshotQuerySet:
        return self.filter(status__in=SnapshotStatus.final())

    def for_crawl(self, crawl) -> SnapshotQuerySet:
        return self.filter(crawl=crawl)

    def visible_to(self, user, *, with_public: bool = False) -> SnapshotQuerySet:
        """The snapshots ``user`` may read (crawls.models.visible_filter): all for staff holding
        ``core.view_snapshot``, else those of the crawls the user added, and with
        ``with_public`` those of public crawls. A snapshot was added by whoever added its
        crawl."""
        allowed = visible_filter(
            user,
            read_perm="core.view_snapshot",
            owner="crawl__created_by",
            public="crawl__public",
            with_public=with_public,
        )
        return self if allowed is None else self.filter(allowed)

    def with_captured_at(self) -> SnapshotQuerySet:
        """Annotate ``captured_at``: when the snapshot's capture started (``start_ts``), or
        when it was queued (``created_at``) if it has not started."""
        return self.annotate(captured_at=Coalesce("start_ts", "created_at"))

    def captures_of(self, url: str) -> SnapshotQuerySet:
        """Every snapshot of the normalized ``url`` (crawls/seeds.py), in any crawl and state,
        with ``captured_at``."""
        return self.filter(url=url).with_captured_at()

    def flagged(self) -> SnapshotQuerySet:
        """Snapshots whose latest conclusive fixity check of some copy found it damaged."""
        damaged = FixityCheck.objects.flagged().filter(snapshot=OuterRef("pk"))
        return self.filter(Exists(damaged))

    def unchecked(self) -> SnapshotQuerySet:
        """Sealed snapshots that no fixity check has read conclusively since they were sealed,
        at any location."""
        conclusive = FixityCheck.objects.conclusive().since_seal().filter(snapshot=OuterRef("pk"))
        return self.filter(status=SnapshotStatus.SEALED).exclude(Exists(conclusive))

    def audit_due(self, checked_before) -> SnapshotQuerySet:
        """Sealed snapshots with no conclusive check of their local copy since ``checked_before``
        (a datetime) and their seal, the earliest sealed first."""
        recent = (
            FixityCheck.objects.conclusive()
            .since_seal()
            .filter(snapshot=OuterRef("pk"), location=LOCAL, checked_at__gte=checked_before)
        )
        return (
            self.filter(status=SnapshotStatus.SEALED)
            .exclude(Exists(recent))
            .order_by("end_ts", "pk")
        )

    def with_failures(self) -> SnapshotQuerySet:
        """Final snapshots that failed, or that have a failed result (what ``retry`` retries)."""
        failed = models.Q(status=SnapshotStatus.FAILED) | models.Q(
            status=SnapshotStatus.SEALED, results__status=ResultStatus.FAILED
        )
        return self.filter(failed).distinct()


class Snapshot(ConcurrentTransitionMixin, WorkItem):
    """One URL archived within one crawl, with its folder ``DATA_DIR/archive/<id>/``.

    ``queued → started`` creates one ArchiveResult per extractor; ``started → finalizing`` when all
    of them are final; finalizing checks their outputs (``finalizing → started`` again when some
    were corrupt), packages the WARCs as WACZ, writes ``index.json``, the manifest and its
    signature, and seals it (core/services/finalizing.py).
    """

    # Its end frees a place in the window of started snapshots (``claimable``): the idle
    # snapshot actors hear of it, as of due work (WorkItem.announce).
    END_MAY_RELEASE_ANOTHER = True

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    crawl = models.ForeignKey("crawls.Crawl", on_delete=models.CASCADE, related_name="snapshots")
    url = models.URLField(max_length=2048, help_text="Normalized URL (see crawls/seeds.py).")
    host = models.GeneratedField(
        expression=url_host("url"),
        output_field=models.CharField(max_length=2048),
        db_persist=True,
        db_index=True,
        help_text="The URL's host[:port] (core/models/hosts.py), kept by the database.",
    )
    depth = models.PositiveSmallIntegerField(default=0, help_text="Links followed from a seed.")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    title = models.CharField(max_length=512, blank=True)
    tags = models.ManyToManyField(Tag, blank=True, related_name="snapshots")
    status = FSMField(
        default=SnapshotStatus.QUEUED, choices=SnapshotStatus.choices, protected=True, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Finalizing attempts.")
    error = models.TextField(blank=True, help_text="Why finalizing failed or is being retried.")
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    signed_by = models.CharField(
        max_length=71, blank=True, help_text="Fingerprint of the key that signed the manifest."
    )
    content_digest = models.CharField(
        max_length=71,
        blank=True,
        help_text="'sha256:<hex>' of the page's readable text, whitespace-normalized, set when "
        "sealed ('' without text): equal digests, unchanged page (core/services/captures.py).",
    )
    unchanged_since = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="unchanged_captures",
        help_text="The capture whose page bytes this one found again (its crawl kept only "
        "changes: core/services/unchanged.py): this one holds a revisit of it, not a copy.",
    )

    objects = SnapshotQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["crawl", "url"], name="unique_snapshot_url_per_crawl")
        ]
        # A URL's captures across crawls (its timeline, Memento lookups).
        indexes = [models.Index(fields=["url"], name="snapshot_url")]

    def __str__(self) -> str:
        return self.url

    @property
    def output_dir(self) -> Path:
        """The snapshot's folder: ``DATA_DIR/archive/<id>/``."""
        return settings.ARCHIVE_DIR / str(self.pk)

    @property
    def behaviour_options(self) -> BehaviourOptions:
        """What the rendering extractors do to this snapshot's page before capturing it: its
        crawl's ``behaviour_seconds`` and ``scroll_page_limit`` (None: the settings). Reads
        ``crawl``, which the result actor's claim joins (orchestrator/work.py)."""
        return BehaviourOptions(
            seconds=self.crawl.behaviour_seconds, page_limit=self.crawl.scroll_page_limit
        )

    # --- guards (pure) ------------------------------------------------------------------------

    def all_results_final(self) -> bool:
        """True when every ArchiveResult of this snapshot is succeeded, failed or skipped."""
        return not ACTIVE_RESULTS.exists(self.pk)

    def failed_blocking_result(self) -> ArchiveResult | None:
        """The first failed result of a blocking step of this snapshot, or None."""
        found = self._with_snapshot(FAILED_BLOCKING.records(self.pk))
        return found[0] if found else None

    def results_in_order(self) -> list[ArchiveResult]:
        """This snapshot's results, first created first (``results.order_by("pk")``)."""
        return self._with_snapshot(RESULTS_IN_ORDER.records(self.pk))

    def tag_names(self) -> list[str]:
        """The names of this snapshot's tags, in Tag's order (by name)."""
        return [tag.name for tag in SNAPSHOT_TAGS.records(self.pk)]

    def _with_snapshot(self, results: list[ArchiveResult]) -> list[ArchiveResult]:
        """``results`` of this snapshot, each knowing it, as ``self.results`` gives them."""
        for result in results:
            result.snapshot = self
        return results

    # --- transitions ----------------------------------------------------------------------------

    @transition(field=status, source=SnapshotStatus.QUEUED, target=SnapshotStatus.STARTED)
    def start(self) -> None:
        """Begin archiving; the caller creates the results in the same transaction."""
        self.start_ts = timezone.now()
        self.end_ts = None

    @transition(field=status, source=SnapshotStatus.QUEUED, target=SnapshotStatus.STARTED)
    def start_unchanged(self, *, since: Snapshot) -> None:
        """Begin a capture of a page that serves the bytes of capture ``since`` again (its crawl
        keeps only changes): it runs no extractor, and is sealed as a small capture that points
        at ``since`` (core/services/unchanged.py)."""
        self.start_ts = timezone.now()
        self.end_ts = None
        self.unchanged_since = since

    @transition(
        field=status,
        source=SnapshotStatus.STARTED,
        target=SnapshotStatus.FINALIZING,
        conditions=[all_results_final],
    )
    def finish(self) -> None:
        """Every extractor is done: move on to the post-processing steps."""
        self.attempts = 0

    @transition(
        field=status,
        source=SnapshotStatus.STARTED,
        target=SnapshotStatus.FAILED,
        conditions=[all_results_final],
    )
    def abandon(self, *, error: str) -> None:
        """A blocking step failed and every result is final: the snapshot fails without
        finalizing, its outputs left in place for ``retry`` (crawls/profiles.py)."""
        self.error = error
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=SnapshotStatus.QUEUED, target=SnapshotStatus.FAILED)
    def leave_out(self, *, reason: str) -> None:
        """Its crawl stopped growing (a limit was reached) before it started: it is final,
        never archived, with ``reason``."""
        self.error = f"left out: {reason}"
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=SnapshotStatus.FINALIZING, target=SnapshotStatus.FINALIZING)
    def begin_finalizing(self) -> None:
        """Count one finalizing attempt before it runs, so a worker that dies mid-way uses it up."""
        self.attempts += 1

    @transition(field=status, source=SnapshotStatus.FINALIZING, target=SnapshotStatus.FINALIZING)
    def retry_finalizing(self, *, error: str, delay: float) -> None:
        """Record a recoverable finalizing error and try again after ``delay`` seconds."""
        self.error = error
        self.retry_at = timezone.now() + timezone.timedelta(seconds=delay)

    @transition(field=status, source=SnapshotStatus.FINALIZING, target=SnapshotStatus.STARTED)
    def reopen(self, *, error: str, delay: float) -> None:
        """Some outputs failed the integrity check and their results went back to backoff: wait
        for them again (``delay`` seconds before the next look)."""
        self.error = error
        self.retry_at = timezone.now() + timezone.timedelta(seconds=delay)

    @transition(field=status, source=SnapshotStatus.FINALIZING, target=SnapshotStatus.SEALED)
    def seal(self, *, manifest_sha256: str, signed_by: str, content_digest: str = "") -> None:
        """The folder is complete, its manifest written and signed: the snapshot is final.
        ``content_digest``: of its readable text (core.services.captures.page_text_digest)."""
        self.manifest_sha256 = manifest_sha256
        self.signed_by = signed_by
        self.content_digest = content_digest
        self.error = ""
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=SnapshotStatus.SEALED, target=SnapshotStatus.SEALED)
    def reseal(self, *, manifest_sha256: str, signed_by: str) -> None:
        """The sealed folder was rewritten without changing what it holds (its revisit records
        made whole again when the snapshot they referred to was removed: core/services/
        removal.py), and its new manifest signed. ``end_ts`` stays the capture's seal: what
        fixity checks found before still counts (FixityCheckQuerySet.since_seal), as the same
        bytes are signed again, a damaged file included."""
        self.manifest_sha256 = manifest_sha256
        self.signed_by = signed_by

    @transition(field=status, source=SnapshotStatus.FINALIZING, target=SnapshotStatus.FAILED)
    def fail(self, *, error: str) -> None:
        """Finalizing failed past the attempt limit: the snapshot is final, with its reason."""
        self.error = error
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(
        field=status,
        source=[SnapshotStatus.SEALED, SnapshotStatus.FAILED],
        target=SnapshotStatus.STARTED,
    )
    def retry_failed(self) -> None:
        """Run what failed again (explicit request only): the caller re-queues the failed
        results in the same transaction; finalizing follows once they are final."""
        self._run_again()

    @transition(
        field=status,
        source=[SnapshotStatus.SEALED, SnapshotStatus.FAILED],
        target=SnapshotStatus.QUEUED,
    )
    def rearchive(self) -> None:
        """Archive the URL again (explicit request only); it is due at once.

        The caller moves the earlier outputs aside and re-queues the results in the same
        transaction (core.services.rearchive.snapshot_rearchive). The earlier run's text moves
        aside with its outputs, so its content digest goes too.
        """
        self._run_again()
        self.content_digest = ""

    def _run_again(self) -> None:
        self.attempts = 0
        self.error = ""
        self.retry_at = timezone.now()
        self.end_ts = None


def _active_results(snapshot_id: uuid.UUID) -> models.QuerySet:
    """The results of snapshot ``snapshot_id`` that are not final."""
    results = Snapshot.results.rel.related_model  # ArchiveResult, whose module imports this one
    return results.objects.active().filter(snapshot_id=snapshot_id)


# Run by the snapshot actors, and by the result actors as each result ends.
ACTIVE_RESULTS = Statement(
    "active results of a snapshot",
    _active_results,
    (uuid.UUID,),
    actors=("snapshot", "archiveresult"),
)


def _results_in_order(snapshot_id: uuid.UUID) -> models.QuerySet:
    """The results of snapshot ``snapshot_id``, first created first."""
    results = Snapshot.results.rel.related_model  # ArchiveResult, whose module imports this one
    return results.objects.filter(snapshot_id=snapshot_id).order_by("pk")


def _failed_blocking(snapshot_id: uuid.UUID) -> models.QuerySet:
    """The first failed result of a blocking step of snapshot ``snapshot_id``."""
    blocking = Q(status=ResultStatus.FAILED, behaviour=StepBehaviour.BLOCKING)
    return _results_in_order(snapshot_id).filter(blocking)[:1]


def _snapshot_tags(snapshot_id: uuid.UUID) -> models.QuerySet:
    """The tags of snapshot ``snapshot_id``."""
    return Tag.objects.filter(snapshots=snapshot_id)


# What finalizing reads of every snapshot (core/services/finalizing.py), compiled once.
RESULTS_IN_ORDER = Statement(
    "results of a snapshot by pk", _results_in_order, (uuid.UUID,), actors=("snapshot",)
)
SNAPSHOT_TAGS = Statement("tags of a snapshot", _snapshot_tags, (uuid.UUID,), actors=("snapshot",))
FAILED_BLOCKING = Statement(
    "first failed blocking result", _failed_blocking, (uuid.UUID,), actors=("snapshot",)
)
