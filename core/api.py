"""REST endpoints for snapshots and archive results (archive/api.py mounts them at
``/api/v1/``): list and filter, get one with its outputs, retry, re-archive, remove; and every
capture of one URL (its timeline). A user who is not staff but holds ``crawls.add_crawl``
reads only the snapshots (and their results) of the crawls they added
(SnapshotQuerySet.visible_to); changes stay with staff."""

# No ``from __future__ import annotations``: django-ninja reads these annotations at run time
# (through its pagination decorator, where postponed ones cannot be resolved).

import uuid
from datetime import datetime

from django.core.exceptions import ValidationError
from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status
from ninja.pagination import paginate

from archive.pagination import BoundedPageNumberPagination
from core.folder.manifest import MANIFEST_NAME
from core.models import ArchiveResult, Snapshot
from core.services.captures import Capture, url_captures, url_resolve
from core.services.rearchive import snapshot_rearchive, snapshot_retry_failed
from core.services.removal import snapshot_remove
from core.web.permissions import model_perm, staff
from core.web.timeline import diff_url
from crawls.seeds import InvalidURL

router = Router()
PAGE_SIZE = 50
# The largest id (a BigAutoField): a larger number in a filter overflows SQLite's INTEGER.
MAX_ID = 2**63 - 1


class ResultOut(Schema):
    id: int
    snapshot_id: uuid.UUID
    extractor: str
    status: str
    behaviour: str
    attempts: int
    output: str
    output_size: int = Field(description="Bytes written.")
    files: list[str] = Field(description="URLs of the files it wrote.")
    error: str
    cmd_version: str
    start_ts: datetime | None
    end_ts: datetime | None

    @staticmethod
    def resolve_files(result: ArchiveResult) -> list[str]:
        return [file_url(result.snapshot_id, path) for path in result.output_files]


class SnapshotOut(Schema):
    id: uuid.UUID
    crawl_id: int
    url: str
    title: str
    status: str
    depth: int
    tags: list[str]
    created_at: datetime
    start_ts: datetime | None
    end_ts: datetime | None
    error: str

    @staticmethod
    def resolve_tags(snapshot: Snapshot) -> list[str]:
        return [tag.name for tag in snapshot.tags.all()]


class SnapshotDetail(SnapshotOut):
    manifest_sha256: str
    signed_by: str
    unchanged_since: uuid.UUID | None = Field(
        description="The capture whose page bytes this one found again (its crawl kept only "
        "changes): this one holds a revisit of it, not a copy.",
    )
    manifest: str | None = Field(description="URL of the signed checksum manifest, once sealed.")
    results: list[ResultOut]

    @staticmethod
    def resolve_unchanged_since(snapshot: Snapshot) -> uuid.UUID | None:
        return snapshot.unchanged_since_id

    @staticmethod
    def resolve_manifest(snapshot: Snapshot) -> str | None:
        return file_url(snapshot.pk, MANIFEST_NAME) if snapshot.manifest_sha256 else None

    @staticmethod
    def resolve_results(snapshot: Snapshot) -> list[ArchiveResult]:
        return list(snapshot.results.order_by("pk"))


class CaptureLinks(Schema):
    snapshot: str = Field(description="The capture's page (its Memento).")
    api: str = Field(description="The snapshot in this API, with its results.")
    memento: str = Field(description="/at/<timestamp>/<url>: this capture by its time.")
    timeline: str = Field(description="The URL's timeline page.")
    diff: str | None = Field(description="What changed since the previous sealed capture.")


class CaptureOut(Schema):
    id: uuid.UUID
    crawl_id: int
    url: str
    timestamp: str = Field(description="When its capture started: YYYYMMDDhhmmss, UTC.")
    captured_at: datetime
    status: str
    size: int = Field(description="Bytes its results wrote.")
    content_digest: str = Field(
        description="sha256:<hex> of its readable text, whitespace-normalized; '' without text."
    )
    unchanged_since: datetime | None = Field(
        description="When the run of captures with this same text began (None: it changed)."
    )
    previous: uuid.UUID | None = Field(description="The sealed capture before it.")
    links: CaptureLinks


class SnapshotFilters(Schema):
    crawl: int | None = Field(None, ge=1, le=MAX_ID)
    status: str | None = None
    tag: str | None = None
    url_contains: str | None = None


class ResultFilters(Schema):
    snapshot: uuid.UUID | None = None
    extractor: str | None = None
    status: str | None = None


class RetryIn(Schema):
    extractor: str | None = Field(None, description="Only this extractor's failures.")


class Retried(Schema):
    queued: int


def file_url(snapshot_id, path: str) -> str:
    """The URL that serves one file of a snapshot (core/web/files.py)."""
    return reverse("core:snapshot_file", args=[snapshot_id, path])


def _snapshot(snapshot_id: uuid.UUID, user=None) -> Snapshot:
    """The snapshot ``snapshot_id``, among those ``user`` may read (None: any). Raises
    Snapshot.DoesNotExist naming it (a 404)."""
    snapshots = Snapshot.objects.prefetch_related("tags")
    if user is not None:
        snapshots = snapshots.visible_to(user)
    try:
        return snapshots.get(pk=snapshot_id)
    except Snapshot.DoesNotExist:
        raise Snapshot.DoesNotExist(f"no snapshot {snapshot_id}") from None


@router.get(
    "/snapshots",
    response=list[SnapshotOut],
    summary="List snapshots, newest first",
    auth=staff(Snapshot, "view", own=True),
)
@paginate(BoundedPageNumberPagination, page_size=PAGE_SIZE)
def list_snapshots(request, filters: Query[SnapshotFilters]):
    snapshots = Snapshot.objects.visible_to(request.auth).prefetch_related("tags")
    if filters.crawl is not None:
        snapshots = snapshots.filter(crawl_id=filters.crawl)
    if filters.status:
        snapshots = snapshots.filter(status=filters.status)
    if filters.tag:
        snapshots = snapshots.filter(tags__name=filters.tag)
    if filters.url_contains:
        snapshots = snapshots.filter(url__icontains=filters.url_contains)
    return snapshots


@router.get(
    "/snapshots/{snapshot_id}",
    response=SnapshotDetail,
    summary="One snapshot",
    auth=staff(Snapshot, "view", own=True),
)
def get_snapshot(request, snapshot_id: uuid.UUID):
    return _snapshot(snapshot_id, request.auth)


@router.post(
    "/snapshots/{snapshot_id}/retry",
    response=Retried,
    summary="Retry its failures",
    auth=staff(Snapshot, "change"),
)
def retry(request, snapshot_id: uuid.UUID, body: RetryIn | None = None):
    snapshot = _snapshot(snapshot_id)
    extractor = body.extractor if body else None
    return {"queued": snapshot_retry_failed(snapshot=snapshot, extractor=extractor)}


@router.post(
    "/snapshots/{snapshot_id}/rearchive",
    response=SnapshotDetail,
    summary="Archive it again (the earlier run is kept in history/)",
    auth=staff(Snapshot, "change"),
)
def rearchive(request, snapshot_id: uuid.UUID):
    snapshot_rearchive(snapshot=_snapshot(snapshot_id))
    return _snapshot(snapshot_id)


@router.delete(
    "/snapshots/{snapshot_id}",
    response={204: None},
    summary="Remove a snapshot",
    auth=staff(Snapshot, "delete"),
)
def remove(request, snapshot_id: uuid.UUID, delete_files: bool = False):
    _snapshot(snapshot_id)
    snapshot_remove(snapshot_id=snapshot_id, delete_files=delete_files)
    return Status(204, None)


@router.get(
    "/results",
    response=list[ResultOut],
    summary="List archive results",
    auth=staff(ArchiveResult, "view", own=True),
)
@paginate(BoundedPageNumberPagination, page_size=PAGE_SIZE)
def list_results(request, filters: Query[ResultFilters]):
    results = ArchiveResult.objects.order_by("-pk")
    if not request.auth.has_perm(model_perm(ArchiveResult, "view")) or not request.auth.is_staff:
        results = results.filter(snapshot__in=Snapshot.objects.visible_to(request.auth))
    if filters.snapshot:
        results = results.filter(snapshot_id=filters.snapshot)
    if filters.extractor:
        results = results.filter(extractor=filters.extractor)
    if filters.status:
        results = results.filter(status=filters.status)
    return results


@router.get(
    "/urls/{path:url}/captures",
    response=list[CaptureOut],
    summary="Every capture of one URL, newest first",
    description="The URL is the rest of the path, normalized as seeds are (a ``?`` in it "
    "percent-encoded as ``%3F``: this endpoint's own query string is its page); 404 when it "
    "was never archived.",
    auth=staff(Snapshot, "view", own=True),
)
@paginate(BoundedPageNumberPagination, page_size=PAGE_SIZE)
def list_url_captures(request, url: str):
    try:
        normalized = url_resolve(url)
    except InvalidURL as error:
        raise ValidationError(str(error)) from None
    captures = url_captures(url=normalized, within=Snapshot.objects.visible_to(request.auth))
    if not captures:
        raise Snapshot.DoesNotExist(f"no capture of {normalized}")
    return [_capture_out(capture, normalized) for capture in captures]


def _capture_out(capture: Capture, url: str) -> dict:
    snapshot = capture.snapshot
    return {
        "id": capture.id,
        "crawl_id": snapshot.crawl_id,
        "url": snapshot.url,
        "timestamp": capture.timestamp,
        "captured_at": capture.captured_at,
        "status": capture.status,
        "size": capture.size,
        "content_digest": capture.content_digest,
        "unchanged_since": capture.unchanged_since,
        "previous": capture.previous.id if capture.previous else None,
        "links": {
            "snapshot": reverse("core:snapshot", args=[capture.id]),
            "api": reverse("api:get_snapshot", args=[capture.id]),
            "memento": reverse("core:memento", kwargs={"timestamp": capture.timestamp, "url": url}),
            "timeline": reverse("core:url_timeline", kwargs={"url": url}),
            "diff": diff_url(url, capture),
        },
    }
