"""The estimate before a crawl starts: how large its seeds are, and whether that fits on disk.

Every seed is asked for its headers (HEAD; a server that refuses HEAD with 405 or 501 is asked
with a GET whose body is never read) and its ``Content-Length`` (RFC 9110 §8.6) is added up. A
seed that gives no length, or no answer in ESTIMATE_TIMEOUT seconds, counts as unknown: the
estimate is a lower bound, and says how many seeds it could not measure. Links found by
``--depth`` are not known before the crawl and are not counted.

The expected size is that total times ESTIMATE_COPIES (a response is kept by wget, in the WARC
and in the WACZ). A crawl whose expected size is more than the disk guard leaves room for
(orchestrator/diskguard.py) is held, with that reason; otherwise it is released to run.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests
from django.conf import settings
from django.db import transaction
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from core.extractors.egress import EgressProxy
from core.extractors.errors import egress_failure
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.diskguard import disk_usage

logger = logging.getLogger(__name__)

ESTIMATING = "estimating the size of its seeds"  # the hold reason while the estimate runs
MAX_REDIRECTS = 10
NO_HEAD = {405, 501}  # Method Not Allowed, Not Implemented: ask with GET instead


@dataclass(frozen=True)
class SeedSize:
    """One seed's answer: its size in bytes, or None with the reason it is unknown."""

    url: str
    size: int | None
    problem: str = ""


def seed_sizes(urls: list[str], *, timeout: float, workers: int) -> list[SeedSize]:
    """Ask every URL of ``urls`` for its Content-Length, ``workers`` at a time, each within
    ``timeout`` seconds; return one SeedSize per URL, in order. Never raises for a URL: a
    failure is that seed's ``problem``."""
    with requests.Session() as session, ThreadPoolExecutor(max_workers=workers) as pool:
        session.max_redirects = MAX_REDIRECTS
        session.headers["User-Agent"] = settings.USER_AGENT
        session.trust_env = False  # the egress proxy, never one from the environment
        return list(pool.map(lambda url: _seed_size(session, url, timeout), urls))


def _seed_size(session: requests.Session, url: str, timeout: float) -> SeedSize:
    """Ask ``url`` through an egress proxy of its own, so that the address policy applies to
    it and its redirects, and a refusal is told apart from the server's own answer."""
    with EgressProxy() as proxy:
        size = _ask(session, url, timeout, {"http": proxy.url, "https": proxy.url})
        failure = egress_failure(proxy.refusals, proxy.unreachable)
    if failure and size.size is None:
        return SeedSize(url, None, failure[1])
    return size


def _ask(session: requests.Session, url: str, timeout: float, proxies: dict) -> SeedSize:
    try:
        response = session.head(url, allow_redirects=True, timeout=timeout, proxies=proxies)
        if response.status_code in NO_HEAD:
            with session.get(url, stream=True, timeout=timeout, proxies=proxies) as response:
                pass  # only the headers are wanted; closing drops the body unread
    except requests.RequestException as error:
        return SeedSize(url, None, _describe(error))
    if response.status_code >= 400:
        return SeedSize(url, None, f"HTTP {response.status_code}")
    length = response.headers.get("Content-Length", "")
    if not length.isdigit():
        return SeedSize(url, None, "no Content-Length")
    return SeedSize(url, int(length))


def _describe(error: requests.RequestException) -> str:
    if isinstance(error, requests.Timeout):
        return "no answer in time"
    if isinstance(error, requests.TooManyRedirects):
        return f"more than {MAX_REDIRECTS} redirects"
    if isinstance(error, requests.ConnectionError):
        return "cannot connect"
    return type(error).__name__


def summarize(sizes: list[SeedSize], *, room_bytes: int) -> dict:
    """The estimate as stored on the crawl (JSON): bytes of the seeds that gave a length, the
    expected size (times ESTIMATE_COPIES), seeds measured and unknown (a few named), the room
    the disk guard leaves and whether the crawl fits in it."""
    measured = [seed.size for seed in sizes if seed.size is not None]
    unknown = [seed for seed in sizes if seed.size is None]
    seed_bytes = sum(measured)
    expected = int(seed_bytes * settings.ESTIMATE_COPIES)
    return {
        "seed_bytes": seed_bytes,
        "expected_bytes": expected,
        "measured": len(measured),
        "unknown": len(unknown),
        "unknown_examples": [f"{seed.url}: {seed.problem}" for seed in unknown[:5]],
        "room_bytes": room_bytes,
        "fits": expected <= room_bytes,
        "at": timezone.now().isoformat(),
    }


def describe(estimate: dict) -> str:
    """One line for people: ``expected 12.3 MB (4.1 MB in 40 seed(s), kept 3 times; 2 unknown);
    the disk guard leaves 80.0 GB``."""
    unknown = f"; {estimate['unknown']} unknown" if estimate["unknown"] else ""
    return (
        f"expected {filesizeformat(estimate['expected_bytes'])} "
        f"({filesizeformat(estimate['seed_bytes'])} in {estimate['measured']} seed(s), "
        f"kept {settings.ESTIMATE_COPIES:g} times{unknown}); the disk guard leaves "
        f"{filesizeformat(estimate['room_bytes'])}"
    )


def crawl_estimate(*, crawl: Crawl) -> dict:
    """Measure ``crawl``'s seeds, store the estimate on it and return it.

    A crawl held while it was estimated (``crawl_create(hold_reason=ESTIMATING)``) is released
    when it fits and stays held, with the reason, when it does not; a crawl in any other state
    only gets its estimate. Raises OSError when the disk holding DATA_DIR cannot be measured.
    """
    room = disk_usage().room_bytes
    sizes = seed_sizes(
        crawl.seed_list(), timeout=settings.ESTIMATE_TIMEOUT, workers=settings.ESTIMATE_WORKERS
    )
    estimate = summarize(sizes, room_bytes=room)
    with transaction.atomic():
        crawl = Crawl.objects.select_for_update().get(pk=crawl.pk)
        crawl.estimate = estimate
        held_for_it = crawl.status == CrawlStatus.HELD and crawl.hold_reason == ESTIMATING
        if held_for_it and estimate["fits"]:
            crawl.release()
        elif held_for_it:
            crawl.explain_hold(reason=f"would not fit under the disk guard: {describe(estimate)}")
        crawl.save()
    logger.info("crawl %s: %s", crawl.pk, describe(estimate))
    return estimate
