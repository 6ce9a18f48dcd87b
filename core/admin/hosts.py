"""Admin for hosts: the servers pages are fetched from and their circuit breakers (issue 19).
Each says how it stands ("paused until T (3 connection failures: …)"); a paused host can be
resumed by hand, through a service."""

from __future__ import annotations

from django.contrib import admin

from core.admin.display import state_badge
from core.admin.readonly import ReadOnlyAdminMixin
from core.admin.transitions import ServiceTransitionsMixin
from core.choices import HostStatus
from core.models import Host
from core.services.hosts import host_resume


def _resume_host(host: Host) -> str:
    host_resume(host=host)
    return f"Host {host.name} resumed: its results start again."


@admin.register(Host)
class HostAdmin(ServiceTransitionsMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["name", "state", "standing", "failures", "paused_until", "modified_at"]
    list_filter = ["status"]
    search_fields = ["name", "error"]
    ordering = ["-status", "paused_until", "name"]  # paused first, the soonest resumed first
    readonly_fields = ["name", "state", "standing", "failures", "paused_until", "error",
                       "proven_at", "modified_at"]  # fmt: skip
    fields = readonly_fields
    fsm_services = {"resume": _resume_host}
    fsm_labels = {"resume": "Resume now"}

    @admin.display(description="state", ordering="status")
    def state(self, host):
        return state_badge(host.status, title=host.error)

    @admin.display(description="how it stands")
    def standing(self, host):
        if host.status == HostStatus.OK and not host.failures and host.proven_at:
            return "ok"
        return host.describe().removeprefix(f"host {host.name}: ")
