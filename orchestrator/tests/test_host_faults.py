"""Fair under faults (issue 19, part 4), end to end: 100 good pages beside three hostile hosts.

Two crawls, each run by a real orchestrator with its actors and the real curl and wget
(headers, wget, title and favicon) on whatever database the suite uses: the 100 good pages of
one server alone, then the same pages after three URLs on each of three hostile servers, on
other ports of 127.0.0.1, that never answer, trickle a byte a second, or reset the connection
(core/tests/hostile_site.py). Timeouts are short (EXTRACTOR_TIMEOUT 3 s, connect 2 s, two
attempts, backoffs of at most 4 s) so that the test takes a few minutes.

What must hold: every good page sealed with every result succeeded; every hostile result failed
or skipped with its reason; nothing left started; each hostile host paused by its breaker, the
good one never; no host ever ran more than HOST_CONCURRENCY results at once; hostile snapshots
backed off as a whole (fewer runs against a hostile server than its results times their
attempts); no double claim, no "database is locked", no traceback. The issue wants the good
pages done within 1.3x their time alone: the figures are printed for the closing note, never
asserted (a 2-core machine shared with other work times nothing reliably).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from core.choices import HostStatus, ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Host, Snapshot
from core.services.crawls import crawl_create
from core.tests.hostile_site import HostileSite
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.tests.many_pages import ManyPagesSite
from orchestrator.tests.test_fault_injection import (
    Installation,
    actor_processes,
    check_claims,
    progress,
    summary,
    wait_until,
)
from orchestrator.tests.test_load import lines_matching

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GOOD_PAGES = 100
HOSTILE_PER_HOST = 3
EXTRACTORS = ("headers", "wget", "title", "favicon")
MAX_ATTEMPTS = 2
HOST_CONCURRENCY = 2
FAIR_ENV = {
    "EXTRACTORS": ",".join(EXTRACTORS),
    "EXTRACTOR_TIMEOUT": "3",
    "CONNECT_TIMEOUT_SECONDS": "2",
    "MAX_ATTEMPTS": str(MAX_ATTEMPTS),
    "BACKOFF_BASE": "0.5",
    "BACKOFF_CAP": "4",
    "ACTORS_ARCHIVERESULT": "4",
    "HOST_CONCURRENCY": str(HOST_CONCURRENCY),
    "HOST_PAUSE_AFTER_FAILURES": "3",
}
# Each hostile server's route, and the words one of which each of its results' errors holds.
HOSTILE = {
    "hang": ("/never", ("timed out",)),
    "trickle": ("/trickle", ("timed out",)),
    "reset": ("/reset", ("replied with nothing", "network failure", "reset")),
}
RUN_LIMIT = 400  # seconds a crawl may take before the test fails
SHARED = "page did not answer"  # the error of a result that shared another's failed attempt
LOCKED = re.compile(rb"database is locked", re.IGNORECASE)


@pytest.fixture
def good_site() -> Iterator[ManyPagesSite]:
    site = ManyPagesSite(GOOD_PAGES).start()
    yield site
    site.stop()


@pytest.fixture
def hostile_sites() -> Iterator[dict[str, HostileSite]]:
    sites = {name: HostileSite().start() for name in HOSTILE}
    yield sites
    for site in sites.values():
        site.stop()


def run_crawl(vellum: Installation, urls: list[str], name: str) -> Crawl:
    """Queue ``urls`` as one crawl, run the orchestrator until it is sealed, stop it."""
    crawl = crawl_create(data="\n".join(urls).encode(), source_name=f"{name}.txt")
    try:
        vellum.start_orchestrator()
        deadline = time.monotonic() + RUN_LIMIT
        while Crawl.objects.get(pk=crawl.pk).status != CrawlStatus.SEALED:
            if time.monotonic() > deadline:
                pytest.fail(f"{name}: crawl not sealed after {RUN_LIMIT} s: {progress(crawl)}")
            vellum.check_orchestrator_runs()
            time.sleep(0.5)
        vellum.stop()
        wait_until(
            lambda: not actor_processes(lambda p: p.environ_has(f"DATA_DIR={vellum.data_dir}")),
            timeout=60,
            what="every actor to exit",
        )
    finally:
        vellum.kill_everything()
    return Crawl.objects.get(pk=crawl.pk)


def seconds_to_seal(crawl: Crawl, urls: list[str]) -> float:
    """Seconds from the crawl's creation to the last of ``urls``' snapshots sealed."""
    snapshots = Snapshot.objects.filter(crawl=crawl, url__in=urls)
    last = max(snapshots.values_list("end_ts", flat=True))
    return (last - crawl.created_at).total_seconds()


def most_at_once(results) -> int:
    """The most of ``results`` whose last runs (``start_ts`` to ``end_ts``) overlapped at one
    moment. A result that ended sharing another's failure did not end a run: its ``start_ts``
    is an earlier run's, if any, and it is left out."""
    runs = results.exclude(start_ts=None).exclude(end_ts=None).exclude(error__contains=SHARED)
    events = []
    for start, end in runs.values_list("start_ts", "end_ts"):
        events += [(start, 1), (end, -1)]
    running = most = 0
    for _moment, change in sorted(events, key=lambda event: (event[0], event[1])):
        running += change
        most = max(most, running)
    return most


def check_quiet_logs(vellum: Installation) -> list[str]:
    """Lines of the installation's logs that say "database is locked" or hold a traceback."""
    return lines_matching(vellum.logs_dir, LOCKED) + lines_matching(
        vellum.logs_dir, re.compile(rb"Traceback")
    )


@pytest.mark.timeout(2 * RUN_LIMIT + 180)
def test_good_pages_keep_flowing_while_hostile_hosts_wait(
    good_site: ManyPagesSite, hostile_sites: dict[str, HostileSite], settings, tmp_path: Path
) -> None:
    settings.EXTRACTORS = list(EXTRACTORS)
    good_urls = good_site.urls()
    hostile_urls = {
        name: [site.url(f"{HOSTILE[name][0]}?n={n}") for n in range(HOSTILE_PER_HOST)]
        for name, site in hostile_sites.items()
    }
    every_hostile = [url for urls in hostile_urls.values() for url in urls]

    alone = Installation(tmp_path / "alone", settings, **FAIR_ENV)
    alone_crawl = run_crawl(alone, good_urls, "alone")
    alone_claims = check_claims(alone.logs_dir / "claims.jsonl", alone_crawl)
    alone_noise = check_quiet_logs(alone)

    mixed = Installation(tmp_path / "mixed", settings, **FAIR_ENV)
    # The hostile URLs first: their snapshots start first and meet the actors first.
    mixed_crawl = run_crawl(mixed, every_hostile + good_urls, "mixed")
    mixed_claims = check_claims(mixed.logs_dir / "claims.jsonl", mixed_crawl)
    mixed_noise = check_quiet_logs(mixed)

    good_alone = seconds_to_seal(alone_crawl, good_urls)
    good_mixed = seconds_to_seal(mixed_crawl, good_urls)
    hostile_results = ArchiveResult.objects.filter(
        snapshot__crawl=mixed_crawl, snapshot__url__in=every_hostile
    )
    page_requests = {
        name: site.requests_containing(HOSTILE[name][0]) for name, site in hostile_sites.items()
    }
    hosts = {site.url("/").split("/")[2]: name for name, site in hostile_sites.items()}
    good_host = good_site.url("/").split("/")[2]
    print(
        "\n"
        + summary(
            f"fair under faults on {connection.vendor}",
            good_pages=len(good_urls),
            hostile_urls=len(every_hostile),
            good_alone_s=round(good_alone, 1),
            good_with_hostile_s=round(good_mixed, 1),
            ratio=round(good_mixed / good_alone, 2),
            mixed_crawl_sealed_after_s=round(
                (mixed_crawl.end_ts - mixed_crawl.created_at).total_seconds(), 1
            ),
            hostile_page_requests=page_requests,
            hostile_results=hostile_results.count(),
            shared_failures=hostile_results.filter(error__contains=SHARED).count(),
            hosts={h.name: (h.status, h.failures) for h in Host.objects.all()},
        )
    )

    # Every good page sealed, every one of its results succeeded.
    for crawl in (alone_crawl, mixed_crawl):
        good = Snapshot.objects.filter(crawl=crawl, url__in=good_urls)
        assert good.count() == len(good_urls)
        assert set(good.values_list("status", flat=True)) == {SnapshotStatus.SEALED}
        results = ArchiveResult.objects.filter(snapshot__in=good)
        assert results.count() == len(good_urls) * len(EXTRACTORS)
        assert set(results.values_list("status", flat=True)) == {ResultStatus.SUCCEEDED}
    # Every hostile result failed or skipped, saying why; nothing stays started.
    assert hostile_results.count() == len(every_hostile) * len(EXTRACTORS)
    for result in hostile_results.select_related("snapshot"):
        name = next(n for n, urls in hostile_urls.items() if result.snapshot.url in urls)
        assert result.status in (ResultStatus.FAILED, ResultStatus.SKIPPED), result.error
        assert any(word in result.error for word in HOSTILE[name][1]), (name, result.error)
    started = ArchiveResult.objects.filter(status=ResultStatus.STARTED).count()
    assert started == 0
    assert not Snapshot.objects.filter(status=SnapshotStatus.STARTED).exists()
    # Each hostile host's breaker opened; the good host's never did.
    for host in Host.objects.filter(name__in=hosts):
        assert host.failures >= 3, (hosts[host.name], host.failures, host.error)
    good_row = Host.objects.get(name=good_host)
    assert (good_row.status, good_row.failures) == (HostStatus.OK, 0)
    # A hostile snapshot backed off as a whole: its server saw fewer runs than its results
    # times their attempts, and some results shared another's failed attempt.
    for name, requests in page_requests.items():
        assert requests < HOSTILE_PER_HOST * len(EXTRACTORS) * MAX_ATTEMPTS, (name, requests)
    assert hostile_results.filter(error__contains=SHARED).exists()
    # No host ran more than HOST_CONCURRENCY results at once.
    for crawl in (alone_crawl, mixed_crawl):
        for host in [good_host, *hosts]:
            results = ArchiveResult.objects.filter(snapshot__crawl=crawl, snapshot__host=host)
            assert most_at_once(results) <= HOST_CONCURRENCY, (crawl.pk, host)
    # The claims and the logs.
    for claims in (alone_claims, mixed_claims):
        assert claims.double_claims == [], "\n".join(map(str, claims.double_claims[:20]))
    assert alone_noise == [] and mixed_noise == [], "\n".join((alone_noise + mixed_noise)[:20])
