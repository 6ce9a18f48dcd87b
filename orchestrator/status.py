"""Counts of every kind of work per state: what ``manage.py status`` shows."""

from __future__ import annotations

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
