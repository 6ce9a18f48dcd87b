"""Admin for snapshots and their tags. Status is shown, never edited: it changes only through
the state machine's transitions, which the actions reach through services; the snapshot's page
shows its results, storage copies and fixity checks inline."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, Exists, OuterRef, Prefetch, Subquery, Value
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.html import format_html

from core.admin.display import (
    copies_summary,
    file_links,
    fixity_badge,
    index_image_url,
    result_badges,
    state_badge,
)
from core.admin.export import export_download
from core.admin.preservation import FixityCheckInline, StorageCopyInline
from core.admin.readonly import ReadOnlyAdminMixin
from core.admin.removal import remove_with_files
from core.admin.results import ArchiveResultInline
from core.admin.transitions import ServiceTransitionsMixin
from core.choices import CopyStatus, FixityOutcome, SnapshotStatus
from core.folder.manifest import payload_files
from core.models import (
    ArchiveResult,
    FixityCheck,
    Snapshot,
    SnapshotQuerySet,
    StorageCopy,
    Tag,
)
from core.services.fixity import RestoreError, snapshot_audit, snapshot_repair
from core.services.rearchive import snapshot_rearchive, snapshot_retry_failed
from core.services.removal import snapshot_remove
from orchestrator.prepared import with_related

# Audits and repairs re-hash every file (and every storage copy) while the request waits: past
# this many snapshots they belong to manage.py verify / restore, which no web timeout cuts short.
ADMIN_FIXITY_LIMIT = 50


def with_preservation(queryset: SnapshotQuerySet) -> SnapshotQuerySet:
    """Annotate snapshots with what the fixity and storage-copy columns show, in the same query:
    ``fixity_flagged`` (as ``Snapshot.objects.flagged()``), ``fixity_checked_at`` (the latest
    conclusive check of any copy since the seal, None when there is none) and ``copies_*``
    counts."""
    checks = FixityCheck.objects.since_seal().filter(snapshot=OuterRef("pk"))
    conclusive = checks.conclusive().order_by("-checked_at")
    return queryset.annotate(
        fixity_flagged=Exists(FixityCheck.objects.flagged().filter(snapshot=OuterRef("pk"))),
        fixity_checked_at=Subquery(conclusive.values("checked_at")[:1]),
        copies_total=_copies(),
        copies_stored=_copies(CopyStatus.STORED),
        copies_damaged=_copies(CopyStatus.DAMAGED),
        copies_failed=_copies(CopyStatus.FAILED),
    )


def _copies(status: str | None = None) -> Coalesce:
    """The number of the snapshot's storage copies (in ``status``), as a subquery."""
    copies = StorageCopy.objects.filter(snapshot=OuterRef("pk"))
    if status:
        copies = copies.filter(status=status)
    counted = copies.order_by().values("snapshot").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted), Value(0))


class FixityFilter(admin.SimpleListFilter):
    """Flagged (what ``restore --flagged`` repairs), sound, or sealed and never checked."""

    title = "fixity"
    parameter_name = "fixity"

    def lookups(self, request, model_admin):
        return [("flagged", "flagged"), ("sound", "sound"), ("unchecked", "never checked")]

    def queryset(self, request, queryset):
        # The queryset carries with_preservation()'s annotations.
        if self.value() == "flagged":
            return queryset.filter(fixity_flagged=True)
        unflagged = queryset.filter(status=SnapshotStatus.SEALED, fixity_flagged=False)
        if self.value() == "sound":
            return unflagged.filter(fixity_checked_at__isnull=False)
        if self.value() == "unchecked":
            return unflagged.filter(fixity_checked_at__isnull=True)
        return queryset


def _retry_failed(snapshot: Snapshot) -> str:
    count = snapshot_retry_failed(snapshot=snapshot)
    return f"{count} failed result(s) queued again; the snapshot is finalized again after them."


def _rearchive(snapshot: Snapshot) -> str:
    moved_to = snapshot_rearchive(snapshot=snapshot)
    return f"Queued to be archived again; the earlier run is kept in {moved_to}/."


@admin.register(Snapshot)
class SnapshotAdmin(ServiceTransitionsMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["thumbnail", "url_link", "title", "state", "results", "fixity", "copies",
                    "crawl", "depth", "created_at"]  # fmt: skip
    list_filter = ["status", FixityFilter, "crawl", "tags", "created_at", "results__extractor"]
    search_fields = ["url", "title"]
    # No date_hierarchy: its day links need DISTINCT over every snapshot's date (~0.5 s at
    # 100,000 on SQLite); the created_at filter offers today, the past 7 days and this month.
    list_select_related = ["crawl"]
    list_per_page = 50
    readonly_fields = ["id", "url_link", "title", "state", "crawl", "depth", "parent", "tags_list",
                       "attempts", "error", "created_at", "start_ts", "end_ts", "retry_at",
                       "manifest_sha256", "content_digest", "signed_by", "fixity_summary", "copies",
                       "files"]  # fmt: skip
    fields = readonly_fields
    inlines = [ArchiveResultInline, StorageCopyInline, FixityCheckInline]
    actions = ["retry_failed", "rearchive", "verify_fixity", "restore_damaged", "export_bagit",
               "export_wacz", "remove_files"]  # fmt: skip
    fsm_services = {"retry_failed": _retry_failed, "rearchive": _rearchive}
    fsm_labels = {"retry_failed": "Retry failed results", "rearchive": "Re-archive"}

    def get_queryset(self, request):
        results = Prefetch("results", queryset=ArchiveResult.objects.order_by("pk"))
        queryset = super().get_queryset(request).prefetch_related(results, "tags")
        return with_preservation(queryset)

    @admin.action(
        description="Remove selected snapshots and delete their folders", permissions=["remove"]
    )
    def remove_files(self, request, queryset):
        return remove_with_files(
            self, request, queryset, lambda pk: snapshot_remove(snapshot_id=pk, delete_files=True)
        )

    @admin.action(description="Export selected snapshots as a BagIt bag (ZIP download)")
    def export_bagit(self, request, queryset):
        return export_download(self, request, list(queryset.order_by("pk")), format="bagit")

    @admin.action(description="Export selected snapshots' WACZ files (ZIP download)")
    def export_wacz(self, request, queryset):
        return export_download(self, request, list(queryset.order_by("pk")), format="wacz")

    @admin.action(
        description="Retry failed results of selected snapshots", permissions=["transition"]
    )
    def retry_failed(self, request, queryset):
        snapshots = list(with_related(queryset.with_failures(), ("crawl",)))
        results = sum(snapshot_retry_failed(snapshot=snapshot) for snapshot in snapshots)
        if snapshots:
            self.message_user(
                request, f"{results} failed result(s) of {len(snapshots)} snapshot(s) queued again."
            )
        else:
            self.message_user(
                request, "None of the selected snapshots has failures.", level=messages.WARNING
            )

    @admin.action(
        description="Re-archive selected snapshots (earlier runs are kept)",
        permissions=["transition"],
    )
    def rearchive(self, request, queryset):
        final = list(with_related(queryset.final(), ("crawl",)))
        busy = queryset.count() - len(final)  # before: the status filter may drop re-queued ones
        for snapshot in final:
            snapshot_rearchive(snapshot=snapshot)
        if final:
            self.message_user(request, f"{len(final)} snapshot(s) queued to be archived again.")
        if busy:
            self.message_user(
                request,
                f"{busy} snapshot(s) still in progress were left alone.",
                level=messages.WARNING,
            )

    @admin.action(
        description="Verify fixity now (re-hash the folder and every storage copy)",
        permissions=["transition"],
    )
    def verify_fixity(self, request, queryset):
        """Audit each selected sealed snapshot now, in this request (core.services.fixity)."""
        if self._too_many(request, queryset, "verify --snapshot ID… (or --crawl, --all)"):
            return
        sealed = list(queryset.filter(status=SnapshotStatus.SEALED).order_by("pk"))
        # Counted first: the selection may be filtered by the fixity the audit changes.
        not_sealed = queryset.exclude(status=SnapshotStatus.SEALED).count()
        unreachable = set()
        for snapshot in sealed:
            checks = snapshot_audit(snapshot=snapshot)
            unreachable |= {c.location for c in checks if c.outcome == FixityOutcome.UNREACHABLE}
        # Counted as the Fixity column shows them: a copy flagged earlier on a target that was
        # unreachable now is still flagged.
        flagged = list(
            Snapshot.objects.flagged().filter(pk__in=[s.pk for s in sealed]).order_by("url")
        )
        if sealed:
            self.message_user(
                request,
                f"{len(sealed)} verified: {len(sealed) - len(flagged)} sound, "
                f"{len(flagged)} flagged.",
                level=messages.WARNING if flagged else messages.SUCCESS,
            )
        if flagged:
            urls = ", ".join(snapshot.url for snapshot in flagged[:10])
            more = f" and {len(flagged) - 10} more" if len(flagged) > 10 else ""
            self.message_user(
                request,
                f"Flagged: {urls}{more}. “Restore damaged copies” repairs them from a sound copy.",
                level=messages.ERROR,
            )
        if unreachable:
            self.message_user(
                request,
                f"Not reachable, so not checked: {', '.join(sorted(unreachable))}.",
                level=messages.WARNING,
            )
        self._left_alone(request, not_sealed)

    @admin.action(
        description="Restore damaged copies of selected snapshots", permissions=["transition"]
    )
    def restore_damaged(self, request, queryset):
        """Repair what audits flagged (core.services.fixity.snapshot_repair): a damaged folder
        is restored from a sound storage copy; damaged or failed storage copies are queued again."""
        if self._too_many(request, queryset, "restore --snapshot ID… (or --flagged)"):
            return
        sealed = list(queryset.filter(status=SnapshotStatus.SEALED).order_by("url"))
        not_sealed = queryset.exclude(status=SnapshotStatus.SEALED).count()
        sound = 0
        for snapshot in sealed:
            try:
                done = snapshot_repair(snapshot=snapshot)
            except RestoreError as error:
                self.message_user(
                    request, f"Cannot restore {snapshot.url}: {error}", level=messages.ERROR
                )
                continue
            if done:
                self.message_user(request, f"Repaired {snapshot.url}: {'; '.join(done)}.")
            else:
                sound += 1
        if sound:
            self.message_user(request, f"{sound} snapshot(s) sound: nothing to repair.")
        self._left_alone(request, not_sealed)

    def _too_many(self, request, queryset, command: str) -> bool:
        count = queryset.count()
        if count <= ADMIN_FIXITY_LIMIT:
            return False
        self.message_user(
            request,
            f"{count} snapshots are more than the admin checks at once ({ADMIN_FIXITY_LIMIT}): "
            f"use manage.py {command}.",
            level=messages.ERROR,
        )
        return True

    def _left_alone(self, request, count: int) -> None:
        if count:
            self.message_user(
                request,
                f"{count} snapshot(s) not sealed were left alone: only sealed snapshots are "
                "signed and copied.",
                level=messages.WARNING,
            )

    @admin.display(description="URL", ordering="url")
    def url_link(self, snapshot):
        return format_html('<a href="{}" rel="noreferrer" target="_blank">{}</a>', snapshot.url,
                           snapshot.url)  # fmt: skip

    @admin.display(description="")
    def thumbnail(self, snapshot):
        """The thumbnail (the screenshot), small, linking to the snapshot's page (from the
        prefetched results)."""
        page = reverse("core:snapshot", args=[snapshot.pk])
        image = index_image_url(snapshot, snapshot.results.all(), "thumbnail")
        if image is None:
            return format_html('<a href="{}">page</a>', page)
        return format_html(
            '<a href="{}"><img src="{}" alt="" loading="lazy" width="96" height="60" '
            'style="object-fit: cover; object-position: top"></a>',
            page,
            image,
        )

    @admin.display(description="state", ordering="status")
    def state(self, snapshot):
        return state_badge(snapshot.status, title=snapshot.error)

    @admin.display(description="results")
    def results(self, snapshot):
        return result_badges(snapshot)

    @admin.display(description="fixity", ordering="fixity_checked_at")
    def fixity(self, snapshot):
        return fixity_badge(
            flagged=snapshot.fixity_flagged,
            checked_at=snapshot.fixity_checked_at,
            sealed=snapshot.status == SnapshotStatus.SEALED,
        )

    @admin.display(description="fixity")
    def fixity_summary(self, snapshot):
        checks = snapshot.fixity_checks.count()
        if not checks:
            return self.fixity(snapshot)
        url = reverse("admin:core_fixitycheck_changelist") + f"?snapshot__id__exact={snapshot.pk}"
        return format_html(
            '{} <a href="{}">all {} check(s)</a>', self.fixity(snapshot), url, checks
        )

    @admin.display(description="copies", ordering="copies_stored")
    def copies(self, snapshot):
        return copies_summary(
            total=snapshot.copies_total,
            stored=snapshot.copies_stored,
            damaged=snapshot.copies_damaged,
            failed=snapshot.copies_failed,
        )

    @admin.display(description="tags")
    def tags_list(self, snapshot):
        return ", ".join(tag.name for tag in snapshot.tags.all()) or "—"

    @admin.display(description="files in the snapshot folder")
    def files(self, snapshot):
        folder = snapshot.output_dir
        if not folder.is_dir():
            return "—"
        return file_links(
            snapshot, [p.relative_to(folder).as_posix() for p in payload_files(folder)]
        )


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]
