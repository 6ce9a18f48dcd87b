"""Replay of a snapshot's WACZ in the browser with ReplayWeb.page, on a host of its own.

Replay runs the archived page's own scripts, through ReplayWeb.page's service worker. On the
app's origin those scripts could read its cookies and call its API with the visitor's session,
so replay lives on a separate host, the *replay host*: ``settings.REPLAY_HOST`` (``host`` or
``host:port``), or, when that is empty and the archive is opened on a loopback name,
``replay.localhost`` on the same port. Browsers resolve every ``*.localhost`` name to the
loopback address (RFC 6761, section 6.3) and treat it as a secure context, which service
workers need; ``replay.localhost`` is a different site from ``127.0.0.1`` and ``localhost``,
so the app's host-only cookies are never sent to it.

The replay host has no session: the snapshot page, which checks the reader, hands out a signed
link (django.core.signing, salted, valid ``settings.REPLAY_LINK_MAX_AGE`` seconds) that names
the snapshot; the replay host serves that snapshot's WACZ and ReplayWeb.page's own files, and
nothing else (core/middleware.py keeps every other path off it).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core import signing
from django.http import HttpRequest
from django.http.request import split_domain_port
from django.urls import reverse

TOKEN_SALT = "vellum.replay"
# Loopback names a laptop opens the archive on; they get the default replay host.
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
DEFAULT_LOCAL_REPLAY_NAME = "replay.localhost"


class ReplayLinkError(Exception):
    """A replay link is malformed, forged, or older than REPLAY_LINK_MAX_AGE; ``str()`` says
    which."""


def replay_host_name() -> str:
    """Return the host name (no port) whose requests are replay requests, lower case."""
    configured = settings.REPLAY_HOST.strip().lower()
    if not configured:
        return DEFAULT_LOCAL_REPLAY_NAME
    name, _port = split_domain_port(configured)
    return name or configured


def is_replay_request(request: HttpRequest) -> bool:
    """Return True when ``request`` was made to the replay host."""
    name, _port = split_domain_port(request.get_host().lower())
    return name == replay_host_name()


def replay_origin(request: HttpRequest) -> str | None:
    """Return the replay host's origin (``scheme://host[:port]``) for a page served by ``request``.

    None when no replay host is configured and the archive is not opened on a loopback name:
    a public host needs a replay host of its own (settings.REPLAY_HOST) and DNS for it.
    """
    scheme = request.scheme
    if settings.REPLAY_HOST.strip():
        return f"{scheme}://{settings.REPLAY_HOST.strip()}"
    name, port = split_domain_port(request.get_host())
    if name.lower() not in LOOPBACK_HOSTS:
        return None
    return f"{scheme}://{DEFAULT_LOCAL_REPLAY_NAME}{f':{port}' if port else ''}"


def sign_link(snapshot_id: uuid.UUID) -> str:
    """Return a URL-safe token naming ``snapshot_id``, stamped with the time it was made."""
    return signing.dumps(str(snapshot_id), salt=TOKEN_SALT, compress=False)


def snapshot_id_from_link(token: str) -> uuid.UUID:
    """Return the snapshot id a token made by ``sign_link`` names.

    Raises ReplayLinkError when the signature does not match, the token is malformed, or it
    is older than settings.REPLAY_LINK_MAX_AGE seconds.
    """
    try:
        value = signing.loads(token, salt=TOKEN_SALT, max_age=settings.REPLAY_LINK_MAX_AGE)
        return uuid.UUID(value)
    except signing.SignatureExpired:
        raise ReplayLinkError(
            "This replay link has expired: open the snapshot's page again for a new one."
        ) from None
    except (signing.BadSignature, ValueError, TypeError):
        raise ReplayLinkError("This replay link is not valid.") from None


def replay_url(request: HttpRequest, snapshot_id: uuid.UUID) -> str | None:
    """Return the absolute URL of the snapshot's replay page on the replay host, or None when
    there is no replay host for this request (see ``replay_origin``)."""
    origin = replay_origin(request)
    if origin is None:
        return None
    return origin + reverse("core:replay_page", args=[sign_link(snapshot_id)])
