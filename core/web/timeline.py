"""A URL's timeline: every capture of it across crawls on a calendar by year and month, newest
first, and what changed between two of them (core/services/captures.py, changes.py).

The archived URL is the rest of the path, as pywb takes it (``/url/https://example.com/a``);
the request's query string belongs to it (``/url/https://example.com/?q=1``), so these pages
take no parameters of their own. Links made here percent-encode the URL (Django's ``reverse``),
``?`` included. core/web/access.py says who may read them.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe

from core.admin.display import file_url, index_image_url
from core.models import ArchiveResult, Snapshot
from core.services.captures import Capture, url_captures, url_resolve
from core.services.changes import MAX_DIFF_CHARS, captures_compare
from core.web.access import readable_snapshots, reader_required
from crawls.seeds import InvalidURL

# Captures listed on one page, the newest; the calendar counts them all.
MAX_LISTED = 1000


def requested_url(request: HttpRequest, url: str) -> str:
    """The archived URL a request names: ``url`` (the rest of its path, decoded) with the
    request's query string, which belongs to it."""
    query = request.META.get("QUERY_STRING", "")
    return f"{url}?{query}" if query else url


def unknown_url(request: HttpRequest, url: str, problem: str = "", status: int = 404):
    """The page saying that ``url`` is not a URL (``problem`` says why, status 400) or that
    nothing of it was archived (status 404)."""
    context = {"url": url, "problem": problem}
    return render(request, "vellum/url_unknown.html", context, status=status)


@require_safe
@reader_required
def url_timeline(request: HttpRequest, url: str) -> HttpResponse:
    """Every capture of one URL, newest first: a calendar (year rows, month counts), then each
    capture with its time, state, size, thumbnail and whether its text changed."""
    raw = requested_url(request, url)
    try:
        normalized = url_resolve(raw)
    except InvalidURL as error:
        return unknown_url(request, raw, str(error), status=400)
    captures = url_captures(url=normalized, within=readable_snapshots(request))
    if not captures:
        return unknown_url(request, normalized)
    listed = captures[:MAX_LISTED]
    thumbnails = _thumbnails([capture.snapshot for capture in listed])
    context = {
        "url": normalized,
        "count": len(captures),
        "sealed": sum(1 for capture in captures if capture.sealed),
        "first": captures[-1],
        "latest": captures[0],
        "listed": len(listed),
        "calendar": _calendar(captures),
        "months": _months(listed, normalized, thumbnails),
    }
    return render(request, "vellum/timeline.html", context)


@require_safe
@reader_required
def url_diff(request: HttpRequest, url: str, before, after) -> HttpResponse:
    """What changed from capture ``before`` to capture ``after`` of one URL: a word diff of
    their readable text and how much of their screenshot differs (a capture compared with
    itself shows no change). 404 unless both are captures of that URL."""
    try:
        normalized = url_resolve(url)
    except InvalidURL as error:
        return unknown_url(request, url, str(error), status=400)
    found = {
        snapshot.pk: snapshot
        for snapshot in readable_snapshots(request)
        .captures_of(normalized)
        .filter(pk__in=[before, after])
    }
    if before not in found or after not in found:
        raise Http404(f"these are not two captures of {normalized}")
    comparison = captures_compare(before=found[before], after=found[after])
    shots = comparison.screenshot
    context = {
        "url": normalized,
        "timeline": reverse("core:url_timeline", kwargs={"url": normalized}),
        "comparison": comparison,
        "text": comparison.text,
        "shots": shots,
        "before_shot": file_url(comparison.before, shots.before) if shots.before else None,
        "after_shot": file_url(comparison.after, shots.after) if shots.after else None,
        "box": [f"{value * 100:.2f}%" for value in shots.box] if shots.box else None,
        "share_percent": None if shots.share is None else shots.share * 100,
        "max_chars": f"{MAX_DIFF_CHARS:,}",
    }
    return render(request, "vellum/diff.html", context)


def diff_url(url: str, capture: Capture) -> str | None:
    """The diff page from the sealed capture before ``capture`` to it, or None."""
    if capture.previous is None:
        return None
    return reverse(
        "core:url_diff",
        kwargs={"url": url, "before": capture.previous.id, "after": capture.id},
    )


def _thumbnails(snapshots: list[Snapshot]) -> dict:
    """``{snapshot id: thumbnail URL or None}`` for ``snapshots`` (one query)."""
    results = defaultdict(list)
    fields = ("snapshot_id", "extractor", "status", "output", "output_files")
    lean = ArchiveResult.objects.only(*fields)
    for result in lean.filter(snapshot__in=snapshots).order_by("pk"):
        results[result.snapshot_id].append(result)
    return {s.pk: index_image_url(s, results[s.pk], "thumbnail") for s in snapshots}


def _calendar(captures: list[Capture]) -> list[dict]:
    """The calendar, newest year first: ``{"year", "count", "months": [{"month" (a date, the
    1st), "count", "anchor"}] * 12}``, in local time."""
    counts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for capture in captures:
        moment = timezone.localtime(capture.captured_at)
        counts[moment.year][moment.month] += 1
    return [
        {
            "year": year,
            "count": sum(counts[year].values()),
            "months": [
                {
                    "month": date(year, month, 1),
                    "count": counts[year].get(month, 0),
                    "anchor": f"m-{year}-{month:02d}",
                }
                for month in range(1, 13)
            ],
        }
        for year in sorted(counts, reverse=True)
    ]


def _months(captures: list[Capture], url: str, thumbnails: dict) -> list[dict]:
    """``captures`` (newest first) grouped by month: ``{"month", "anchor", "rows"}``."""
    months: list[dict] = []
    for capture in captures:
        moment = timezone.localtime(capture.captured_at)
        anchor = f"m-{moment.year}-{moment.month:02d}"
        if not months or months[-1]["anchor"] != anchor:
            first_day = date(moment.year, moment.month, 1)
            months.append({"month": first_day, "anchor": anchor, "rows": []})
        months[-1]["rows"].append(
            {
                "capture": capture,
                "snapshot": capture.snapshot,
                # An unchanged capture has no screenshot: the one it points at shows its page.
                "thumbnail": thumbnails.get(capture.id)
                or thumbnails.get(capture.snapshot.unchanged_since_id),
                "diff": diff_url(url, capture),
                "memento": reverse(
                    "core:memento", kwargs={"timestamp": capture.timestamp, "url": url}
                ),
            }
        )
    return months
