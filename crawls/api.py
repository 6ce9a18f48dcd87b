"""REST endpoints for crawls (archive/api.py mounts them at ``/api/v1/crawls``): add URLs or a
file's content, list and get crawls, hold, release, retry their failures, remove them; and
``/api/v1/save``, one URL in one call (``save_router``). A user who is not staff but holds
``crawls.add_crawl`` may add, save, list and get their own crawls (CrawlQuerySet.visible_to);
the rest stays with staff."""

# No ``from __future__ import annotations``: django-ninja reads these annotations at run time
# (through its pagination decorator, where postponed ones cannot be resolved).

from datetime import datetime

from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status
from ninja.pagination import paginate

from archive.pagination import BoundedPageNumberPagination
from core.models import Snapshot
from core.services.crawls import (
    MAX_BEHAVIOUR_SECONDS,
    MAX_SCROLL_PAGES,
    CrawlOptions,
    crawl_create,
    crawl_hold,
    crawl_release,
)
from core.services.rearchive import snapshots_retry_failed
from core.services.removal import crawl_remove
from core.services.saves import url_save
from core.web.permissions import staff
from crawls.choices import CrawlScope
from crawls.inputs import FORMATS
from crawls.models import Crawl
from crawls.seeds import InputError, InvalidURL, has_control_character

router = Router()
save_router = Router()
PAGE_SIZE = 50


class CrawlIn(Schema):
    """What to archive: ``urls`` (each must be valid), or ``input``, the text of a file (URLs in
    text, RSS or Atom, a bookmarks export, JSON; its bad entries are left out and reported)."""

    urls: list[str] | None = Field(None, min_length=1)
    input: str | None = Field(None, min_length=1)
    parser: str = Field("auto", description=f"auto, or one of {', '.join(FORMATS)}")
    depth: int = 0
    any_host: bool = False
    tags: list[str] = []
    priority: int = 0
    profile: str = ""
    persona: str = Field("", description="Sign in as this stored persona (manage.py persona)")
    webhook: str = ""
    email: str = ""
    behaviour_seconds: float | None = Field(
        None,
        description="Seconds the browser extractors may spend on a page before capturing it "
        f"(scrolling, lazy images, network quiet): 0 to {MAX_BEHAVIOUR_SECONDS}, 0 for none; "
        "null: the server's BEHAVIOUR_SECONDS. Never more than a quarter of the extractor's "
        "timeout",
    )
    scroll_page_limit: int | None = Field(
        None,
        description="Times an infinite scroll may grow while a page is scrolled: 0 to "
        f"{MAX_SCROLL_PAGES}; null: the server's SCROLL_PAGE_LIMIT",
    )
    only_changes: bool = Field(
        False,
        description="Keep only changes: a page that serves the bytes of its last sealed capture "
        "is recorded as a small capture pointing at that one instead of being archived again",
    )
    scope: str = Field(
        CrawlScope.HOST, description=f"Links followed with depth: {', '.join(CrawlScope.values)}"
    )
    include: list[str] = Field(
        [], description="Also follow links matching: regular expressions, or surt:<SURT prefix>"
    )
    exclude: list[str] = Field([], description="Never follow links matching (as include)")
    robots: bool = Field(False, description="Obey robots.txt (RFC 9309); skipped URLs listed")
    max_pages: int | None = Field(None, description="Pages at most, seeds included")
    max_bytes: int | None = Field(None, description="Stop following links past these bytes")
    host_concurrency: int | None = Field(
        None, description="Results of one host at once, 1 to HOST_CONCURRENCY (null: that)"
    )
    host_delay_seconds: float = Field(0, description="Seconds between starts on one host")
    public: bool = Field(
        False, description="Show its snapshots to everyone while PUBLIC_ARCHIVE is on"
    )


class CrawlOut(Schema):
    id: int
    status: str
    seeds: list[str]
    depth: int
    any_host: bool
    priority: int
    tags: list[str]
    profile: str | None
    persona: str | None = Field(None, description="The persona's name; its secrets never")
    behaviour_seconds: float | None
    scroll_page_limit: int | None
    only_changes: bool
    scope: str
    robots: bool
    max_pages: int | None
    max_bytes: int | None
    stop_reason: str
    public: bool
    hold_reason: str
    created_at: datetime
    start_ts: datetime | None
    end_ts: datetime | None
    input_report: dict
    report: dict
    estimate: dict

    @staticmethod
    def resolve_seeds(crawl: Crawl) -> list[str]:
        return crawl.seed_list()

    @staticmethod
    def resolve_tags(crawl: Crawl) -> list[str]:
        return [tag.name for tag in crawl.tags.all()]

    @staticmethod
    def resolve_profile(crawl: Crawl) -> str | None:
        return crawl.profile.name if crawl.profile else None

    @staticmethod
    def resolve_persona(crawl: Crawl) -> str | None:
        return crawl.persona.name if crawl.persona else None


class CrawlDetail(CrawlOut):
    snapshot_counts: dict[str, int] = Field(description="Its snapshots per state.")

    @staticmethod
    def resolve_snapshot_counts(crawl: Crawl) -> dict[str, int]:
        return crawl.snapshots.count_by_status()


class CrawlFilters(Schema):
    status: str | None = None
    tag: str | None = None


class SaveIn(Schema):
    url: str = Field(
        min_length=1,
        description="The URL to save (https is tried first for a host and path without a scheme)",
    )


class SaveOut(Schema):
    crawl: CrawlDetail
    snapshot: str | None = Field(
        description="The earlier capture a repeat landed on (its id), or null"
    )
    repeat: bool = Field(
        description="True: saved within SAVE_DEDUP_MINUTES before; nothing new was queued"
    )
    page: str = Field(description="The page to open: the crawl's progress, or the capture")


class HoldIn(Schema):
    reason: str = ""


class Retried(Schema):
    queued: int = Field(description="Failed results queued again.")


def _crawl(crawl_id: int, user=None) -> Crawl:
    """The crawl ``crawl_id``, among those ``user`` may read (None: any). Raises
    Crawl.DoesNotExist naming it (a 404)."""
    crawls = Crawl.objects.select_related("profile", "persona")
    if user is not None:
        crawls = crawls.visible_to(user)
    try:
        return crawls.get(pk=crawl_id)
    except Crawl.DoesNotExist:
        raise Crawl.DoesNotExist(f"no crawl {crawl_id}") from None


@router.post(
    "",
    response={201: CrawlDetail},
    summary="Add URLs as a new crawl",
    auth=staff(Crawl, "add", own=True),
)
def add(request, body: CrawlIn):
    if (body.urls is None) == (body.input is None):
        raise InputError("give urls (a list) or input (a file's text): exactly one of them")
    from_urls = body.urls is not None
    for index, url in enumerate(body.urls or []):
        if has_control_character(url):  # one element is one URL: it may not become two lines
            raise InputError(f"urls[{index}] holds a line break or other control character")
    crawl = crawl_create(
        data=("\n".join(body.urls) if from_urls else body.input).encode(),
        source_name="api urls" if from_urls else "api input",
        parser="text" if from_urls else body.parser,
        strict=from_urls,
        options=CrawlOptions(
            depth=body.depth,
            any_host=body.any_host,
            tags=body.tags,
            priority=body.priority,
            profile=body.profile,
            notify_webhook=body.webhook,
            notify_email=body.email,
            behaviour_seconds=body.behaviour_seconds,
            scroll_page_limit=body.scroll_page_limit,
            only_changes=body.only_changes,
            scope=body.scope,
            include="\n".join(body.include),
            exclude="\n".join(body.exclude),
            robots=body.robots,
            max_pages=body.max_pages,
            max_bytes=body.max_bytes,
            host_concurrency=body.host_concurrency,
            host_delay_seconds=body.host_delay_seconds,
            public=body.public,
            persona=body.persona,
        ),
        created_by=request.auth,
    )
    return Status(201, _crawl(crawl.pk))


@save_router.post(
    "/save",
    response={200: SaveOut, 201: SaveOut},
    summary="Save one URL (a repeat within SAVE_DEDUP_MINUTES lands on the first)",
    description="Queue the URL as a crawl of its own with the crawl defaults (201), or, when "
    "the same user saved it (or can read a capture of it) within SAVE_DEDUP_MINUTES, answer "
    "with that crawl or capture and queue nothing (200). 400 for a URL that cannot be "
    "archived.",
    auth=staff(Crawl, "add", own=True),
)
def save(request, body: SaveIn):
    if has_control_character(body.url):
        raise InputError("url holds a line break or other control character")
    try:
        saved = url_save(url=body.url, created_by=request.auth)
    except InvalidURL as error:
        raise InputError(str(error)) from None
    snapshot = saved.snapshot
    page = (
        reverse("core:snapshot", args=[snapshot.pk])
        if snapshot is not None
        else reverse("crawls:progress", args=[saved.crawl.pk])
    )
    out = {
        "crawl": _crawl(saved.crawl.pk),
        "snapshot": str(snapshot.pk) if snapshot is not None else None,
        "repeat": saved.repeat,
        "page": page,
    }
    return Status(200 if saved.repeat else 201, out)


@router.get(
    "",
    response=list[CrawlOut],
    summary="List crawls, newest first",
    auth=staff(Crawl, "view", own=True),
)
@paginate(BoundedPageNumberPagination, page_size=PAGE_SIZE)
def list_crawls(request, filters: Query[CrawlFilters]):
    crawls = (
        Crawl.objects.visible_to(request.auth)
        .select_related("profile", "persona")
        .prefetch_related("tags")
    )
    if filters.status:
        crawls = crawls.filter(status=filters.status)
    if filters.tag:
        crawls = crawls.filter(tags__name=filters.tag)
    return crawls


@router.get(
    "/{crawl_id}",
    response=CrawlDetail,
    summary="One crawl, with its report",
    auth=staff(Crawl, "view", own=True),
)
def get_crawl(request, crawl_id: int):
    return _crawl(crawl_id, request.auth)


@router.post(
    "/{crawl_id}/hold", response=CrawlDetail, summary="Hold a crawl", auth=staff(Crawl, "change")
)
def hold(request, crawl_id: int, body: HoldIn | None = None):
    _crawl(crawl_id)  # a 404 that names the crawl
    return crawl_hold(crawl_id=crawl_id, reason=body.reason if body else "")


@router.post(
    "/{crawl_id}/release",
    response=CrawlDetail,
    summary="Release a held crawl",
    auth=staff(Crawl, "change"),
)
def release(request, crawl_id: int):
    _crawl(crawl_id)  # a 404 that names the crawl
    return crawl_release(crawl_id=crawl_id)


@router.post(
    "/{crawl_id}/retry",
    response=Retried,
    summary="Retry a crawl's failed results",
    auth=staff(Crawl, "change"),
)
def retry(request, crawl_id: int):
    crawl = _crawl(crawl_id)
    return {"queued": snapshots_retry_failed(snapshots=Snapshot.objects.for_crawl(crawl))}


@router.delete(
    "/{crawl_id}",
    response={204: None},
    summary="Remove a crawl (held or sealed)",
    auth=staff(Crawl, "delete"),
)
def remove(request, crawl_id: int, delete_files: bool = False):
    _crawl(crawl_id)
    crawl_remove(crawl_id=crawl_id, delete_files=delete_files)
    return Status(204, None)
