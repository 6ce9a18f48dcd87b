"""The replay host's pages (core/web/origins.py): a snapshot's replay page, its WACZ, and
ReplayWeb.page's own files. None of them reads a session: a signed link says which snapshot, and
a per-snapshot replay host serves only its own snapshot's links. core/web/middleware.py adds the
replay host's Content-Security-Policy (core.web.origins.REPLAY_CSP) to every answer; the worker adds
core.web.origins.CONTAINMENT_CSP to the pages it answers itself."""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotFound,
    HttpResponseServerError,
)
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_safe

from core.folder.revisits import RevisitError
from core.folder.wacz import PackagingError
from core.models import Snapshot
from core.services.dedup import has_replay_wacz, snapshot_replay_wacz
from core.web.origins import (
    CLEAR_STORAGE,
    CONTAINMENT_CSP,
    WACZ_CSP,
    ReplayLinkError,
    per_snapshot_hosts,
    snapshot_id_for_host,
    token_of_source,
)

logger = logging.getLogger(__name__)

# ReplayWeb.page's front end and its service worker, served under /replay/lib/ and imported by
# Vellum's own /replay/sw.js. A worker's widest scope is the folder its script is served from,
# so ReplayWeb.page's bare worker could never take /replay/ over from Vellum's (and a request to
# register one of these as a worker is refused anyway). URL name -> file in REPLAY_ASSETS_DIR.
REPLAY_ASSETS = {"ui.js": "ui.js", "rwp-sw.js": "sw.js"}


@require_safe
def replay_page(request: HttpRequest, token: str) -> HttpResponse:
    """Replay the snapshot a signed link names, from its WACZ (and nothing else), with
    ReplayWeb.page.

    Answers 404 for a forged or expired link, a link opened on another snapshot's replay host,
    and a snapshot without a WACZ. On a shared replay host the answer also clears the origin's
    stored state (core/web/origins.py, "one snapshot at a time").
    """
    snapshot, problem = _linked_snapshot(request, token)
    if problem:
        return _not_found(problem)
    context = {
        "snapshot": snapshot,
        "source": reverse("core:replay_wacz", args=[token]),
        "replay_base": reverse("core:replay_app"),  # where sw.js is: the worker's scope
        "timestamp": snapshot.created_at.strftime("%Y%m%d%H%M%S"),
    }
    response = render(request, "vellum/replay.html", context)
    if not per_snapshot_hosts():
        response["Clear-Site-Data"] = CLEAR_STORAGE
    return response


@require_safe
@xframe_options_sameorigin  # the replay page frames it
def replay_app(request: HttpRequest) -> HttpResponse:
    """Return ReplayWeb.page's app page, which the replay page frames (its service worker
    serves this page itself once it runs; this answers the first load, before it does).

    Its ``source`` must be this host's own signed ``/replay/<token>/snapshot.wacz``: anything
    else (another site's WACZ, another snapshot's host, no source) is a 400 saying why.
    """
    try:
        token_of_source(request, request.GET.get("source", ""))
    except ReplayLinkError as error:
        return HttpResponseBadRequest(str(error) + "\n", content_type="text/plain; charset=utf-8")
    return render(request, "vellum/replay_app.html")


@require_safe
def replay_wacz(request: HttpRequest, token: str) -> HttpResponse:
    """Return the WACZ of the snapshot a signed link names (404 for a bad link, a link of
    another snapshot's replay host, or no WACZ).

    A snapshot whose WARCs hold revisit records is served a WACZ made whole from the records
    they refer to (core/services/dedup.py): ReplayWeb.page finds a revisit's payload only in
    what it has loaded, and loading the other snapshots' WACZ files here would hand this
    replay host their data too. A 500 says why when that WACZ cannot be made.
    """
    snapshot, problem = _linked_snapshot(request, token)
    if problem:
        return _not_found(problem)
    try:
        path = snapshot_replay_wacz(snapshot=snapshot)
    except (RevisitError, PackagingError) as error:
        logger.error("snapshot %s cannot be replayed: %s", snapshot.pk, error)
        return HttpResponseServerError(
            f"This snapshot cannot be replayed: {error}\n", content_type="text/plain; charset=utf-8"
        )
    handle = open(path, "rb")  # noqa: SIM115 - FileResponse closes it
    response = FileResponse(handle, content_type="application/wacz")
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = WACZ_CSP
    return response


@require_safe
def replay_asset(request: HttpRequest, name: str) -> HttpResponse:
    """Return ReplayWeb.page's ``ui.js`` or its worker (``rwp-sw.js``) from
    settings.REPLAY_ASSETS_DIR; 404 when npm has not installed it, and 404 to a browser that
    asks for it to register as a service worker (``Service-Worker: script``, W3C Service Workers
    §2.4): only Vellum's /replay/sw.js may be one, so a replayed page cannot install a worker
    that answers without Vellum's containment policy."""
    if request.headers.get("Service-Worker") == "script":
        return _not_found("Only /replay/sw.js may run as this host's service worker.")
    path = settings.REPLAY_ASSETS_DIR / REPLAY_ASSETS.get(name, "-")
    if not path.is_file():
        raise Http404("no such replay file (npm ci installs ReplayWeb.page)")
    response = FileResponse(open(path, "rb"), content_type="text/javascript")  # noqa: SIM115
    response["Cache-Control"] = "no-cache"  # a new Vellum release brings a new worker at once
    return response


@require_safe
def replay_worker(request: HttpRequest) -> HttpResponse:
    """Return the replay host's service worker (templates/vellum/replay_sw.js): ReplayWeb.page's
    worker, whose answers to pages, frames and workers also carry core.web.origins.CONTAINMENT_CSP.

    The answer itself carries REPLAY_CSP too (core/web/middleware.py), which is the policy the
    worker's own fetches obey: it loads WACZ files from the replay origin only.
    """
    response = render(
        request, "vellum/replay_sw.js", {"csp": CONTAINMENT_CSP}, content_type="text/javascript"
    )
    response["Cache-Control"] = "no-cache"
    return response


def _linked_snapshot(request: HttpRequest, token: str) -> tuple[Snapshot | None, str]:
    """Return (the snapshot a link names, "") or (None, why it cannot be replayed here)."""
    try:
        snapshot_id = snapshot_id_for_host(request, token)
    except ReplayLinkError as error:
        return None, str(error)
    snapshot = Snapshot.objects.filter(pk=snapshot_id).first()
    if snapshot is None or not has_replay_wacz(snapshot):
        return None, "This snapshot has nothing to replay (no WACZ)."
    return snapshot, ""


def _not_found(message: str) -> HttpResponseNotFound:
    return HttpResponseNotFound(message + "\n", content_type="text/plain; charset=utf-8")
