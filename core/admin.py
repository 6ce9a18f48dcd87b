"""Admin for snapshots, archive results and tags. Status is shown, never edited: it changes only
through the state machines' transitions."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Prefetch
from django.utils.html import format_html

from core.admin_display import file_links, main_output_link, result_badges, state_badge
from core.finalize import payload_files
from core.models import ArchiveResult, Snapshot, Tag
from core.services import snapshot_rearchive, snapshot_retry_failed


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


class ArchiveResultInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = ArchiveResult
    fields = ["extractor", "state", "attempts", "output_link", "cmd_version", "exit_code", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    @admin.display(description="state")
    def state(self, result):
        return state_badge(result.status)

    @admin.display(description="output")
    def output_link(self, result):
        return main_output_link(result)


@admin.register(Snapshot)
class SnapshotAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["url_link", "title", "state", "results", "crawl", "depth", "created_at"]
    list_filter = ["status", "crawl", "tags", "created_at", "results__extractor"]
    search_fields = ["url", "title"]
    date_hierarchy = "created_at"
    list_select_related = ["crawl"]
    list_per_page = 50
    readonly_fields = ["id", "url_link", "title", "state", "crawl", "depth", "parent", "tags_list",
                       "attempts", "error", "created_at", "start_ts", "end_ts", "retry_at",
                       "manifest_sha256", "files"]  # fmt: skip
    fields = readonly_fields
    inlines = [ArchiveResultInline]
    actions = ["retry_failed", "rearchive"]

    def get_queryset(self, request):
        results = Prefetch("results", queryset=ArchiveResult.objects.order_by("pk"))
        return super().get_queryset(request).prefetch_related(results, "tags")

    @admin.action(description="Retry failed results of selected snapshots")
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

    @admin.action(description="Re-archive selected snapshots (earlier runs are kept)")
    def rearchive(self, request, queryset):
        final = list(queryset.final().select_related("crawl"))
        for snapshot in final:
            snapshot_rearchive(snapshot=snapshot)
        if final:
            self.message_user(request, f"{len(final)} snapshot(s) queued to be archived again.")
        busy = queryset.count() - len(final)
        if busy:
            self.message_user(
                request,
                f"{busy} snapshot(s) still in progress were left alone.",
                level=messages.WARNING,
            )

    @admin.display(description="URL", ordering="url")
    def url_link(self, snapshot):
        return format_html('<a href="{}" rel="noreferrer" target="_blank">{}</a>', snapshot.url,
                           snapshot.url)  # fmt: skip

    @admin.display(description="state", ordering="status")
    def state(self, snapshot):
        return state_badge(snapshot.status, title=snapshot.error)

    @admin.display(description="results")
    def results(self, snapshot):
        return result_badges(snapshot)

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
class ArchiveResultAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["extractor", "state", "snapshot_url", "attempts", "output_link", "short_error",
                    "end_ts"]  # fmt: skip
    list_filter = ["status", "extractor", "snapshot__crawl", "snapshot__tags", "created_at"]
    search_fields = ["snapshot__url", "snapshot__title", "error"]
    list_select_related = ["snapshot"]
    list_per_page = 100
    readonly_fields = ["snapshot", "extractor", "state", "attempts", "cmd_line", "cmd_version",
                       "exit_code", "output", "files", "output_size", "error", "created_at",
                       "start_ts", "end_ts", "retry_at"]  # fmt: skip
    fields = readonly_fields

    @admin.display(description="state", ordering="status")
    def state(self, result):
        return state_badge(result.status, title=result.error)

    @admin.display(description="snapshot", ordering="snapshot__url")
    def snapshot_url(self, result):
        return result.snapshot.url

    @admin.display(description="output")
    def output_link(self, result):
        return main_output_link(result)

    @admin.display(description="error or reason")
    def short_error(self, result):
        return result.error[:120]

    @admin.display(description="command")
    def cmd_line(self, result):
        return format_html("<code>{}</code>", " ".join(result.cmd)) if result.cmd else "—"

    @admin.display(description="output files")
    def files(self, result):
        return file_links(result.snapshot, result.output_files)


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]
