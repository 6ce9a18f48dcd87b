"""Admin for archive results: one extractor run on one snapshot, listed on their own and inline
on the snapshot's page. Status is shown, never edited; a failed result is retried through a
service."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from core.admin.display import file_links, main_output_link, state_badge
from core.admin.readonly import ReadOnlyAdminMixin
from core.admin.transitions import ServiceTransitionsMixin
from core.extractors.redaction import redact_command
from core.models import ArchiveResult
from core.services.rearchive import snapshot_retry_failed


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


def _retry_result(result: ArchiveResult) -> str:
    count = snapshot_retry_failed(snapshot=result.snapshot, extractor=result.extractor)
    return f"{result.extractor}: {count} result(s) queued again."


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
                       "error", "refused_shown", "missing_shown", "created_at",
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

    @admin.display(description="missing from the capture")
    def missing_shown(self, result):
        return (
            format_html_join(
                "\n",
                "<div>{}: {}</div>",
                ((item.get("url", ""), item.get("reason", "")) for item in result.missing),
            )
            or "-"
        )

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
