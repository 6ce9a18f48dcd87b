"""Keep the replay host (core/web/origins.py) apart from the app: no cookies, no app pages; and
keep cookies off the signed view links of archived files (core/web/viewing.py)."""

from __future__ import annotations

from http.cookies import SimpleCookie

from django.http import HttpRequest, HttpResponse, HttpResponseNotFound

from core.web.origins import REPLAY_CSP, is_replay_request
from core.web.viewing import VIEW_PATH_PREFIX

REPLAY_PATH_PREFIX = "/replay/"


class ReplayHostMiddleware:
    """On the replay host, answer only ``/replay/...``, drop cookies both ways and give every
    answer the replay host's Content-Security-Policy (core.web.origins.REPLAY_CSP: nothing loaded
    or reached beyond the replay origin) unless the view set a stricter one; on the app's hosts,
    refuse ``/replay/...`` so archived scripts never run on the app's origin, and drop cookies
    both ways on ``/view/...``, whose signed links alone say what may be read.

    It runs first, so the session and CSRF middleware never see a cookie sent to the replay
    host or to a view link (a cookie set for a parent domain would otherwise reach the replay
    host) and never set one there.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        on_replay_host = is_replay_request(request)
        if on_replay_host != request.path_info.startswith(REPLAY_PATH_PREFIX):
            return _not_here(on_replay_host)
        if not on_replay_host and not request.path_info.startswith(VIEW_PATH_PREFIX):
            return self.get_response(request)
        request.META.pop("HTTP_COOKIE", None)
        request.COOKIES = {}
        response = self.get_response(request)
        response.cookies = SimpleCookie()
        if on_replay_host:
            response.setdefault("Content-Security-Policy", REPLAY_CSP)
        return response


def _not_here(on_replay_host: bool) -> HttpResponseNotFound:
    message = (
        "This host only replays archived pages; open the archive on its own host.\n"
        if on_replay_host
        else "Replays open on the archive's replay host (settings.REPLAY_HOST), never here.\n"
    )
    return HttpResponseNotFound(message, content_type="text/plain; charset=utf-8")
