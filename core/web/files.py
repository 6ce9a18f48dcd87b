"""Serve a snapshot's output files from DATA_DIR, never anything outside its folder: to a reader
under ``/archive/<id>/`` (downloads, the admin's links), and to the snapshot page's sandboxed
frames under a signed, cookie-less ``/view/<token>/`` (core/web/viewing.py); and the archive's
public signing keys to anyone."""

from __future__ import annotations

import logging
import mimetypes
from pathlib import Path

from django.conf import settings
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotFound,
    HttpResponseRedirect,
    HttpResponseServerError,
    JsonResponse,
)
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_safe

from core.folder import signing
from core.folder.manifest import SIGNATURE_NAME
from core.folder.revisits import RevisitError
from core.folder.wacz import PackagingError
from core.models import Snapshot
from core.services.dedup import has_replay_wacz, replay_source, snapshot_replay_wacz
from core.web.access import readable_snapshots, reader_required
from core.web.viewing import (
    PDF_TYPE,
    ViewLinkError,
    is_document,
    sign_view_link,
    view_csp,
    view_link_snapshot_id,
    view_url,
)

logger = logging.getLogger(__name__)

# Archived files are untrusted code: scripts in them must not reach this app's origin, and
# opening one never fetches from the live web. Only what is not a document is served here
# (documents go to their signed view, core/web/viewing.py); a PDF is not sandboxed, since
# Chromium's viewer refuses a sandboxed document.
ARCHIVED_CONTENT_CSP = (
    "sandbox allow-popups allow-popups-to-escape-sandbox; default-src 'self' data: blob:; "
    "script-src 'none'; connect-src 'none'; object-src 'none'; form-action 'none'"
)
PDF_CSP = (
    "default-src 'self' data: blob:; script-src 'none'; connect-src 'none'; form-action 'none'"
)


def resolve_snapshot_file(snapshot: Snapshot, relative: str) -> Path:
    """Return the real path of ``relative`` inside the snapshot folder.

    Raises Http404 when it does not exist (or cannot: a name with a NUL byte), is not a file,
    or resolves (through ``..`` or a symbolic link) to anything outside
    ``DATA_DIR/archive/<id>/``.
    """
    root = snapshot.output_dir.resolve()
    try:
        path = (root / relative).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):  # ValueError: a NUL byte, which no name holds
        raise Http404("no such file in this snapshot") from None
    if (
        not path.is_relative_to(root)
        or not path.is_relative_to(settings.DATA_DIR)
        or not path.is_file()
    ):
        raise Http404("no such file in this snapshot")
    return path


def file_type(path: Path) -> str | None:
    """Return the Content-Type to serve ``path`` with (from its name; None when unknown).

    A compressed file (a ``.warc.gz``) is ``application/octet-stream``: the browser must not
    unpack it. Nor is the manifest's signature what its ``.sig`` suggests to mimetypes (an
    OpenPGP signature, RFC 3156): it is 64 raw bytes of Ed25519 (core/folder/signing.py).
    Text that Vellum's extractors write (``.txt``, ``.json``) is UTF-8.
    """
    content_type, encoding = mimetypes.guess_type(path.name)
    if encoding or path.name == SIGNATURE_NAME:
        return "application/octet-stream"
    if content_type in ("text/plain", "application/json"):
        return f"{content_type}; charset=utf-8"
    return content_type


@require_safe
@reader_required
def snapshot_file(request: HttpRequest, snapshot_id, path: str) -> HttpResponse:
    """Return one file of a snapshot, sandboxed so archived scripts cannot act as Vellum.

    A document (HTML, SVG: ``viewing.is_document``) is a redirect (302) to its signed view
    instead, where its own requisites load and nothing else does. 404 for an unknown snapshot,
    one the reader may not read (core/web/access.py), or a path that is not one of its files.
    """
    try:
        snapshot = readable_snapshots(request).get(pk=snapshot_id)
    except Snapshot.DoesNotExist:
        raise Http404("no such snapshot") from None
    file_path = resolve_snapshot_file(snapshot, path)
    content_type = file_type(file_path)
    if is_document(content_type):
        return HttpResponseRedirect(view_url(sign_view_link(snapshot.pk), path))
    response = _file_response(file_path, content_type)
    policy = PDF_CSP if content_type == PDF_TYPE else ARCHIVED_CONTENT_CSP
    response["Content-Security-Policy"] = policy
    return response


@require_safe
@reader_required
def snapshot_wacz(request: HttpRequest, snapshot_id) -> HttpResponse:
    """Download the WACZ that replays the snapshot, as replay loads it (core/services/dedup.py
    ``snapshot_replay_wacz``): its own ``snapshot.wacz``; for a capture whose WARCs hold
    revisit records (finalizing stores no WACZ of those: it could not replay alone), one made
    whole from the records they refer to (cached); for a capture found unchanged, that of the
    capture it found unchanged (``replay_source``), when the reader may read that one too.
    The attachment is named after the capture it packages: ``<id>.wacz``.

    404 for an unknown snapshot, one the reader may not read, or one without a WACZ; 500
    saying why when the whole one cannot be made or read.
    """
    readable = readable_snapshots(request)
    try:
        snapshot = readable.select_related("unchanged_since").get(pk=snapshot_id)
    except Snapshot.DoesNotExist:
        raise Http404("no such snapshot") from None
    source = replay_source(snapshot)  # itself, but for a capture found unchanged
    hidden = source.pk != snapshot.pk and not readable.filter(pk=source.pk).exists()
    if hidden or not has_replay_wacz(source):
        raise Http404("this snapshot has no WACZ")
    try:
        path = snapshot_replay_wacz(snapshot=source)
        handle = open(path, "rb")  # noqa: SIM115 - FileResponse closes it
    except (RevisitError, PackagingError, OSError) as error:
        logger.error("snapshot %s: no WACZ to download: %s", snapshot.pk, error)
        return HttpResponseServerError(
            f"This snapshot's WACZ cannot be made: {error}\n",
            content_type="text/plain; charset=utf-8",
        )
    response = FileResponse(
        handle, content_type="application/wacz", as_attachment=True, filename=f"{source.pk}.wacz"
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_safe
@xframe_options_sameorigin  # the snapshot page frames it
def view_file(request: HttpRequest, token: str, path: str) -> HttpResponse:
    """Return one file of the snapshot a signed view link names, to anyone who holds the link
    (core/web/viewing.py), with the policy that keeps its document to that snapshot's files.

    404 (plain text) for a forged or expired link, an unknown snapshot, or a path that is not
    one of its files (``..``, a symbolic link out: resolve_snapshot_file).
    """
    try:
        snapshot_id = view_link_snapshot_id(token)
    except ViewLinkError as error:
        return _not_found(str(error))
    snapshot = Snapshot.objects.filter(pk=snapshot_id).first()
    if snapshot is None:
        return _not_found("This snapshot is no longer in the archive.")
    try:
        file_path = resolve_snapshot_file(snapshot, path)
    except Http404:
        return _not_found("This snapshot has no such file.")
    content_type = file_type(file_path)
    response = _file_response(file_path, content_type)
    response["Content-Security-Policy"] = view_csp(request, token, content_type)
    response["Referrer-Policy"] = "no-referrer"  # a followed link must not carry the token
    return response


def _file_response(file_path: Path, content_type: str | None) -> FileResponse:
    handle = open(file_path, "rb")  # noqa: SIM115 - FileResponse closes it when sent
    response = FileResponse(handle, content_type=content_type)
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _not_found(message: str) -> HttpResponseNotFound:
    return HttpResponseNotFound(message + "\n", content_type="text/plain; charset=utf-8")


@require_safe
def public_key(request: HttpRequest) -> HttpResponse:
    """Return the archive's current public signing key as PEM text, to anyone.

    Answers 404 (plain text) while there is no key yet, 503 when the key cannot be read.
    """
    try:
        pem = signing.public_key_pem()
    except signing.SigningKeyMissingError:
        return _no_signing_key()
    except signing.SigningKeyError as error:
        return _unusable_signing_key(error)
    response = HttpResponse(pem, content_type="application/x-pem-file")
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_safe
def public_keys(request: HttpRequest) -> HttpResponse:
    """Return every trusted public key as JSON ``{"current": fp or null, "keys": {fp: PEM}}``.

    Answers 404 (plain text) while there is no key at all, 503 when a key cannot be read.
    """
    try:
        keys = signing.trusted_public_keys()
        if not keys:
            return _no_signing_key()
        current = signing.key_fingerprint(signing.public_key_pem())
    except signing.SigningKeyMissingError:
        current = None  # only retired keys are left: older snapshots can still be checked
    except signing.SigningKeyError as error:
        return _unusable_signing_key(error)
    return JsonResponse({"current": current, "keys": keys})


def _unusable_signing_key(error: signing.SigningKeyError) -> HttpResponse:
    # Logged for whoever runs the archive (a key readable only by the user who ran init, a
    # corrupt retired key); the visitor learns only that the key is unavailable for now.
    logger.error("Cannot serve the public signing key: %s", error)
    return HttpResponse(
        "This archive's signing key cannot be read right now; its operator has been told.\n",
        status=503,
        content_type="text/plain; charset=utf-8",
    )


def _no_signing_key() -> HttpResponseNotFound:
    return HttpResponseNotFound(
        "This archive has no signing key yet (manage.py init creates one).\n",
        content_type="text/plain; charset=utf-8",
    )
