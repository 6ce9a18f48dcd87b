"""What ``manage.py status`` shows: every kind of work counted per state, and what fixity
audits found."""

from __future__ import annotations

from django.db.models import Max

from core.models import FixityCheck, Snapshot
from orchestrator.work import work_types


def status_counts() -> dict[str, dict[str, int]]:
    """Return ``{kind: {state: count, ...}, ...}`` with every state listed (0 when empty), plus
    ``{kind: {"due": n}}`` folded in: records claimable right now."""
    counts = {}
    for name, kind in work_types().items():
        states = {value: 0 for value, _label in kind.model._meta.get_field("status").choices}
        states.update(kind.model.objects.count_by_status())
        states["due"] = kind.model.objects.due().count()
        counts[name] = states
    return counts


def kind_titles() -> dict[str, str]:
    """Return ``{kind: title}``, what a person calls each kind ("storage copies")."""
    return {name: str(kind.model._meta.verbose_name_plural) for name, kind in work_types().items()}


def fixity_status() -> dict:
    """Return ``{"flagged": n, "unchecked": n, "last_checked_at": datetime | None}``.

    ``flagged`` counts the snapshots whose latest conclusive check of some copy found it damaged
    (what ``restore --flagged`` repairs); ``unchecked`` the sealed snapshots that no check has
    read conclusively (only unreachable targets, or none at all); ``last_checked_at`` is when
    the latest check of any outcome ran (None when none has).
    """
    return {
        "flagged": Snapshot.objects.flagged().count(),
        "unchecked": Snapshot.objects.unchecked().count(),
        "last_checked_at": FixityCheck.objects.aggregate(last=Max("checked_at"))["last"],
    }
