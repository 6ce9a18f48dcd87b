"""The Crawl: one batch of seeds to archive, with its depth and its place in the queue."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from crawls.choices import CrawlStatus
from orchestrator.models import WorkItem, WorkQuerySet


class CrawlQuerySet(WorkQuerySet):
    ACTIVE_STATES = CrawlStatus.active()

    def final(self) -> CrawlQuerySet:
        return self.filter(status=CrawlStatus.SEALED)


class Crawl(ConcurrentTransitionMixin, WorkItem):
    """One batch: the seed URLs a person gave at once, how deep to follow links, and its state.

    ``queued → started`` parses the seeds into root Snapshots; ``started → sealed`` once every
    Snapshot of it is final; ``held`` pauses it (nothing of a held crawl is claimed).
    """

    status = FSMField(
        default=CrawlStatus.QUEUED, choices=CrawlStatus.choices, protected=True, db_index=True
    )
    seeds = models.TextField(help_text="Normalized seed URLs, one per line.")
    depth = models.PositiveSmallIntegerField(
        default=0, help_text="How many links deep to follow from each seed (0: the seeds only)."
    )
    any_host = models.BooleanField(
        default=False, help_text="Follow links to other hosts too (default: same host only)."
    )
    tags = models.ManyToManyField("core.Tag", blank=True, related_name="crawls")
    source_file = models.CharField(
        max_length=512, blank=True, help_text="The input as received, relative to DATA_DIR."
    )
    seed_details = models.JSONField(
        default=dict,
        blank=True,
        help_text="Title and tags the input gave a seed: {url: {'title': ..., 'tags': [...]}}.",
    )
    notify_webhook = models.URLField(
        max_length=2048, blank=True, help_text="Gets the report as JSON when the crawl seals."
    )
    notify_email = models.CharField(
        max_length=512, blank=True, help_text="Addresses (comma-separated) the report is sent to."
    )
    input_report = models.JSONField(
        default=dict,
        blank=True,
        help_text="How the input was read: its format, entries accepted, and those left out.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    report = models.JSONField(
        default=dict, blank=True, help_text="Written on sealing: counts per state and failures."
    )

    objects = CrawlQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        first = self.seeds.split("\n", 1)[0]
        more = self.seed_list()[1:]
        return f"Crawl {self.pk}: {first}" + (f" (+{len(more)} more)" if more else "")

    def seed_list(self) -> list[str]:
        """Return the seed URLs in the order they were given."""
        return [line for line in self.seeds.splitlines() if line]

    # --- guards (pure) ------------------------------------------------------------------------

    def all_snapshots_final(self) -> bool:
        """True when every Snapshot of this crawl is sealed or failed."""
        return not self.snapshots.active().exists()

    # --- transitions ----------------------------------------------------------------------------

    @transition(field=status, source=CrawlStatus.QUEUED, target=CrawlStatus.STARTED)
    def start(self) -> None:
        """Begin the crawl; the caller creates its root Snapshots in the same transaction."""
        self.start_ts = self.start_ts or timezone.now()

    @transition(
        field=status,
        source=CrawlStatus.STARTED,
        target=CrawlStatus.SEALED,
        conditions=[all_snapshots_final],
    )
    def seal(self, *, report: dict) -> None:
        """Close the crawl with its report; nothing is due for it any more."""
        self.report = report
        self.end_ts = timezone.now()
        self.retry_at = None

    @transition(field=status, source=CrawlStatus.SEALED, target=CrawlStatus.STARTED)
    def reopen(self) -> None:
        """A snapshot of this sealed crawl is archived again: seal it anew once that is done."""
        self.end_ts = None
        self.retry_at = timezone.now()

    @transition(field=status, source=CrawlStatus.active(), target=CrawlStatus.HELD)
    def hold(self) -> None:
        """Pause the crawl: none of its records are claimed until it is released."""

    @transition(field=status, source=CrawlStatus.HELD, target=CrawlStatus.QUEUED)
    def release(self) -> None:
        """Resume a held crawl where it stopped (starting again is idempotent)."""
        self.retry_at = timezone.now()
