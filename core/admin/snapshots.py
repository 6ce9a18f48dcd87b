"""Admin for snapshots, archive results, storage copies, fixity checks and tags. Status is shown,
never edited: it changes only through the state machines' transitions, which the actions reach
through services."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count, Exists, OuterRef, Prefetch, Subquery, Value
from django.db.models.functions import Coalesce
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.admin.display import (
    copies_summary,
    file_links,
    fixity_badge,
    main_file_url,
    main_output_link,
    problem_list,
    result_badges,
    size_display,
    state_badge,
)
from core.admin.export import export_download
from core.admin.permissions import ActionPermissionsMixin
from core.admin.removal import remove_with_files
from core.admin.transitions import ServiceTransitionsMixin
from core.choices import CopyStatus, FixityOutcome, ResultStatus, SnapshotStatus
from core.extractors.redaction import redact_command
from core.folder.manifest import payload_files
from core.models import (
    ApiToken,
    ArchiveResult,
    FixityCheck,
    Snapshot,
    SnapshotQuerySet,
    StorageCopy,
    Tag,
)
from core.services.copies import copies_retry
from core.services.fixity import RestoreError, snapshot_audit, snapshot_repair
from core.services.rearchive import snapshot_rearchive, snapshot_retry_failed
from core.services.removal import snapshot_remove
from core.services.tokens import token_revoke

FIXITY_CHECKS_SHOWN = 20  # on a snapshot's page; the fixity check list has them all
# Audits and repairs re-hash every file (and every storage copy) while the request waits: past
# this many snapshots they belong to manage.py verify / restore, which no web timeout cuts short.
ADMIN_FIXITY_LIMIT = 50


class ReadOnlyAdminMixin:
    """Records are created by crawls and changed by transitions, not typed in by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Deleting rows would orphan their folders in DATA_DIR; "delete with files" is an action
        # of its own (see the closing note of issue 2).
        return False


def with_preservation(queryset: SnapshotQuerySet) -> SnapshotQuerySet:
    """Annotate snapshots with what the fixity and storage-copy columns show, in the same query:
    ``fixity_flagged`` (as ``Snapshot.objects.flagged()``), ``fixity_checked_at`` (the latest
    conclusive check of any copy, None when there is none) and ``copies_*`` counts."""
    checks = FixityCheck.objects.filter(snapshot=OuterRef("pk"))
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


class ArchiveResultInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ArchiveResult
    fields = ["extractor", "state", "attempts", "output_link", "cmd_version", "exit_code", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request):
        # Each row's output link and change link name the snapshot: one join, not a query each.
        return super().get_queryset(request).select_related("snapshot")

    @admin.display(description="state")
    def state(self, result):
        return state_badge(result.status)

    @admin.display(description="output")
    def output_link(self, result):
        return main_output_link(result)


class StorageCopyInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = StorageCopy
    fields = ["target_link", "state", "attempts", "files", "size_shown", "verified_at", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    classes = ["vellum-plain"]  # no title line above each row: the target links to the copy

    @admin.display(description="target")
    def target_link(self, copy):
        url = reverse("admin:core_storagecopy_change", args=[copy.pk])
        return format_html('<a href="{}">{}</a>', url, copy.target)

    @admin.display(description="state")
    def state(self, copy):
        return state_badge(copy.status, title=copy.error)

    @admin.display(description="size")
    def size_shown(self, copy):
        return size_display(copy.size)


class LatestChecksFormSet(BaseInlineFormSet):
    """The snapshot's latest fixity checks only: the table grows with every audit."""

    def get_queryset(self):
        return super().get_queryset()[:FIXITY_CHECKS_SHOWN]


class FixityCheckInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = FixityCheck
    formset = LatestChecksFormSet
    verbose_name_plural = f"fixity checks (the latest {FIXITY_CHECKS_SHOWN})"
    fields = ["checked_at", "location", "outcome_badge", "files", "problems_shown"]
    readonly_fields = fields
    ordering = ["-checked_at", "-pk"]
    extra = 0
    can_delete = False
    classes = ["vellum-plain"]

    @admin.display(description="outcome")
    def outcome_badge(self, check):
        return state_badge(check.outcome)

    @admin.display(description="problems")
    def problems_shown(self, check):
        return problem_list(check.problems, limit=10)


def _retry_failed(snapshot: Snapshot) -> str:
    count = snapshot_retry_failed(snapshot=snapshot)
    return f"{count} failed result(s) queued again; the snapshot is finalized again after them."


def _rearchive(snapshot: Snapshot) -> str:
    moved_to = snapshot_rearchive(snapshot=snapshot)
    return f"Queued to be archived again; the earlier run is kept in {moved_to}/."


def _retry_result(result: ArchiveResult) -> str:
    count = snapshot_retry_failed(snapshot=result.snapshot, extractor=result.extractor)
    return f"{result.extractor}: {count} result(s) queued again."


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
                       "manifest_sha256", "signed_by", "fixity_summary", "copies",
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
        snapshots = list(queryset.with_failures().select_related("crawl"))
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
        final = list(queryset.final().select_related("crawl"))
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
        """The screenshot, small, linking to the snapshot's page (from the prefetched results)."""
        page = reverse("core:snapshot", args=[snapshot.pk])
        for result in snapshot.results.all():
            image = main_file_url(snapshot, result) if result.extractor == "screenshot" else None
            if image and result.status == ResultStatus.SUCCEEDED:
                return format_html(
                    '<a href="{}"><img src="{}" alt="" loading="lazy" width="96" height="60" '
                    'style="object-fit: cover; object-position: top"></a>',
                    page,
                    image,
                )
        return format_html('<a href="{}">page</a>', page)

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


@admin.register(ArchiveResult)
class ArchiveResultAdmin(ServiceTransitionsMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["extractor", "state", "snapshot_url", "attempts", "output_link", "short_error",
                    "end_ts"]  # fmt: skip
    list_filter = ["status", "extractor", "snapshot__crawl", "snapshot__tags", "created_at"]
    search_fields = ["snapshot__url", "snapshot__title", "error"]
    list_select_related = ["snapshot"]
    list_per_page = 100
    # Newest first, by the primary key's index: the model's ordering (by snapshot, then pk)
    # would join and sort every result (~0.4 s at 500,000 on SQLite).
    ordering = ["-pk"]
    readonly_fields = ["snapshot", "extractor", "behaviour", "depends_on", "state", "attempts",
                       "cmd_line", "cmd_version", "exit_code", "output", "files", "output_size",
                       "error", "refused_shown", "created_at",
                       "start_ts", "end_ts", "retry_at"]  # fmt: skip
    fields = readonly_fields
    fsm_services = {"retry": _retry_result}

    @admin.display(description="state", ordering="status")
    def state(self, result):
        return state_badge(result.status, title=result.error)

    @admin.display(description="snapshot", ordering="snapshot__url")
    def snapshot_url(self, result):
        return result.snapshot.url

    @admin.display(description="refused by the address policy")
    def refused_shown(self, result):
        return format_html_join("\n", "<div>{}</div>", ((line,) for line in result.refused)) or "-"

    @admin.display(description="output")
    def output_link(self, result):
        return main_output_link(result)

    @admin.display(description="error or reason")
    def short_error(self, result):
        return result.error[:120]

    @admin.display(description="command")
    def cmd_line(self, result):
        # Redacted again: a row recorded before redaction existed may hold a credential.
        cmd = redact_command(result.cmd)
        return format_html("<code>{}</code>", " ".join(cmd)) if cmd else "—"

    @admin.display(description="output files")
    def files(self, result):
        return file_links(result.snapshot, result.output_files)


def snapshot_link(snapshot: Snapshot) -> str:
    """A link to the snapshot's admin page, showing its URL."""
    url = reverse("admin:core_snapshot_change", args=[snapshot.pk])
    return format_html('<a href="{}">{}</a>', url, snapshot.url)


@admin.register(StorageCopy)
class StorageCopyAdmin(ActionPermissionsMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Copies are queued when a snapshot is sealed and change by transitions only; deleting a row
    would lose track of the files on the target."""

    list_display = ["snapshot_url", "target", "state", "attempts", "files", "size_shown",
                    "verified_at", "short_error"]  # fmt: skip
    list_filter = ["status", "target"]
    search_fields = ["snapshot__url", "target", "error"]
    list_select_related = ["snapshot"]
    list_per_page = 100
    readonly_fields = ["snapshot_url", "target", "state", "attempts", "files", "size_shown",
                       "manifest_sha256", "verified_at", "error", "created_at", "start_ts",
                       "end_ts", "retry_at"]  # fmt: skip
    fields = readonly_fields
    actions = ["copy_again"]

    @admin.action(description="Copy again (failed or damaged copies)", permissions=["transition"])
    def copy_again(self, request, queryset):
        # Counted first: the selection may be filtered by the status this changes.
        others = queryset.exclude(status__in=[CopyStatus.FAILED, CopyStatus.DAMAGED]).count()
        queued = copies_retry(copies=queryset)
        if queued:
            self.message_user(request, f"{queued} copy(ies) queued to be copied again.")
        if others:
            self.message_user(
                request,
                f"{others} copy(ies) neither failed nor damaged were left alone.",
                level=messages.WARNING,
            )

    @admin.display(description="snapshot", ordering="snapshot__url")
    def snapshot_url(self, copy):
        return snapshot_link(copy.snapshot)

    @admin.display(description="state", ordering="status")
    def state(self, copy):
        return state_badge(copy.status, title=copy.error)

    @admin.display(description="size", ordering="size")
    def size_shown(self, copy):
        return size_display(copy.size)

    @admin.display(description="error")
    def short_error(self, copy):
        return copy.error[:120]


@admin.register(FixityCheck)
class FixityCheckAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The audit trail: rows are written by audits and never changed or removed."""

    list_display = ["checked_at", "snapshot_url", "location", "outcome_badge", "files",
                    "problems_shown"]  # fmt: skip
    list_filter = ["outcome", "location", "checked_at"]
    search_fields = ["snapshot__url"]
    date_hierarchy = "checked_at"
    list_select_related = ["snapshot"]
    list_per_page = 100
    readonly_fields = ["snapshot_url", "location", "checked_at", "outcome_badge", "files",
                       "all_problems"]  # fmt: skip
    fields = readonly_fields

    @admin.display(description="snapshot", ordering="snapshot__url")
    def snapshot_url(self, check):
        return snapshot_link(check.snapshot)

    @admin.display(description="outcome", ordering="outcome")
    def outcome_badge(self, check):
        return state_badge(check.outcome)

    @admin.display(description="problems")
    def problems_shown(self, check):
        return problem_list(check.problems, limit=3)

    @admin.display(description="problems")
    def all_problems(self, check):
        return problem_list(check.problems)


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]


@admin.register(ApiToken)
class ApiTokenAdmin(ActionPermissionsMixin, admin.ModelAdmin):
    """Tokens are made with ``manage.py token create`` (the key is shown once, there); here
    they are listed and revoked."""

    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    readonly_fields = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    fields = readonly_fields
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Revoke selected tokens", permissions=["transition"])
    def revoke(self, request, queryset):
        for token_id in queryset.values_list("pk", flat=True):
            token_revoke(token_id=token_id)
        self.message_user(request, f"{queryset.count()} token(s) revoked.")
