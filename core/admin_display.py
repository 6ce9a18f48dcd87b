"""Small HTML pieces the admin shows: state badges and links to snapshot files."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.models import ArchiveResult, Snapshot


def state_badge(status: str, label: str | None = None, title: str = "") -> str:
    """Return a coloured badge for a state value (colours in templates/admin/base_site.html)."""
    return format_html(
        '<span class="vellum-badge vellum-{}" title="{}">{}</span>', status, title, label or status
    )


def file_url(snapshot: Snapshot, relative: str) -> str:
    """Return the URL that serves ``relative`` from the snapshot folder."""
    return reverse("core:snapshot_file", args=[snapshot.pk, relative])


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
