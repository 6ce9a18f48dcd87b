"""The admin's export actions: selected snapshots (or a crawl's) as one ZIP download holding a
BagIt bag or their WACZ files, made by core/services/export.py with the same fixity checks as
``manage.py export``.

The export is made while the request waits, so the admin offers it for at most
ADMIN_EXPORT_LIMIT snapshots; larger exports belong to ``manage.py export``, which shows
progress and writes where it is told. The ZIP is written in a temporary folder under DATA_DIR
and removed as soon as it is open for sending (the open file stays readable until sent).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.http import FileResponse, HttpRequest
from django.utils import timezone

from core.models import Snapshot
from core.services.export import ExportError, ExportReport, Selection, export_bagit, export_wacz

ADMIN_EXPORT_LIMIT = 200
EXPORTERS = {"bagit": export_bagit, "wacz": export_wacz}


def export_download(
    modeladmin,
    request: HttpRequest,
    snapshots: list[Snapshot],
    *,
    format: str,
    identifier: str | None = None,
    crawl=None,
) -> FileResponse | None:
    """Export ``snapshots`` (``format``: "bagit" or "wacz") and return the ZIP as a download
    named ``vellum-<identifier>-<format>.zip``; or None, with a message saying why, when there
    are too many, none could be exported, or the export failed (disk full, bagit refusing)."""
    if len(snapshots) > ADMIN_EXPORT_LIMIT:
        modeladmin.message_user(
            request,
            f"{len(snapshots)} snapshots are more than the admin exports at once "
            f"({ADMIN_EXPORT_LIMIT}): use manage.py export.",
            level=messages.ERROR,
        )
        return None
    identifier = identifier or f"selection-{timezone.now():%Y%m%dT%H%M%SZ}"
    selection = Selection(identifier=identifier, snapshots=snapshots, crawl=crawl)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=settings.DATA_DIR))
    try:
        report = EXPORTERS[format](selection, work / identifier)
        if not report.exported:
            modeladmin.message_user(request, _nothing_exported(report), level=messages.WARNING)
            return None
        archive = shutil.make_archive(str(work / identifier), "zip", work, identifier)
        handle = open(archive, "rb")  # noqa: SIM115 - FileResponse closes it when sent
    except (ExportError, OSError) as error:
        modeladmin.message_user(request, f"Export failed: {error}", level=messages.ERROR)
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    name = f"vellum-{identifier}-{format}.zip"
    return FileResponse(handle, as_attachment=True, filename=name, content_type="application/zip")


def _nothing_exported(report: ExportReport) -> str:
    why = report.left_out_summary() or "nothing selected"
    return f"Nothing to export: {why} (only sealed snapshots that pass their fixity check are)."
