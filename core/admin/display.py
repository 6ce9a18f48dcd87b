"""Small HTML pieces the admin shows: state badges, links to snapshot files, and the fixity and
storage-copy summaries of a snapshot."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from core.choices import ResultStatus
from core.extractors import registry
from core.models import ArchiveResult, Snapshot


def state_badge(status: str, label: str | None = None, title: str = "") -> str:
    """Return a coloured badge for a state value (colours in templates/admin/base_site.html)."""
    return format_html(
        '<span class="vellum-badge vellum-{}" title="{}">{}</span>', status, title, label or status
    )


def file_url(snapshot: Snapshot, relative: str) -> str:
    """Return the URL that serves ``relative`` from the snapshot folder."""
    return reverse("core:snapshot_file", args=[snapshot.pk, relative])


def main_file_url(snapshot: Snapshot, result: ArchiveResult | None) -> str | None:
    """The URL of a result's main output file, when it has one (``result`` may be None)."""
    path = main_output_path(result) if result is not None else None
    return file_url(snapshot, path) if path else None


def index_image_url(snapshot: Snapshot, results: Iterable[ArchiveResult], slot: str) -> str | None:
    """The URL of the image shown for ``snapshot`` in ``slot`` ("favicon" or "thumbnail"; the
    admin and the index): the main file of the first registered extractor that declares that
    ``index_image`` and whose result among ``results`` succeeded. None when there is none."""
    succeeded = {r.extractor: r for r in results if r.status == ResultStatus.SUCCEEDED}
    for extractor in registry.EXTRACTORS:
        if extractor.index_image == slot and extractor.name in succeeded:
            return main_file_url(snapshot, succeeded[extractor.name])
    return None


def main_output_path(result: ArchiveResult) -> str | None:
    """Return the main output's path in the snapshot folder, if ``output`` names a file."""
    if not result.output:
        return None
    candidate = f"{result.extractor}/{result.output}"
    return candidate if candidate in result.output_files else None


def result_badge(result: ArchiveResult) -> str:
    """A badge for one result, linking to its main output file when there is one."""
    badge = state_badge(result.status, result.extractor, title=result.error or result.output)
    path = main_output_path(result)
    if path is None:
        return badge
    return format_html('<a href="{}">{}</a>', file_url(result.snapshot, path), badge)


def main_output_link(result: ArchiveResult) -> str:
    """The main output: a link to its file, or its value (a title), or a dash."""
    path = main_output_path(result)
    if path is None:
        return result.output or "—"
    return format_html('<a href="{}">{}</a>', file_url(result.snapshot, path), result.output)


def result_badges(snapshot: Snapshot) -> str:
    """Badges for every result of ``snapshot`` (use with prefetched results)."""
    return format_html_join(" ", "{}", ((result_badge(r),) for r in snapshot.results.all()))


def file_links(snapshot: Snapshot, paths: list[str]) -> str:
    """A list of links, one per file of the snapshot folder."""
    if not paths:
        return "—"
    items = format_html_join(
        "", '<li><a href="{}">{}</a></li>', ((file_url(snapshot, p), p) for p in paths)
    )
    return format_html('<ul class="vellum-files">{}</ul>', items)


def fixity_badge(*, flagged: bool, checked_at: datetime | None, sealed: bool) -> str:
    """A badge for what fixity audits found of a snapshot: ``flagged`` (the latest conclusive
    check of some copy found it damaged), ``sound``, or ``unchecked`` (sealed, never checked
    conclusively); a dash for a snapshot not sealed and not flagged (nothing signed to check)."""
    when = f"last checked {timezone.localtime(checked_at):%Y-%m-%d %H:%M}" if checked_at else ""
    if flagged:
        return state_badge("flagged", title=when)
    if not sealed:
        return "—"
    if checked_at is None:
        return state_badge("unchecked", title="no fixity check has read this snapshot yet")
    return state_badge("sound", title=when)


def copies_summary(*, total: int, stored: int, damaged: int, failed: int) -> str:
    """A badge such as "2/2 stored" or "1/2 stored, 1 damaged": green when every copy is
    stored, red when one is damaged or failed, blue while the others are being copied."""
    if not total:
        return "—"
    pending = total - stored - damaged - failed
    others = {"damaged": damaged, "failed": failed, "pending": pending}
    parts = [f"{stored}/{total} stored"] + [f"{n} {word}" for word, n in others.items() if n]
    if damaged:
        colour = "damaged"
    elif failed:
        colour = "failed"
    elif pending:
        colour = "started"
    else:
        colour = "stored"
    return state_badge(colour, ", ".join(parts))


def size_display(size: int) -> str:
    """Bytes as a person reads them ("1.2 MB"); a dash for nothing."""
    return filesizeformat(size) if size else "—"


def problem_list(problems: list[str], limit: int | None = None) -> str:
    """What a fixity check found wrong, one item each (the first ``limit`` of them)."""
    if not problems:
        return "—"
    shown = problems if limit is None else problems[:limit]
    items = format_html_join("", "<li>{}</li>", ((problem,) for problem in shown))
    more = len(problems) - len(shown)
    if more:
        items += format_html("<li>… and {} more</li>", more)
    return format_html('<ul class="vellum-problems">{}</ul>', items)
