"""Admin for crawls: seeds, depth, state and report. Status is read-only."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.db.models import Count, Q
from django.urls import reverse
from django.utils.html import format_html
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from core.admin_display import state_badge
from core.choices import SnapshotStatus
from crawls.models import Crawl
from crawls.services import crawl_hold, crawl_release


@admin.register(Crawl)
class CrawlAdmin(admin.ModelAdmin):
    list_display = ["id", "first_seed", "state", "depth", "progress", "tag_names", "created_at"]
    list_filter = ["status", "tags", "created_at"]
    search_fields = ["seeds"]
    date_hierarchy = "created_at"
    readonly_fields = ["id", "state", "seeds", "depth", "any_host", "priority", "tag_names",
                       "source_file", "input_summary", "notify_webhook", "notify_email",
                       "created_by", "created_at",
                       "start_ts", "end_ts",
                       "retry_at", "snapshots_link", "report_json"]  # fmt: skip
    fields = readonly_fields
    actions = ["hold_crawls", "release_crawls"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.action(description="Hold selected crawls (nothing of them is claimed)")
    def hold_crawls(self, request, queryset):
        self._transition_each(request, queryset, crawl_hold, "held")

    @admin.action(description="Release selected crawls (their work resumes)")
    def release_crawls(self, request, queryset):
        self._transition_each(request, queryset, crawl_release, "released")

    def _transition_each(self, request, queryset, service, done: str) -> None:
        changed, refused = 0, []
        for crawl_id in queryset.values_list("pk", flat=True):
            try:
                service(crawl_id=crawl_id)
                changed += 1
            except (TransitionNotAllowed, ConcurrentTransition, Crawl.DoesNotExist):
                refused.append(str(crawl_id))
        if changed:
            self.message_user(request, f"{changed} crawl(s) {done}.")
        if refused:
            self.message_user(
                request,
                f"Left alone (not in a state that allows it): crawl {', '.join(refused)}.",
                level=messages.WARNING,
            )

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .prefetch_related("tags")
            .annotate(
                snapshot_count=Count("snapshots"),
                final_count=Count(
                    "snapshots", filter=Q(snapshots__status__in=SnapshotStatus.final())
                ),
            )
        )

    @admin.display(description="seed")
    def first_seed(self, crawl):
        seeds = crawl.seed_list()
        more = f" (+{len(seeds) - 1})" if len(seeds) > 1 else ""
        return f"{seeds[0] if seeds else '—'}{more}"

    @admin.display(description="state", ordering="status")
    def state(self, crawl):
        return state_badge(crawl.status)

    @admin.display(description="snapshots done")
    def progress(self, crawl):
        return f"{crawl.final_count} / {crawl.snapshot_count}"

    @admin.display(description="tags")
    def tag_names(self, crawl):
        return ", ".join(tag.name for tag in crawl.tags.all()) or "—"

    @admin.display(description="snapshots")
    def snapshots_link(self, crawl):
        url = reverse("admin:core_snapshot_changelist") + f"?crawl__id__exact={crawl.pk}"
        return format_html('<a href="{}">{} snapshots</a>', url, crawl.snapshots.count())

    @admin.display(description="input")
    def input_summary(self, crawl):
        report = crawl.input_report
        if not report:
            return "—"
        lines = [f"{report['accepted']} URL(s) read as {report['format']}"]
        if report["rejected"]:
            lines.append(f"{report['rejected']} left out:")
            lines += [f"  {problem}" for problem in report["problems"]]
        return format_html("<pre>{}</pre>", "\n".join(lines))

    @admin.display(description="report")
    def report_json(self, crawl):
        if not crawl.report:
            return "— (written when the crawl is sealed)"
        return format_html("<pre>{}</pre>", json.dumps(crawl.report, indent=2))
