"""Signed, cookie-less links to one snapshot's files, for the sandboxed frames of its page.

An archived HTML file is untrusted code, so it is served with ``Content-Security-Policy:
sandbox``: its document has an opaque origin, and the browser asks for its images and styles
without the app's session cookie. Under ``/archive/<id>/`` (core/web/files.py), which asks
for a signed-in reader, they met the sign-in page; and whatever the capture did not save was
fetched from the live site. So the snapshot page hands its frames links under
``/view/<token>/``: the token (django.core.signing, salted with VIEW_SALT, valid
settings.REPLAY_LINK_MAX_AGE seconds) names one snapshot, and every path below it is one of
that snapshot's files (core.web.files.resolve_snapshot_file). The relative links of archived
HTML (wget's folders, one per host; SingleFile needs none) resolve below the same prefix.

Each answer's policy (``view_csp``) lets the document load only from that one prefix,
``data:`` and ``blob:`` (CSP3 source expressions may name a path: ``host:port/view/<token>/``
matches that folder and everything below it, where ``'self'`` would match the whole app), runs
no script, connects nowhere and submits no form: never another snapshot's files, never the
app's pages, never the live web.

A link is a capability, as a replay link is (core/web/origins.py): only pages that checked the
reader hand one out, and whoever holds it may read that snapshot's files until it expires.
Cookies are kept off the path both ways (core/web/middleware.py), so no answer depends on who
asks.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core import signing
from django.http import HttpRequest
from django.http.request import split_domain_port
from django.urls import reverse

VIEW_SALT = "vellum.view"
VIEW_PATH_PREFIX = "/view/"
# Content types a browser renders as a document that could load something or run a script.
DOCUMENT_TYPES = frozenset({"text/html", "application/xhtml+xml", "image/svg+xml", "text/xml"})
# Chromium's PDF viewer refuses a sandboxed document (a plugin), so a PDF gets no sandbox; it is
# never parsed as HTML (its type is sent with nosniff) and its viewer runs no page script.
PDF_TYPE = "application/pdf"


class ViewLinkError(Exception):
    """A view link is malformed, forged or older than REPLAY_LINK_MAX_AGE; ``str()`` says
    which."""


def sign_view_link(snapshot_id: uuid.UUID) -> str:
    """Return a URL-safe token naming ``snapshot_id``, stamped with the time it was made."""
    return signing.dumps(str(snapshot_id), salt=VIEW_SALT, compress=False)


def view_link_snapshot_id(token: str) -> uuid.UUID:
    """Return the snapshot id a token made by ``sign_view_link`` names.

    Raises ViewLinkError when the signature does not match, the token is malformed, or it is
    older than settings.REPLAY_LINK_MAX_AGE seconds.
    """
    try:
        return uuid.UUID(signing.loads(token, salt=VIEW_SALT, max_age=settings.REPLAY_LINK_MAX_AGE))
    except signing.SignatureExpired:
        raise ViewLinkError(
            "This link to an archived file has expired: open the snapshot's page again."
        ) from None
    except (signing.BadSignature, ValueError, TypeError, AttributeError):
        raise ViewLinkError("This link to an archived file is not valid.") from None


def view_url(token: str, relative: str) -> str:
    """Return the path that serves ``relative`` (a path in the snapshot folder) under
    ``token``."""
    return reverse("core:view_file", args=[token, relative])


def view_prefix(token: str) -> str:
    """Return the path under which ``token``'s files are served, ending in ``/``."""
    return view_url(token, "-").removesuffix("-")


def _own_source(request: HttpRequest, token: str) -> str:
    """Return the CSP source expression for ``token``'s folder on this host: ``host[:port]`` and
    the path, without a scheme (it then matches the document's own scheme, CSP3 §6.7.2.8).
    An IPv6 literal host cannot be written in a source expression: ``'self'`` then (the whole
    app's origin, still never the live web)."""
    host = request.get_host()
    name, _port = split_domain_port(host)
    if not name or host.startswith("["):
        return "'self'"
    return host + view_prefix(token)


def view_csp(request: HttpRequest, token: str, content_type: str | None) -> str:
    """Return the Content-Security-Policy of a file served under ``token`` as
    ``content_type``: a sandbox without scripts, whose loads stay in the token's folder
    (``_own_source``), ``data:`` and ``blob:``; a PDF the same without the sandbox."""
    own = _own_source(request, token)
    directives = [
        f"default-src {own} data: blob:",
        # Inline styles run nothing and load only what default-src allows; SingleFile's copy
        # of a page is all inline styles.
        f"style-src {own} data: blob: 'unsafe-inline'",
        "script-src 'none'",
        "connect-src 'none'",
        "object-src 'none'",
        "worker-src 'none'",
        f"base-uri {own}",
        "form-action 'none'",
        "frame-ancestors 'self'",
    ]
    if content_type != PDF_TYPE:
        directives.insert(0, "sandbox allow-popups allow-popups-to-escape-sandbox")
    return "; ".join(directives)


def is_document(content_type: str | None) -> bool:
    """True when a browser would render ``content_type`` as a document that loads requisites
    (HTML, XHTML, SVG, XML)."""
    return content_type in DOCUMENT_TYPES
