"""Which URLs a crawl archives: its scope, patterns, robots.txt and limits (issue 21, item 2).

Every URL a crawl meets and does not archive is recorded as a CrawlSkip with its reason; none is
dropped silently, but for links off the host in a crawl that chose no scope and no patterns
(Vellum's behaviour before scopes, kept as it was).

Screening (``crawl_screen``) may fetch robots.txt, so it runs before the transaction that
queues snapshots (``crawl_admit``), which counts them under the crawl's row lock: two actors
queuing links of one crawl at once never pass its page limit together.

The links a page led to and the crawl left out are written in that snapshot's ``index.json``,
with the crawl's politeness options and the reason it stopped growing, once known
(core/folder/index_json.py), so that ``manage.py reindex`` brings them back; seeds left out
live in the database only (no folder is theirs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from django.utils import timezone

from core.extractors.robots import RobotsRules, fetch_robots
from core.models import Host
from crawls.choices import CrawlScope, CrawlStatus, SkipReason
from crawls.models import Crawl, CrawlSkip
from crawls.scope import ScopeRules
from crawls.seeds import InvalidURL, normalize_url

logger = logging.getLogger(__name__)

# RFC 9309 §2.4: a crawler should not use a cached robots.txt for more than 24 hours; an hour
# lets a site's changes reach a long crawl.
ROBOTS_FRESH = timedelta(hours=1)
# RFC 9309 §2.3.1.4: while robots.txt is unreachable (a 5xx answer, no answer) the crawler
# must assume complete disallow. That verdict is a server's passing trouble more often than
# its will: asked again after ten minutes, so that a crawl is not refused for an hour.
ROBOTS_UNREACHABLE_FRESH = timedelta(minutes=10)
# What a Host row keeps of its robots.txt, read to tell whether it is fresh.
ROBOTS_FIELDS = ("robots_txt", "robots_unreachable", "robots_fetched_at")


@dataclass
class Screened:
    """URLs that passed the crawl's rules (``wanted``, in order, each once) and those that did
    not, as ``(url, SkipReason value, detail)``; ``found_on``: the page they were links on
    ("" for seeds)."""

    wanted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    found_on: str = ""


def crawl_screen(*, crawl: Crawl, urls: list[str], found_on: str | None) -> Screened:
    """Screen ``urls``: normalize them (invalid ones are left out: they are not URLs), then
    apply the crawl's scope and patterns to links (``found_on``: the normalized URL of the page
    they are on; None for seeds, which are in scope by definition) and, when the crawl obeys
    robots.txt, the robots rules of each URL's host (``host_robots``, which may fetch them:
    call it outside a transaction)."""
    rules = ScopeRules.for_crawl(crawl) if found_on is not None else None
    # A crawl that chose no scope and no patterns keeps Vellum's rule from before scopes as it
    # was: links to other hosts are not followed, and not listed either (every page links
    # off-site; a crawl's report and a reindexed one stay the same).
    lists_scope = crawl.scope != CrawlScope.HOST or bool(crawl.include or crawl.exclude)
    robots: dict[str, RobotsRules] = {}
    screened = Screened(found_on=found_on or "")
    seen: set[str] = set()
    for raw in urls:
        try:
            url = normalize_url(raw)
        except InvalidURL:
            continue
        if url in seen:
            continue
        seen.add(url)
        refusal = rules.refusal(url, found_on=found_on) if rules is not None else None
        if refusal is None and crawl.robots:
            parts = urlsplit(url)
            if parts.netloc not in robots:
                robots[parts.netloc] = host_robots(scheme=parts.scheme, host=parts.netloc)
            reason = robots[parts.netloc].refusal(url)
            refusal = (SkipReason.ROBOTS, reason) if reason else None
        if refusal is None:
            screened.wanted.append(url)
        elif refusal[0] != SkipReason.SCOPE or lists_scope:
            screened.skipped.append((url, *refusal))
    return screened


def host_robots(*, scheme: str, host: str) -> RobotsRules:
    """The robots.txt rules of ``host`` (``host[:port]``), kept on its Host row (with its
    Crawl-delay, which core/services/hosts.py reads when a result starts) for
    ROBOTS_FRESH (ROBOTS_UNREACHABLE_FRESH when the file could not be read); read again from
    ``scheme://host/robots.txt`` when older or never read (the Host row, like Snapshot.host,
    does not tell http from https: one file serves both)."""
    kept = Host.objects.filter(name=host).values(*ROBOTS_FIELDS).first()
    if kept is not None and _robots_fresh(kept):
        return RobotsRules(kept["robots_txt"], kept["robots_unreachable"])
    rules = fetch_robots(f"{scheme}://{host}")
    Host.objects.update_or_create(
        name=host,
        defaults={
            "robots_txt": rules.text,
            "robots_unreachable": rules.unreachable[:300],
            "robots_crawl_delay": rules.crawl_delay(),
            "robots_fetched_at": timezone.now(),
        },
    )
    logger.info("robots.txt of %s read%s", host, f": {rules.unreachable}" * bool(rules.unreachable))
    return rules


def _robots_fresh(kept: dict) -> bool:
    """True when the robots.txt kept on a Host row (``kept``: ROBOTS_FIELDS) is fresh."""
    if kept["robots_fetched_at"] is None:
        return False
    fresh = ROBOTS_UNREACHABLE_FRESH if kept["robots_unreachable"] else ROBOTS_FRESH
    return timezone.now() - kept["robots_fetched_at"] < fresh


def crawl_admit(*, crawl: Crawl, screened: Screened, known: set[str]) -> list[str]:
    """Return the URLs of ``screened.wanted`` to queue as new snapshots of ``crawl`` (those not
    in ``known``, its URLs already queued, and within its limits); record the rest of what was
    screened out, and what the limits leave out, as CrawlSkips. A limit reached stops the crawl
    growing (``Crawl.stop_growing``, with the reason its report gives).

    Call it in the transaction that creates the snapshots, with ``crawl`` locked (select_for_
    update) and fresh: the page count is read under that lock.
    """
    new = [url for url in screened.wanted if url not in known]
    skipped = list(screened.skipped)
    stop = ""
    if new and crawl_over_bytes(crawl=crawl):
        stop = f"max-bytes {crawl.max_bytes} reached"
        skipped += [(url, SkipReason.MAX_BYTES, stop) for url in new]
        new = []
    if new and crawl.max_pages is not None:
        room = max(crawl.max_pages - crawl.snapshots.count(), 0)
        if len(new) > room:
            stop = f"max-pages {crawl.max_pages} reached"
            skipped += [(url, SkipReason.MAX_PAGES, stop) for url in new[room:]]
            new = new[:room]
    crawl_record_skips(crawl=crawl, skipped=skipped, found_on=screened.found_on)
    # A crawl held meanwhile (a result of it was running) records the reason at its next
    # admission after release; its limits hold all the same, being counted every time.
    if stop and not crawl.stop_reason and crawl.status == CrawlStatus.STARTED:
        crawl.stop_growing(reason=stop)
        crawl.save()
        logger.info("crawl %s stops growing: %s", crawl.pk, stop)
    return new


def crawl_record_skips(
    *, crawl: Crawl, skipped: list[tuple[str, str, str]], found_on: str = ""
) -> None:
    """Record each ``(url, reason, detail)`` as a CrawlSkip of ``crawl`` (a URL once), met as a
    link on the page ``found_on`` ("": a seed)."""
    if skipped:
        CrawlSkip.objects.bulk_create(
            [
                CrawlSkip(
                    crawl=crawl, url=url, reason=reason, detail=detail[:300], found_on=found_on
                )
                for url, reason, detail in skipped
            ],
            ignore_conflicts=True,
        )


def crawl_bytes(*, crawl: Crawl) -> int:
    """Bytes the results of ``crawl`` hold, as its row said when read (``Crawl.bytes_written``,
    a running count kept as each result is recorded: read the row again for the count now)."""
    return crawl.bytes_written


def crawl_over_bytes(*, crawl: Crawl) -> bool:
    """True when ``crawl`` has a byte limit and its results wrote at least that many."""
    return crawl.max_bytes is not None and crawl_bytes(crawl=crawl) >= crawl.max_bytes
