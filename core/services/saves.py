"""Saving one URL in one click (``/save/<url>``, the bookmarklet, the ``web+vellum:`` handler,
``POST /api/v1/save``): queue it as a crawl of its own with the crawl defaults and the user's
own profile and persona (SaveDefaults), unless the same reader saved it moments ago.

A repeat within settings.SAVE_DEDUP_MINUTES lands on what is already there instead of queuing
the page again: first the newest crawl of that one URL the reader may read (a save, or an add
of that URL alone), else the newest snapshot of it the reader may read (from any crawl). A
crawl or snapshot of it that failed does not count: saving again is how one retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core.choices import SnapshotStatus
from core.models import Snapshot
from core.services.captures import url_spellings
from core.services.crawls import CrawlOptions, crawl_create
from crawls.models import Crawl, SaveDefaults
from orchestrator.prepared import with_related

SOURCE_NAME = "save"


@dataclass(frozen=True)
class Saved:
    """What one save did: the ``crawl`` that holds the URL, the earlier ``snapshot`` a repeat
    landed on (None when it landed on a crawl, or queued one), and whether it was a
    ``repeat`` (nothing new queued)."""

    crawl: Crawl
    snapshot: Snapshot | None = None
    repeat: bool = False


def url_save(*, url: str, created_by, window_minutes: int | None = None) -> Saved:
    """Queue ``url`` (absolute, or a host and path: https is tried first,
    core.services.captures.url_spellings) as a new crawl added by ``created_by``, with the
    crawl defaults (depth 0) and ``created_by``'s profile and persona (SaveDefaults; none: the
    default profile, signed out), unless ``created_by`` saved or can read a
    capture of it made in the last ``window_minutes`` (None: settings.SAVE_DEDUP_MINUTES; 0:
    never a repeat), which is returned instead.

    Raises InvalidURL (crawls.seeds) for a URL that cannot be archived, and InputError as
    crawl_create does.
    """
    normalized = url_spellings(url)[0]
    window = settings.SAVE_DEDUP_MINUTES if window_minutes is None else window_minutes
    if window > 0:
        earlier = _earlier_save(normalized, created_by, timezone.now() - timedelta(minutes=window))
        if earlier is not None:
            return earlier
    crawl = crawl_create(
        data=normalized.encode(),
        source_name=SOURCE_NAME,
        parser="text",
        strict=True,
        options=CrawlOptions(**_defaults_of(created_by)),
        created_by=created_by,
    )
    return Saved(crawl=crawl)


def _defaults_of(user) -> dict:
    """The profile and persona ``user``'s saves run with (crawls.models.SaveDefaults)."""
    defaults = SaveDefaults.objects.select_related("profile", "persona").filter(user=user).first()
    return defaults.options() if defaults is not None else {}


def _earlier_save(url: str, user, since) -> Saved | None:
    failed = SnapshotStatus.FAILED
    crawl = (
        Crawl.objects.lean()
        .visible_to(user)
        .filter(seeds=url, created_at__gte=since)
        .exclude(snapshots__url=url, snapshots__status=failed)
        .order_by("-created_at", "-pk")
        .first()
    )
    if crawl is not None:
        return Saved(crawl=crawl, repeat=True)
    # Its crawl may be a large import: joined in without the fields that grow with it.
    captured = Snapshot.objects.visible_to(user).filter(url=url, created_at__gte=since)
    snapshot = (
        with_related(captured, ("crawl",))
        .exclude(status=failed)
        .order_by("-created_at", "-pk")
        .first()
    )
    if snapshot is not None:
        return Saved(crawl=snapshot.crawl, snapshot=snapshot, repeat=True)
    return None
