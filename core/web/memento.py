"""Memento (RFC 7089) for archived URLs: a TimeGate, a TimeMap per URL, and Memento headers on
the snapshot page, spelled as pywb spells them so that Memento tools read Vellum as they read
pywb.

- ``/at/<timestamp>/<url>`` answers 302 to the snapshot page of the sealed capture nearest the
  timestamp (``YYYYMMDDhhmmss``, UTC; shorter is padded: ``2024`` is its first second), the
  earlier of two as near. ``/at/<url>`` is the URL's TimeGate (RFC 7089 §4.1, pattern 2.1):
  nearest the ``Accept-Datetime`` request header (an HTTP date, RFC 7231 §7.1.1.1), or the
  latest capture without one; it says ``Vary: accept-datetime``. Both send a ``Link`` header
  with the original, the TimeGate, the TimeMap and the memento chosen, with its datetime.
- ``/timemap/link/<url>`` lists them all in ``application/link-format`` (RFC 6690): itself
  (``rel="self"``, with ``from`` and ``until``), the TimeGate, the original, then each memento
  oldest first (``rel="memento"; datetime="<RFC 1123 date>"``), one link a line.
- A sealed snapshot's page (the memento) gets ``Memento-Datetime`` and the same ``Link``
  (original, TimeGate, TimeMap): RFC 7089 §2.1.1.

The archived URL is the rest of the path, with the query string (core/web/timeline.py). A URL
never archived is a 404; a URL, timestamp or Accept-Datetime that cannot be read, a 400.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import wraps

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import http_date, parse_http_date
from django.views.decorators.http import require_safe

from core.choices import SnapshotStatus
from core.models import Snapshot
from core.services.captures import (
    capture_nearest,
    latest_moment,
    parse_timestamp,
    url_mementos,
    url_resolve,
)
from core.web.access import readable_snapshots, reader_required
from core.web.timeline import requested_url, unknown_url
from crawls.seeds import InvalidURL

LINK_FORMAT = "application/link-format"


def memento_datetime(moment: datetime) -> str:
    """``moment`` as Memento-Datetime and TimeMaps write it: an RFC 1123 date in GMT."""
    return http_date(moment.timestamp())


@require_safe
@reader_required
def timegate(request: HttpRequest, url: str, timestamp: str | None = None) -> HttpResponse:
    """Redirect (302) to the sealed capture of ``url`` nearest ``timestamp``, else nearest the
    Accept-Datetime header, else the latest."""
    raw = requested_url(request, url)
    try:
        normalized = url_resolve(raw)
    except InvalidURL as error:
        return unknown_url(request, raw, str(error), status=400)
    accept = request.headers.get("Accept-Datetime")
    try:
        if timestamp is not None:
            moment = parse_timestamp(timestamp)
        elif accept:
            moment = datetime.fromtimestamp(parse_http_date(accept), UTC)
        else:
            moment = latest_moment()
    except ValueError as error:
        problem = str(error) if timestamp is not None else f"Accept-Datetime {accept!r}: {error}"
        return unknown_url(request, normalized, problem, status=400)
    snapshot = capture_nearest(url=normalized, moment=moment, within=readable_snapshots(request))
    if snapshot is None:
        return unknown_url(request, normalized)
    memento = request.build_absolute_uri(reverse("core:snapshot", args=[snapshot.pk]))
    response = HttpResponseRedirect(memento)
    links = [*_resource_links(request, normalized), _memento_link(memento, snapshot.captured_at)]
    response["Link"] = ", ".join(links)
    if timestamp is None:
        patch_vary_headers(response, ["accept-datetime"])
    return response


@require_safe
@reader_required
def timemap(request: HttpRequest, url: str) -> HttpResponse:
    """The TimeMap of ``url`` in link format (RFC 7089 §5.1.1), its sealed captures oldest
    first; 404 (plain text) for a URL with none."""
    raw = requested_url(request, url)
    try:
        normalized = url_resolve(raw)
    except InvalidURL as error:
        return HttpResponse(f"{error}\n", status=400, content_type="text/plain; charset=utf-8")
    mementos = url_mementos(url=normalized, within=readable_snapshots(request))
    if not mementos:
        message = f"Vellum holds no sealed capture of {normalized}\n"
        return HttpResponse(message, status=404, content_type="text/plain; charset=utf-8")
    original, gate, itself = _resource_links(request, normalized)
    span = (
        f'; from="{memento_datetime(mementos[0].captured_at)}"'
        f'; until="{memento_datetime(mementos[-1].captured_at)}"'
    )
    links = [
        itself.replace('rel="timemap"', 'rel="self"') + span,
        gate,
        original,
        *(
            _memento_link(
                request.build_absolute_uri(reverse("core:snapshot", args=[capture.id])),
                capture.captured_at,
            )
            for capture in mementos
        ),
    ]
    return HttpResponse(",\n".join(links) + "\n", content_type=LINK_FORMAT)


def memento_headers(view):
    """Decorate the snapshot page: for a sealed snapshot, answer with ``Memento-Datetime`` (when
    its capture started) and a ``Link`` to its original, TimeGate and TimeMap."""

    @wraps(view)
    def wrapper(request: HttpRequest, snapshot_id, *args, **kwargs) -> HttpResponse:
        response = view(request, snapshot_id, *args, **kwargs)
        if response.status_code != 200:
            return response
        snapshot = (
            Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.SEALED)
            .with_captured_at()
            .only("url", "start_ts", "created_at")
            .first()
        )
        if snapshot is not None:
            response["Memento-Datetime"] = memento_datetime(snapshot.captured_at)
            response["Link"] = ", ".join(_resource_links(request, snapshot.url))
        return response

    return wrapper


def _resource_links(request: HttpRequest, url: str) -> tuple[str, str, str]:
    """The links to ``url``'s original, TimeGate and TimeMap, as pywb writes them."""
    gate = request.build_absolute_uri(reverse("core:timegate", kwargs={"url": url}))
    times = request.build_absolute_uri(reverse("core:timemap", kwargs={"url": url}))
    return (
        f'<{url}>; rel="original"',
        f'<{gate}>; rel="timegate"',
        f'<{times}>; rel="timemap"; type="{LINK_FORMAT}"',
    )


def _memento_link(uri: str, moment: datetime) -> str:
    return f'<{uri}>; rel="memento"; datetime="{memento_datetime(moment)}"'
