"""Admin for crawls: seeds, depth, state and report. Status is read-only."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from core.admin.display import state_badge
from core.admin.export import export_download
from core.admin.readonly import ReadOnlyAdminMixin
from core.admin.removal import remove_with_files
from core.admin.transitions import HoldForm, ServiceTransitionsMixin
from core.choices import SnapshotStatus
from core.extractors.credentials import parse_cookies
from core.models import Snapshot
from core.services.crawls import (
    CrawlOptions,
    check_crawl_options,
    crawl_hold,
    crawl_release,
    crawls_set_public,
)
from core.services.export import ExportError, select_snapshots
from core.services.personas import persona_domain, persona_save
from core.services.profiles import describe_steps
from core.services.rearchive import snapshots_retry_failed
from core.services.removal import crawl_remove
from core.services.schedules import schedule_run_now
from crawls.choices import CrawlScope
from crawls.estimate import describe as describe_estimate
from crawls.inputs import FORMATS, left_out_headline, problems_not_listed, read_input
from crawls.models import (
    POLITENESS_FIELDS,
    Crawl,
    CrawlSchedule,
    Persona,
    Profile,
    SaveDefaults,
    cron_next,
)
from crawls.seeds import InputError


def _hold(crawl: Crawl, reason: str = "") -> str:
    crawl_hold(crawl_id=crawl.pk, reason=reason)
    return f"Crawl {crawl.pk} held: none of its work is claimed until it is released."


def _release(crawl: Crawl) -> str:
    crawl_release(crawl_id=crawl.pk)
    return f"Crawl {crawl.pk} released: it resumes where it stopped."


@admin.register(Crawl)
class CrawlAdmin(ReadOnlyAdminMixin, ServiceTransitionsMixin, admin.ModelAdmin):
    list_display = ["id", "first_seed", "state", "depth", "progress", "tag_names", "created_at"]
    list_filter = ["status", "tags", "profile", "schedule", "public", "created_by", "created_at"]
    search_fields = ["seeds"]
    date_hierarchy = "created_at"
    readonly_fields = ["id", "state", "hold_reason", "seeds", "depth", "any_host", "priority",
                       "tag_names", "profile", "persona", "behaviours", "only_changes", "public",
                       "scope",
                       "include", "exclude", "robots", "max_pages", "max_bytes",
                       "host_concurrency", "host_delay_seconds", "stop_reason", "schedule",
                       "estimate_summary",
                       "source_file",
                       "input_summary", "notify_webhook", "notify_email", "created_by",
                       "created_at", "start_ts", "end_ts", "retry_at", "snapshots_link",
                       "report_json"]  # fmt: skip
    fields = readonly_fields
    actions = ["hold_crawls", "release_crawls", "retry_failed", "mark_public", "mark_private",
               "export_wacz", "remove_files"]  # fmt: skip
    fsm_services = {"hold": _hold, "release": _release}
    fsm_forms = {"hold": HoldForm}

    @admin.action(description="Export a crawl as WACZ: one per snapshot and one for the crawl")
    def export_wacz(self, request, queryset):
        crawls = list(queryset[:2])
        if len(crawls) != 1:
            self.message_user(request, "Select one crawl to export.", level=messages.WARNING)
            return None
        try:
            selection = select_snapshots(crawl_id=crawls[0].pk)
        except ExportError as error:  # a crawl with no snapshots yet, or removed meanwhile
            self.message_user(request, f"Nothing to export: {error}.", level=messages.WARNING)
            return None
        return export_download(
            self, request, selection.snapshots, format="wacz",
            identifier=selection.identifier, crawl=selection.crawl,
        )  # fmt: skip

    @admin.action(description="Retry failed results of selected crawls", permissions=["transition"])
    def retry_failed(self, request, queryset):
        count = snapshots_retry_failed(snapshots=Snapshot.objects.filter(crawl__in=queryset))
        self.message_user(request, f"{count} failed result(s) queued again.")

    @admin.action(
        description="Mark selected crawls public (shown to everyone while PUBLIC_ARCHIVE is on)",
        permissions=["transition"],
    )
    def mark_public(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        count = crawls_set_public(crawl_ids=ids, public=True)
        self.message_user(request, f"{count} crawl(s) marked public.")

    @admin.action(description="Mark selected crawls private", permissions=["transition"])
    def mark_private(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        count = crawls_set_public(crawl_ids=ids, public=False)
        self.message_user(request, f"{count} crawl(s) marked private.")

    @admin.action(
        description="Remove selected crawls and delete their folders", permissions=["remove"]
    )
    def remove_files(self, request, queryset):
        return remove_with_files(
            self, request, queryset, lambda pk: crawl_remove(crawl_id=pk, delete_files=True)
        )

    @admin.action(
        description="Hold selected crawls (nothing of them is claimed)", permissions=["transition"]
    )
    def hold_crawls(self, request, queryset):
        self._transition_each(request, queryset, crawl_hold, "held")

    @admin.action(
        description="Release selected crawls (their work resumes)", permissions=["transition"]
    )
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

    @admin.display(description="behaviours")
    def behaviours(self, crawl):
        """What the browser extractors do to a page before capturing it (its options or the
        settings'): the crawl's behaviour_seconds and scroll_page_limit."""
        return crawl.behaviour_summary()

    @admin.display(description="estimate")
    def estimate_summary(self, crawl):
        return describe_estimate(crawl.estimate) if crawl.estimate else "—"

    @admin.display(description="input")
    def input_summary(self, crawl):
        report = crawl.input_report
        if not report:
            return "—"
        lines = [f"{report['accepted']} URL(s) read as {report['format']}"]
        if headline := left_out_headline(report):
            lines.append(f"{headline}:")
            lines += [f"  {problem}" for problem in report["problems"]]
            if more := problems_not_listed(report):
                lines.append(f"  ... and {more} more")
        return format_html("<pre>{}</pre>", "\n".join(lines))

    @admin.display(description="report")
    def report_json(self, crawl):
        if not crawl.report:
            return "— (written when the crawl is sealed)"
        return format_html("<pre>{}</pre>", json.dumps(crawl.report, indent=2))


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    """Profiles are edited here: saving checks the steps (crawls/profiles.py) and names what is
    wrong; a profile that crawls name cannot be deleted (their records say what ran)."""

    list_display = ["name", "is_default", "step_summary", "description", "modified_at"]
    search_fields = ["name", "description"]
    fields = ["name", "description", "is_default", "steps", "step_summary"]
    readonly_fields = ["step_summary"]

    @admin.display(description="Steps as they run")
    def step_summary(self, profile: Profile) -> str:
        try:
            return describe_steps(profile.planned_steps())
        except ValidationError as error:
            return f"invalid: {'; '.join(error.messages)}"


class PersonaForm(forms.ModelForm):
    """Name, description and user agent as fields; cookies and headers write-only: a new file
    or header list replaces the stored ones, and what is stored is never shown."""

    cookies = forms.FileField(
        required=False,
        help_text="A Netscape cookies.txt or a Playwright storage state (JSON); replaces the "
        "stored cookies. Empty: keep them.",
    )
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="'Name: value' per line, sent with each request to the header domains and "
        "the cookies' domains; replaces the stored ones. "
        "Empty: keep them.",
    )

    class Meta:
        model = Persona
        fields = ["name", "description", "user_agent", "keep_in_warcs", "header_domains"]

    def clean_cookies(self) -> str | None:
        upload = self.cleaned_data.get("cookies")
        if upload is None:
            return None
        try:
            text = upload.read().decode("utf-8")
            if not parse_cookies(text):
                raise ValidationError("The cookies file holds no cookie.")
        except UnicodeDecodeError:
            raise ValidationError("The cookies file is not UTF-8 text.") from None
        except ValueError as error:
            raise ValidationError(str(error)) from None
        return text

    def clean_header_domains(self) -> list[str]:
        """A JSON list of host names or domains, stored as persona_save stores them."""
        domains = self.cleaned_data.get("header_domains") or []
        if not isinstance(domains, list) or not all(isinstance(d, str) for d in domains):
            raise ValidationError('A JSON list of host names, e.g. ["example.com"].')
        try:
            return list(dict.fromkeys(persona_domain(domain) for domain in domains))
        except InputError as error:
            raise ValidationError(str(error)) from None

    def clean_headers(self) -> str:
        text = self.cleaned_data.get("headers", "")
        for line in text.splitlines():
            if line.strip() and ":" not in line:
                raise ValidationError(f"A header is 'Name: value', not {line!r}.")
        return text


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    """Personas: what a crawl signs in with. Their cookies and headers are counted here, never
    shown; deleting one leaves its crawls' snapshots."""

    form = PersonaForm
    list_display = ["name", "description", "held", "user_agent", "modified_at"]
    search_fields = ["name", "description"]
    readonly_fields = ["held"]

    @admin.display(description="Secrets held (encrypted)")
    def held(self, persona: Persona) -> str:
        return persona.summary()

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        lines = [line for line in form.cleaned_data["headers"].splitlines() if line.strip()]
        if form.cleaned_data["cookies"] is not None or lines:
            try:
                persona_save(name=obj.name, cookies=form.cleaned_data["cookies"], headers=lines)
            except InputError as error:
                self.message_user(request, f"Secrets not changed: {error}", messages.ERROR)


class CrawlScheduleForm(forms.ModelForm):
    """Checks the input and options as ``schedule add`` does, so a saved schedule runs; a
    schedule saved disabled has its input checked only, so that one whose options no longer
    pass (its profile changed since) can be turned off, and is checked when turned on."""

    notify_webhook = forms.URLField(max_length=2048, required=False, assume_scheme="https")
    # Left empty, the defaults: host scope, no delay.
    scope = forms.ChoiceField(choices=CrawlScope.choices, required=False)
    host_delay_seconds = forms.FloatField(required=False, min_value=0)

    class Meta:
        model = CrawlSchedule
        fields = ["cron", "enabled", "source", "parser", "depth", "any_host", "tags", "priority",
                  "profile", "persona", "notify_webhook", "notify_email", "behaviour_seconds",
                  "scroll_page_limit", "only_changes", *POLITENESS_FIELDS]  # fmt: skip
        widgets = {"parser": forms.Select(choices=[(f, f) for f in ["auto", *FORMATS]])}

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        data["scope"] = data["scope"] or CrawlScope.HOST
        data["host_delay_seconds"] = data["host_delay_seconds"] or 0.0
        try:
            read_input(data["source"].encode(), source="source", parser=data["parser"])
            if not data["enabled"]:
                return data
            check_crawl_options(
                CrawlOptions(
                    depth=data["depth"],
                    priority=data["priority"],
                    tags=[data["tags"]],
                    notify_webhook=data["notify_webhook"],
                    notify_email=data["notify_email"],
                    profile=data["profile"].name if data["profile"] else "",
                    behaviour_seconds=data["behaviour_seconds"],
                    scroll_page_limit=data["scroll_page_limit"],
                    any_host=data["any_host"],
                    **{name: data[name] for name in POLITENESS_FIELDS},
                )
            )
        except InputError as error:
            raise forms.ValidationError(str(error)) from None
        return data


@admin.register(SaveDefaults)
class SaveDefaultsAdmin(admin.ModelAdmin):
    """Per user: the profile and persona their one-click saves run with."""

    list_display = ["user", "profile", "persona"]
    autocomplete_fields = ["user"]
    search_fields = ["user__username"]


@admin.register(CrawlSchedule)
class CrawlScheduleAdmin(admin.ModelAdmin):
    """Schedules are edited here; a new cron expression sets the next run from now."""

    form = CrawlScheduleForm
    list_display = ["id", "cron", "enabled", "next_run_at", "last_run_at", "crawl_count",
                    "short_error"]  # fmt: skip
    list_filter = ["enabled"]
    search_fields = ["source", "tags"]
    readonly_fields = ["next_run_at", "last_run_at", "last_error", "crawls_link"]
    actions = ["run_now"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(crawl_total=Count("crawls"))

    def save_model(self, request, obj, form, change):
        if not change or "cron" in form.changed_data:
            obj.next_run_at = cron_next(obj.cron, timezone.now())
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    @admin.display(description="Crawls", ordering="crawl_total")
    def crawl_count(self, schedule: CrawlSchedule) -> int:
        return schedule.crawl_total

    @admin.display(description="Last error")
    def short_error(self, schedule: CrawlSchedule) -> str:
        return schedule.last_error[:80]

    @admin.display(description="Crawls it made")
    def crawls_link(self, schedule: CrawlSchedule) -> str:
        url = reverse("admin:crawls_crawl_changelist") + f"?schedule__id__exact={schedule.pk}"
        return format_html('<a href="{}">{} crawl(s)</a>', url, schedule.crawls.count())

    @admin.action(
        description="Run selected schedules now (their next run stays)", permissions=["change"]
    )
    def run_now(self, request, queryset):
        made = 0
        for schedule in queryset:
            try:
                schedule_run_now(schedule=schedule)
                made += 1
            except InputError as error:
                self.message_user(request, f"schedule {schedule.pk}: {error}", messages.ERROR)
        if made:
            self.message_user(request, f"{made} crawl(s) queued.")
