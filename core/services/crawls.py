"""Workflows over crawls: create one from a person's input, and advance it one tick."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.utils import timezone
from django_fsm import ConcurrentTransition

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.outlinks import OutlinksExtractor
from core.folder.manifest import atomic_write
from core.models import ArchiveResult, Snapshot, Tag
from core.services.scope import crawl_admit, crawl_bytes, crawl_screen
from crawls.choices import CrawlScope, CrawlStatus
from crawls.inputs import ParsedInput, is_valid_tag, read_input
from crawls.models import POLITENESS_FIELDS, Crawl, Persona, Profile, steps_of
from crawls.notifications import check_email_addresses, check_webhook_url, wants_notification
from crawls.scope import PatternError, parse_patterns
from crawls.seeds import InputError, InvalidURL
from crawls.signals import notification_due
from orchestrator.retries import next_poll

logger = logging.getLogger(__name__)

OUTLINKS = OutlinksExtractor.name  # the extractor whose links a crawl with depth follows

MAX_DEPTH = 10
PRIORITY_RANGE = (-32768, 32767)  # a SmallIntegerField on every database Django supports
# Bounds of a crawl's behaviour options (core/extractors/behaviours.py): five minutes on one page
# (behaviours never get more than a quarter of the extractor's timeout anyway), and far more
# growths of an infinite scroll than anyone reads.
MAX_BEHAVIOUR_SECONDS = 300
MAX_SCROLL_PAGES = 1000
REPORT_FAILURE_LIMIT = 200
MAX_HOST_DELAY_SECONDS = 3600
MAX_PAGES_LIMIT = 2**31 - 1  # what the columns hold on every database Django supports
MAX_BYTES_LIMIT = 2**63 - 1


@dataclass(frozen=True)
class CrawlOptions:
    """What a person asks of a crawl besides its input, as given (unchecked): follow links
    ``depth`` levels (0..MAX_DEPTH) and, with ``any_host``, to other hosts; give it ``tags``
    (each may hold several, comma-separated); run it before crawls of a lower ``priority``;
    run the steps of the profile named ``profile`` ("": the default one); send its report,
    once sealed, to ``notify_webhook`` (a URL) and ``notify_email`` (addresses,
    comma-separated); let the rendering extractors spend at most ``behaviour_seconds`` on a
    page before capturing it (0: no behaviours) and follow an infinite scroll for at most
    ``scroll_page_limit`` growths (each a number, or its text as typed; None or "": the
    setting, BEHAVIOUR_SECONDS or SCROLL_PAGE_LIMIT); with ``only_changes``, record a page that
    serves its last capture's bytes as a small capture pointing at that one
    (core/services/unchanged.py). Politeness and scope (crawls/scope.py,
    core/services/scope.py): follow links within ``scope`` (a CrawlScope value), also those
    matching an ``include`` pattern, never those matching an ``exclude`` one (patterns one a
    line); obey robots.txt with ``robots``; archive at most ``max_pages`` pages and stop
    following links once ``max_bytes`` bytes are written (None: no limit); run at most
    ``host_concurrency`` results of one host at once (None: HOST_CONCURRENCY) and start them
    ``host_delay_seconds`` apart; with ``public``, show it to everyone while PUBLIC_ARCHIVE is
    on; sign in as the Persona named ``persona`` ("": none). check_crawl_options checks them."""

    depth: int = 0
    any_host: bool = False
    tags: Sequence[str] = ()
    priority: int = 0
    profile: str = ""
    notify_webhook: str = ""
    notify_email: str = ""
    behaviour_seconds: float | str | None = None
    scroll_page_limit: int | str | None = None
    only_changes: bool = False
    scope: str = CrawlScope.HOST
    include: str = ""
    exclude: str = ""
    robots: bool = False
    max_pages: int | None = None
    max_bytes: int | None = None
    host_concurrency: int | None = None
    host_delay_seconds: float = 0
    public: bool = False
    persona: str = ""


DEFAULT_OPTIONS = CrawlOptions()


def crawl_create(
    *,
    data: bytes,
    source_name: str,
    parser: str = "auto",
    strict: bool = False,
    options: CrawlOptions = DEFAULT_OPTIONS,
    created_by=None,
    schedule=None,
    hold_reason: str = "",
) -> Crawl:
    """Read ``data`` (text, a feed, a bookmarks export or JSON: crawls/inputs.py) into a new
    queued Crawl with ``options``.

    ``source_name`` names the input in messages and in the saved copy ("urls.txt", "stdin",
    "command line"); ``parser`` is a format of crawls.inputs.FORMATS or "auto". The input is kept
    as received under ``DATA_DIR/sources/``. Titles and tags the input gives a URL are kept in
    ``seed_details`` (its snapshot gets them); entries left out are counted and named in
    ``input_report``. Raises InputError (nothing saved, nothing queued) for input with no valid
    entry, empty or binary input, any bad entry when ``strict``, options check_crawl_options
    refuses, or more than settings.MAX_TAGS_PER_REQUEST distinct tags (given and named by the
    input's entries, all made in the crawl's own transaction or when it starts).
    ``schedule`` is the CrawlSchedule that made this crawl, if one did. With ``hold_reason``
    the crawl is held from the start (nothing of it runs until released), for that reason.
    """
    checked = check_crawl_options(options)
    parsed = read_input(data, source=source_name, parser=parser, strict=strict)
    _check_tag_count({*checked.tags, *(name for entry in parsed.entries for name in entry.tags)})
    source_file = _save_source(data, source_name)
    with transaction.atomic():
        crawl = Crawl.objects.create(
            seeds="\n".join(entry.url for entry in parsed.entries),
            seed_details=_seed_details(parsed),
            input_report=parsed.report(),
            depth=options.depth,
            any_host=options.any_host,
            priority=options.priority,
            source_file=source_file,
            created_by=created_by,
            notify_webhook=checked.notify_webhook,
            notify_email=checked.notify_email,
            profile=checked.profile,
            behaviour_seconds=checked.behaviour_seconds,
            scroll_page_limit=checked.scroll_page_limit,
            only_changes=options.only_changes,
            scope=options.scope,
            include=options.include.strip(),
            exclude=options.exclude.strip(),
            robots=options.robots,
            max_pages=options.max_pages,
            max_bytes=options.max_bytes,
            host_concurrency=options.host_concurrency,
            host_delay_seconds=options.host_delay_seconds,
            public=options.public,
            persona=checked.persona,
            schedule=schedule,
        )
        crawl.tags.set([Tag.objects.get_or_create(name=name)[0] for name in checked.tags])
        if hold_reason:
            crawl.hold(reason=hold_reason)
            crawl.save()
    logger.info(
        "crawl %s queued: %d seeds (%s, %d left out), depth %d",
        crawl.pk, len(parsed.entries), parsed.format, parsed.rejected, options.depth,
    )  # fmt: skip
    return crawl


@dataclass(frozen=True)
class CheckedOptions:
    """A crawl's options once checked: tags split and unique, addresses normalized, the
    profile found, the behaviour options numbers (None: the setting)."""

    tags: list[str]
    notify_webhook: str
    notify_email: str
    profile: Profile | None
    behaviour_seconds: float | None = None
    scroll_page_limit: int | None = None
    persona: Persona | None = None


def check_crawl_options(options: CrawlOptions) -> CheckedOptions:
    """Check ``options`` (crawl_create's rules); raise InputError naming the first thing wrong:
    a depth outside 0..MAX_DEPTH, a priority outside a small integer's range, an invalid tag,
    more than settings.MAX_TAGS_PER_REQUEST distinct tags, an invalid webhook URL or email
    address, a profile that names no stored Profile (none: the default profile, if one is
    marked), a depth above 0 with steps that do not run the outlinks extractor, behaviour
    seconds that are not a number from 0 to MAX_BEHAVIOUR_SECONDS, or a scroll page limit that
    is not a whole number from 0 to MAX_SCROLL_PAGES."""
    if not 0 <= options.depth <= MAX_DEPTH:
        raise InputError(f"depth must be between 0 and {MAX_DEPTH}, not {options.depth}")
    if not PRIORITY_RANGE[0] <= options.priority <= PRIORITY_RANGE[1]:
        low, high = PRIORITY_RANGE
        raise InputError(f"priority must be between {low} and {high}, not {options.priority}")
    _check_politeness(options)
    seconds = _clean_behaviour_seconds(options.behaviour_seconds)
    pages = _clean_scroll_page_limit(options.scroll_page_limit)
    webhook, email = _clean_notify(options.notify_webhook, options.notify_email)
    profile = _find_profile(options.profile)
    _check_links_are_found(options.depth, profile)
    return CheckedOptions(
        _clean_tags(options.tags),
        webhook,
        email,
        profile,
        seconds,
        pages,
        _find_persona(options.persona),
    )


def _check_politeness(options: CrawlOptions) -> None:
    """Raise InputError for a scope that is not a CrawlScope value (or one other than host and
    any with ``any_host``), an unreadable include or exclude pattern, a page or byte limit
    below 1 or above what its column holds (MAX_PAGES_LIMIT, MAX_BYTES_LIMIT), a host
    concurrency outside 1..HOST_CONCURRENCY (any from 1 when that is 0), or a host delay
    outside 0..MAX_HOST_DELAY_SECONDS."""
    if options.scope not in CrawlScope.values:
        raise InputError(
            f"scope must be one of {', '.join(CrawlScope.values)}, not {options.scope!r}"
        )
    if options.any_host and options.scope not in (CrawlScope.HOST, CrawlScope.ANY):
        raise InputError(f"any host and scope {options.scope} contradict: give one of them")
    for name, text in (("include", options.include), ("exclude", options.exclude)):
        try:
            parse_patterns(text)
        except PatternError as error:
            raise InputError(f"{name}: {error}") from None
    for name, value, most in (
        ("max pages", options.max_pages, MAX_PAGES_LIMIT),
        ("max bytes", options.max_bytes, MAX_BYTES_LIMIT),
    ):
        if value is not None and value < 1:
            raise InputError(f"{name} must be at least 1, not {value}")
        if value is not None and value > most:
            raise InputError(f"{name} must be at most {most}, not {value}")
    limit = settings.HOST_CONCURRENCY
    if options.host_concurrency is not None and not (
        1 <= options.host_concurrency <= (limit or PRIORITY_RANGE[1])
    ):
        most = f"HOST_CONCURRENCY, {limit}" if limit else PRIORITY_RANGE[1]
        raise InputError(
            f"host concurrency must be between 1 and {most}, not {options.host_concurrency}"
        )
    if not 0 <= options.host_delay_seconds <= MAX_HOST_DELAY_SECONDS:
        raise InputError(
            f"host delay must be between 0 and {MAX_HOST_DELAY_SECONDS} seconds, "
            f"not {options.host_delay_seconds:g}"
        )


def _clean_behaviour_seconds(value: float | str | None) -> float | None:
    """Return behaviour seconds as a number (None: the setting); raise InputError."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    wrong = f"behaviour seconds must be a number of seconds (0: no behaviours), not {value!r}"
    if isinstance(value, bool):
        raise InputError(wrong)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise InputError(wrong) from None
    if not math.isfinite(seconds):
        raise InputError(wrong)
    if not 0 <= seconds <= MAX_BEHAVIOUR_SECONDS:
        raise InputError(
            f"behaviour seconds must be between 0 and {MAX_BEHAVIOUR_SECONDS}, not {seconds:g}"
        )
    return seconds


def _clean_scroll_page_limit(value: int | str | None) -> int | None:
    """Return a scroll page limit as an int (None: the setting); raise InputError."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    wrong = f"scroll pages must be a whole number of pages, not {value!r}"
    if isinstance(value, bool):
        raise InputError(wrong)
    if isinstance(value, int):
        pages = value
    else:
        try:
            pages = int(str(value).strip())
        except ValueError:
            raise InputError(wrong) from None
    if not 0 <= pages <= MAX_SCROLL_PAGES:
        raise InputError(f"scroll pages must be between 0 and {MAX_SCROLL_PAGES}, not {pages}")
    return pages


def _find_profile(name: str) -> Profile | None:
    """The stored profile called ``name`` (none given: the default one, or None for the built-in
    default); raise InputError naming the stored ones when there is no such profile."""
    if not name:
        return Profile.objects.default()
    try:
        return Profile.objects.get(name=name)
    except Profile.DoesNotExist:
        stored = ", ".join(Profile.objects.values_list("name", flat=True)) or "none stored"
        raise InputError(f"unknown profile {name!r} (profiles: {stored})") from None


def _check_links_are_found(depth: int, profile: Profile | None) -> None:
    """Raise InputError for a depth above 0 with steps (``profile``'s, else the built-in
    default's: EXTRACTORS) that do not run the outlinks extractor: the links a crawl follows
    are the ones it finds, so such a crawl would archive its seeds alone, and say nothing.
    A profile whose steps no longer pass its rules is left to the snapshots, which hold the
    crawl naming the problem."""
    if depth == 0:
        return
    try:
        steps = steps_of(profile)
    except ValidationError:
        return
    if any(step.extractor == OUTLINKS for step in steps):
        return
    runs = f"profile {profile.name!r} does" if profile else "the default steps (EXTRACTORS) do"
    raise InputError(
        f"depth {depth} follows the links that the {OUTLINKS} extractor finds, and {runs} "
        f"not run it: add {OUTLINKS} to the steps, or archive at depth 0"
    )


def _find_persona(name: str) -> Persona | None:
    """The stored persona called ``name`` (none given: None); raise InputError naming the
    stored ones when there is no such persona."""
    if not name:
        return None
    try:
        return Persona.objects.get(name=name)
    except Persona.DoesNotExist:
        stored = ", ".join(Persona.objects.values_list("name", flat=True)) or "none stored"
        raise InputError(f"unknown persona {name!r} (personas: {stored})") from None


def _seed_details(parsed: ParsedInput) -> dict[str, dict]:
    """Titles and tags per URL, for the entries that have any."""
    return {
        entry.url: {"title": entry.title, "tags": list(entry.tags)}
        for entry in parsed.entries
        if entry.title or entry.tags
    }


def _check_tag_count(names: set[str]) -> None:
    """Raise InputError when ``names`` are more tags than one request may make (a setting, so
    that one call cannot flood the tag list)."""
    limit = settings.MAX_TAGS_PER_REQUEST
    if len(names) > limit:
        raise InputError(
            f"{len(names)} different tags: one request may name at most {limit} "
            "(MAX_TAGS_PER_REQUEST)"
        )


def _clean_tags(tags: Sequence[str]) -> list[str]:
    names = []
    for raw in tags:
        for name in raw.split(","):
            name = name.strip()
            if not name:
                continue
            if not is_valid_tag(name):
                raise InputError(f"invalid tag {name[:40]!r}: printable, at most 100 characters")
            names.append(name)
    unique = list(dict.fromkeys(names))
    _check_tag_count(set(unique))
    return unique


def _clean_notify(webhook: str, email: str) -> tuple[str, str]:
    """Return the webhook URL normalized and the addresses comma-joined; raise InputError."""
    try:
        webhook = check_webhook_url(webhook) if webhook else ""
    except InvalidURL as error:
        raise InputError(f"webhook: {error}") from None
    try:
        addresses = check_email_addresses(email.split(","))
    except ValidationError as error:
        raise InputError(f"email: {error.messages[0]}") from None
    return webhook, ",".join(addresses)


def _save_source(data: bytes, source_name: str) -> str:
    """Keep the input exactly as received; return its path relative to DATA_DIR."""
    stamp = timezone.now().strftime("%Y%m%dT%H%M%S.%fZ")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", source_name).strip("-")[:60] or "input"
    path = settings.SOURCES_DIR / f"{stamp}-{slug}.txt"
    atomic_write(path, data)
    return path.relative_to(settings.DATA_DIR).as_posix()


def crawl_tick(*, crawl: Crawl) -> None:
    """Advance ``crawl`` one step: start it (queue its seeds), or seal it when all is final."""
    if crawl.status == CrawlStatus.QUEUED:
        crawl_start(crawl=crawl)
    elif crawl.status == CrawlStatus.STARTED:
        if crawl.all_snapshots_final() and crawl_seal(crawl=crawl):
            logger.info("crawl %s sealed", crawl.pk)
        else:
            crawl.retry_at = next_poll()
            crawl.save(update_fields=["retry_at", "modified_at"])


def crawl_seal(*, crawl: Crawl) -> bool:
    """Seal ``crawl`` with its report if every snapshot of it is final; return True if sealed.

    The crawl row is locked first and the guard checked again under the lock: a re-archive or a
    retry locks it too before it queues a snapshot of this crawl
    (core.services.rearchive._reopen_crawl),
    so the two never cross (on PostgreSQL's READ COMMITTED they otherwise could).
    """
    with transaction.atomic():
        # Locked, then read again: a result recorded or a limit reached since the claim read
        # the row changed its byte count or stop reason, which the report gives.
        crawl.lock_and_refresh("bytes_written", "stop_reason")
        if not crawl.all_snapshots_final():
            return False
        crawl.seal(report=crawl_report(crawl=crawl))
        crawl.save()
        if wants_notification(crawl):
            transaction.on_commit(partial(_announce_notification, crawl))
    return True


def _announce_notification(crawl: Crawl) -> None:
    """Send ``notification_due`` (crawls/receivers.py queues the crawl's notification on it). A
    receiver that fails, such as a queue that cannot be reached (Redis down, a full disk), is
    logged: the crawl is sealed and committed whatever happens here."""
    for _receiver, error in notification_due.send_robust(sender=Crawl, crawl=crawl):
        if isinstance(error, Exception):
            logger.error(
                "crawl %s: could not queue its notification: %s", crawl.pk, error, exc_info=error
            )


def crawl_start(*, crawl: Crawl) -> None:
    """Start ``crawl`` and create a root Snapshot per seed (each URL once per crawl), but for
    seeds its robots.txt rules or page limit leave out (recorded with their reason,
    core/services/scope.py)."""
    screened = crawl_screen(crawl=crawl, urls=crawl.seed_list(), found_on=None)
    now = timezone.now()
    with transaction.atomic():
        # crawl_admit counts under the crawl's row lock, on its limits and counts as they are
        # now: an operator may have changed them since the claim read the row.
        crawl.lock_and_refresh(*POLITENESS_FIELDS, "bytes_written", "stop_reason")
        crawl.start()
        crawl.retry_at = next_poll(now)
        crawl.save()
        known = set(crawl.snapshots.filter(depth=0).values_list("url", flat=True))
        seeds = crawl_admit(crawl=crawl, screened=screened, known=known)
        details = crawl.seed_details
        Snapshot.objects.bulk_create(
            [
                Snapshot(
                    crawl=crawl,
                    url=url,
                    title=details.get(url, {}).get("title", ""),
                    depth=0,
                    priority=crawl.priority,
                    retry_at=now,
                )
                for url in seeds
            ],
            ignore_conflicts=True,
        )
        roots = list(crawl.snapshots.filter(depth=0).values_list("pk", flat=True))
        snapshots_tag_like_crawl(crawl=crawl, snapshot_ids=roots)
        _tag_seeds_as_given(crawl)


def _tag_seeds_as_given(crawl: Crawl) -> None:
    """Give each root snapshot the tags its input entry named (besides the crawl's own)."""
    wanted = {url: detail["tags"] for url, detail in crawl.seed_details.items() if detail["tags"]}
    if not wanted:
        return
    tags = {
        name: Tag.objects.get_or_create(name=name)[0]
        for name in {name for names in wanted.values() for name in names}
    }
    through = Snapshot.tags.through
    roots = crawl.snapshots.filter(depth=0, url__in=wanted)
    through.objects.bulk_create(
        [
            through(snapshot_id=pk, tag_id=tags[name].pk)
            for pk, url in roots.values_list("pk", "url")
            for name in wanted[url]
        ],
        ignore_conflicts=True,
    )


def crawl_report(*, crawl: Crawl) -> dict:
    """Return the crawl's report: snapshots and results per state, the bytes its results wrote
    (``bytes``), and every failure's reason (a snapshot that failed finalizing has
    ``"extractor": None``), at most 200 failures; for a crawl that keeps only changes, how many
    pages were found unchanged (``unchanged``: core/services/unchanged.py); when it stopped
    growing at a limit, why (``stopped``); when it left URLs out (scope, patterns, robots.txt,
    limits: core/services/scope.py), how many per reason (``skipped``) and the first 200 with
    their reason (``skipped_urls``: ``{"url", "reason", "detail"}``)."""
    snapshots = crawl.snapshots.count_by_status()
    results = ArchiveResult.objects.filter(snapshot__crawl=crawl)
    by_state = results.count_by_status()
    failed_snapshots = [
        {"url": url, "extractor": None, "error": error}
        for url, error in crawl.snapshots.filter(status=SnapshotStatus.FAILED)
        .order_by("url")
        .values_list("url", "error")[:REPORT_FAILURE_LIMIT]
    ]
    failed_results = [
        {"url": url, "extractor": extractor, "error": error}
        for url, extractor, error in results.filter(status=ResultStatus.FAILED)
        .order_by("snapshot__url", "extractor")
        .values_list("snapshot__url", "extractor", "error")[:REPORT_FAILURE_LIMIT]
    ]
    failures = (failed_snapshots + failed_results)[:REPORT_FAILURE_LIMIT]
    started = crawl.start_ts or crawl.created_at
    report = {
        "snapshots": snapshots,
        "results": by_state,
        "bytes": crawl_bytes(crawl=crawl),
        "failures": failures,
        "duration_seconds": round((timezone.now() - started).total_seconds(), 3),
    }
    if crawl.stop_reason:
        report["stopped"] = crawl.stop_reason
    politeness = _politeness_chosen(crawl)
    if politeness:
        report["politeness"] = politeness
    skips = crawl.skips.all()
    skipped = dict(skips.order_by().values_list("reason").annotate(n=Count("pk")))
    if skipped:
        report["skipped"] = skipped
        rows = skips.order_by("url").values_list("url", "reason", "detail")
        report["skipped_urls"] = [
            {"url": url, "reason": reason, "detail": detail}
            for url, reason, detail in rows[:REPORT_FAILURE_LIMIT]
        ]
    if crawl.only_changes:
        report["unchanged"] = crawl.snapshots.filter(unchanged_since__isnull=False).count()
    return report


def _politeness_chosen(crawl: Crawl) -> dict:
    """The politeness and scope options ``crawl`` set otherwise than their defaults."""
    return {
        name: value
        for name, value in crawl.politeness_options().items()
        if value != Crawl._meta.get_field(name).get_default()
    }


def crawls_set_public(*, crawl_ids: Sequence[int], public: bool) -> int:
    """Mark the crawls ``crawl_ids`` public (their snapshots shown to everyone while
    PUBLIC_ARCHIVE is on) or not; return how many were changed (those already so are left
    alone)."""
    return Crawl.objects.filter(pk__in=crawl_ids).exclude(public=public).update(public=public)


def crawl_hold(*, crawl_id: int, reason: str = "") -> Crawl:
    """Hold crawl ``crawl_id`` (``reason``: why, shown by ``status`` and the admin): none of its
    records is claimed until it is released; work under way finishes. Raises
    Crawl.DoesNotExist, and TransitionNotAllowed when the crawl is already held or sealed. A tick
    saved by an actor meanwhile is read again, up to three times."""
    return _transition_crawl(crawl_id, partial(Crawl.hold, reason=reason))


def crawl_release(*, crawl_id: int) -> Crawl:
    """Release held crawl ``crawl_id``: it is queued again, due now, and resumes where it
    stopped (its snapshots and results keep their states). Raises Crawl.DoesNotExist, and
    TransitionNotAllowed when the crawl is not held."""
    return _transition_crawl(crawl_id, Crawl.release)


def _transition_crawl(crawl_id: int, transition) -> Crawl:
    for _ in range(3):
        crawl = Crawl.objects.get(pk=crawl_id)
        try:
            with transaction.atomic():
                transition(crawl)
                crawl.save()
        except ConcurrentTransition:
            continue  # an actor saved the crawl between our read and our write
        logger.info("crawl %s %s", crawl.pk, crawl.status)
        return crawl
    raise ConcurrentTransition(f"crawl {crawl_id} kept changing; try again")


def snapshots_tag_like_crawl(*, crawl: Crawl, snapshot_ids: list) -> None:
    """Give the snapshots ``snapshot_ids`` every tag of ``crawl`` (tags they have are kept)."""
    tag_ids = list(crawl.tags.values_list("pk", flat=True))
    if not tag_ids or not snapshot_ids:
        return
    through = Snapshot.tags.through
    through.objects.bulk_create(
        [through(snapshot_id=pk, tag_id=tag) for pk in snapshot_ids for tag in tag_ids],
        ignore_conflicts=True,
    )
