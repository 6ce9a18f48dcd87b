"""Serve a snapshot's output files from DATA_DIR, never anything outside its folder, and the
archive's public signing keys to anyone."""

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
    JsonResponse,
)
from django.views.decorators.http import require_safe

from core.folder import signing
from core.models import Snapshot
from core.web.access import reader_required

logger = logging.getLogger(__name__)

# Archived pages are untrusted code: scripts in them must not reach this app's origin.
ARCHIVED_CONTENT_CSP = (
    "sandbox allow-popups allow-popups-to-escape-sandbox; default-src * data: blob:"
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


@reader_required
def snapshot_file(request: HttpRequest, snapshot_id, path: str) -> FileResponse:
    """Return one file of a snapshot, sandboxed so archived scripts cannot act as Vellum."""
    try:
        snapshot = Snapshot.objects.get(pk=snapshot_id)
    except Snapshot.DoesNotExist:
        raise Http404("no such snapshot") from None
    file_path = resolve_snapshot_file(snapshot, path)
    content_type, encoding = mimetypes.guess_type(file_path.name)
    if encoding:  # e.g. a .warc.gz: hand over the bytes, don't let the browser unpack them
        content_type = "application/octet-stream"
    handle = open(file_path, "rb")  # noqa: SIM115 - FileResponse closes it when sent
    response = FileResponse(handle, content_type=content_type)
    response["Content-Security-Policy"] = ARCHIVED_CONTENT_CSP
    response["X-Content-Type-Options"] = "nosniff"
    return response


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
