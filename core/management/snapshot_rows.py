"""Snapshots as rows for people and programs: the data behind ``manage.py list``."""

from __future__ import annotations

from core.choices import ResultStatus
from core.models import Snapshot, SnapshotQuerySet

# Columns of ``list --csv``, in order.
COLUMNS = ["id", "crawl", "status", "url", "title", "depth", "tags", "created_at", "results"]


def snapshots_for_listing(
    *, crawl: int | None = None, state: str | None = None, tag: str | None = None
) -> SnapshotQuerySet:
    """Return snapshots filtered by crawl id, state and tag name, oldest first, with their results
    and tags prefetched (two extra queries in all, whatever the count)."""
    queryset = Snapshot.objects.order_by("created_at", "url").prefetch_related("results", "tags")
    if crawl is not None:
        queryset = queryset.filter(crawl_id=crawl)
    if state:
        queryset = queryset.filter(status=state)
    if tag:
        queryset = queryset.filter(tags__name=tag)
    return queryset


def snapshot_row(snapshot: Snapshot) -> dict:
    """Return one snapshot as a JSON-ready dict; ``results`` maps extractor → state details."""
    return {
        "id": str(snapshot.pk),
        "crawl": snapshot.crawl_id,
        "status": snapshot.status,
        "url": snapshot.url,
        "title": snapshot.title,
        "depth": snapshot.depth,
        "tags": sorted(tag.name for tag in snapshot.tags.all()),
        "created_at": snapshot.created_at.isoformat(),
        "folder": str(snapshot.output_dir),
        "results": {
            result.extractor: {
                "status": result.status,
                "output": result.output,
                "error": result.error,
                "attempts": result.attempts,
            }
            for result in snapshot.results.all()
        },
    }


SYMBOLS = {
    ResultStatus.SUCCEEDED: "✓",
    ResultStatus.FAILED: "✗",
    ResultStatus.SKIPPED: "-",
    ResultStatus.BACKOFF: "↻",
}


def results_summary(row: dict, *, symbols: bool = False) -> str:
    """Return ``"wget:succeeded title:skipped ..."`` for a row from ``snapshot_row``; with
    ``symbols``, the compact ``"wget✓ title-"`` (✓ succeeded, ✗ failed, - skipped, ↻ backoff,
    … queued or started)."""
    if symbols:
        return " ".join(
            f"{name}{SYMBOLS.get(detail['status'], '…')}" for name, detail in row["results"].items()
        )
    return " ".join(f"{name}:{detail['status']}" for name, detail in row["results"].items())
