"""Admin for what keeps a snapshot safe: its storage copies (copied again by an action) and its
fixity checks (the audit trail, never changed), listed on their own and inline on the snapshot's
page."""

from __future__ import annotations

from django.contrib import admin, messages
from django.forms.models import BaseInlineFormSet
from django.urls import reverse
from django.utils.html import format_html

from core.admin.display import problem_list, size_display, state_badge
from core.admin.permissions import ActionPermissionsMixin
from core.admin.readonly import ReadOnlyAdminMixin
from core.choices import CopyStatus
from core.models import FixityCheck, Snapshot, StorageCopy
from core.services.copies import copies_retry

FIXITY_CHECKS_SHOWN = 20  # on a snapshot's page; the fixity check list has them all


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
