"""Replay of a snapshot's WACZ in the browser with ReplayWeb.page, on a host of its own.

Replay runs the archived page's own scripts, through ReplayWeb.page's service worker. On the
app's origin those scripts could read its cookies and call its API with the visitor's session,
so replay lives on a separate host, the *replay host*: ``settings.REPLAY_HOST`` (``host``,
``host:port``, or a wildcard ``*.host[:port]``), or, when that is empty and the archive is opened
on a loopback name, ``*.replay.localhost`` on the same port. Browsers resolve every
``*.localhost`` name to the loopback address (RFC 6761, section 6.3) and treat it as a secure
context, which service workers need; those names are a different site from ``127.0.0.1`` and
``localhost``, so the app's host-only cookies are never sent to them.

One snapshot at a time (issue 16): ReplayWeb.page keeps every WACZ it loaded, with its signed
link, in the origin's storage (IndexedDB, Cache Storage) and in its service worker, where any
page replayed on that origin can read them. So, with a wildcard replay host, each snapshot
replays on an origin of its own, ``<snapshot id hex>.<host>``, whose storage no other
snapshot's page can read (the browser's same-origin policy), and which serves only that
snapshot's links. With a single replay host every snapshot shares one origin: its replay page
then answers with ``Clear-Site-Data: "storage"``, so the browser forgets the earlier replays
(their links, collections and service worker) before this one starts; a hostile page still open
in another tab could read a replay opened after it, which the wildcard host rules out.

The replay host has no session: the snapshot page, which checks the reader, hands out a signed
link (django.core.signing, salted, valid ``settings.REPLAY_LINK_MAX_AGE`` seconds) that names
the snapshot; the replay host serves that snapshot's WACZ and ReplayWeb.page's own files, and
nothing else (core/web/middleware.py keeps every other path off it). A link is a capability: whoever
holds it may replay and download that snapshot until it expires.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.http import HttpRequest
from django.http.request import split_domain_port
from django.urls import Resolver404, get_script_prefix, resolve, reverse

TOKEN_SALT = "vellum.replay"
# Loopback names a laptop opens the archive on; they get the default replay host.
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
DEFAULT_LOCAL_REPLAY_HOST = "*.replay.localhost"
WILDCARD = "*."

# What the replay host's own pages, ReplayWeb.page's files and its service worker may load and
# reach: only the replay origin itself ('self'), so that nothing replayed there can send what it
# reads elsewhere by a request (fetch, WebSocket, frames, images, forms). A CSP cannot stop a
# page from navigating away with data in the URL; one origin per snapshot keeps what it could
# read to its own snapshot. ReplayWeb.page needs inline
# styles (its web components), data:/blob: images and media, and WebAssembly in its worker.
REPLAY_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'wasm-unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "media-src 'self' data: blob:",
        "connect-src 'self' data: blob:",
        "frame-src 'self'",
        "worker-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ]
)
# What Vellum's service worker (templates/vellum/replay_sw.js) adds to every page it answers,
# ReplayWeb.page's app page and the replayed pages alike. Archived pages keep running their own
# inline and eval'd scripts (replay is for that), but whatever they load or send stays on the
# replay origin: ReplayWeb.page's own policy for them allows WebSockets to any host.
CONTAINMENT_CSP = "; ".join(
    [
        "default-src 'self' 'unsafe-inline' 'unsafe-eval' 'wasm-unsafe-eval' data: blob:",
        "connect-src 'self' data: blob:",
        "frame-src 'self' data: blob:",
        "object-src 'none'",
        "form-action 'self'",
    ]
)
# A WACZ is data, never a page: opened on its own it runs nothing and loads nothing.
WACZ_CSP = "default-src 'none'; sandbox"
# Sent with a replay page when snapshots share one origin: forget earlier replays first
# (https://www.w3.org/TR/clear-site-data/, "storage": IndexedDB, Cache Storage, Web Storage and
# service worker registrations).
CLEAR_STORAGE = '"storage"'
NOT_OWN_SOURCE = "ReplayWeb.page here replays only this archive's own signed WACZ links."


class ReplayLinkError(Exception):
    """A replay link is malformed, forged, older than REPLAY_LINK_MAX_AGE, or opened on another
    snapshot's replay host; ``str()`` says which."""


def _configured_host() -> str:
    """Return REPLAY_HOST (lower case, maybe ``*.``-prefixed), or the default local one."""
    return settings.REPLAY_HOST.strip().lower() or DEFAULT_LOCAL_REPLAY_HOST


def per_snapshot_hosts() -> bool:
    """Return True when each snapshot replays on a host of its own (a wildcard replay host)."""
    return _configured_host().startswith(WILDCARD)


def replay_host_name() -> str:
    """Return the replay host's name (no port, no ``*.``), lower case: with a wildcard replay
    host, the parent name of every snapshot's host."""
    configured = _configured_host().removeprefix(WILDCARD)
    name, _port = split_domain_port(configured)
    return name or configured


def _request_host_name(request: HttpRequest) -> str:
    name, _port = split_domain_port(request.get_host().lower())
    return name


def is_replay_request(request: HttpRequest) -> bool:
    """Return True when ``request`` was made to the replay host (or, with a wildcard replay
    host, to any name below it)."""
    name, base = _request_host_name(request), replay_host_name()
    return name == base or (per_snapshot_hosts() and name.endswith("." + base))


def host_label(snapshot_id: uuid.UUID) -> str:
    """Return the DNS label naming ``snapshot_id``'s own replay host: its 32 hex digits."""
    return snapshot_id.hex


def host_snapshot_id(request: HttpRequest) -> uuid.UUID | None:
    """Return the snapshot a per-snapshot replay host names (``<hex>.<replay host>``), or None
    on a shared replay host, on the wildcard's parent name, or for a label that is no id."""
    name, base = _request_host_name(request), replay_host_name()
    label = name.removesuffix("." + base)
    if not per_snapshot_hosts() or label == name or "." in label:
        return None
    try:
        return uuid.UUID(hex=label)
    except ValueError:
        return None


def replay_origin(request: HttpRequest, snapshot_id: uuid.UUID) -> str | None:
    """Return the origin (``scheme://host[:port]``) ``snapshot_id`` replays on, for a page served
    by ``request``.

    None when no replay host is configured and the archive is not opened on a loopback name:
    a public host needs a replay host of its own (settings.REPLAY_HOST) and DNS for it.
    """
    configured = settings.REPLAY_HOST.strip().lower()
    if configured:
        host = configured
    else:
        name, port = split_domain_port(request.get_host())
        if name.lower() not in LOOPBACK_HOSTS:
            return None
        host = DEFAULT_LOCAL_REPLAY_HOST + (f":{port}" if port else "")
    if host.startswith(WILDCARD):
        host = host_label(snapshot_id) + host.removeprefix("*")
    return f"{request.scheme}://{host}"


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


def snapshot_id_for_host(request: HttpRequest, token: str) -> uuid.UUID:
    """Return the snapshot id ``token`` names, if ``request``'s replay host may replay it.

    A per-snapshot replay host replays only its own snapshot (and the wildcard's parent name
    none), so a page replayed on one snapshot's origin cannot load another snapshot there.
    Raises ReplayLinkError as ``snapshot_id_from_link`` does, and for a link opened on a
    host that is not its snapshot's.
    """
    snapshot_id = snapshot_id_from_link(token)
    if per_snapshot_hosts() and host_snapshot_id(request) != snapshot_id:
        raise ReplayLinkError("This replay link belongs to another replay host.")
    return snapshot_id


def token_of_source(request: HttpRequest, source: str) -> str:
    """Return the signed token of ``source``, a WACZ URL handed to ReplayWeb.page's app page.

    Only this host's own ``/replay/<token>/snapshot.wacz`` (a path, or an absolute URL on the
    request's own origin) with a valid token for this host is accepted: the app page must not
    load WACZ files from anywhere else. Raises ReplayLinkError saying why not.
    """
    parts = urlsplit(source)
    foreign = parts.netloc and (parts.scheme, parts.netloc) != (request.scheme, request.get_host())
    prefix = get_script_prefix()  # the path is a URL; resolve() wants it without the prefix
    if foreign or parts.query or parts.fragment or not parts.path.startswith(prefix):
        raise ReplayLinkError(NOT_OWN_SOURCE)
    try:
        match = resolve("/" + parts.path.removeprefix(prefix))
    except Resolver404:
        raise ReplayLinkError(NOT_OWN_SOURCE) from None
    if match.view_name != "core:replay_wacz":
        raise ReplayLinkError(NOT_OWN_SOURCE)
    snapshot_id_for_host(request, match.kwargs["token"])
    return match.kwargs["token"]


def replay_url(request: HttpRequest, snapshot_id: uuid.UUID) -> str | None:
    """Return the absolute URL of the snapshot's replay page on its replay host, or None when
    there is no replay host for this request (see ``replay_origin``)."""
    origin = replay_origin(request, snapshot_id)
    if origin is None:
        return None
    return origin + reverse("core:replay_page", args=[sign_link(snapshot_id)])
