"""Fair under faults (issue 19, part 4), end to end: 100 good pages beside three hostile hosts.

Crawls run by a real orchestrator with its actors and the real curl and wget (headers, wget,
title and favicon) on whatever database the suite uses, ROUNDS times over: the 100 good pages
of one server alone, then the same pages after three URLs on each of three hostile servers,
new ones on other ports of 127.0.0.1 each round, that never answer, trickle a byte a second, or
reset the connection (core/tests/hostile_site.py). Timeouts are short (EXTRACTOR_TIMEOUT 3 s,
connect 2 s, two attempts, backoffs of at most 4 s) so that the test takes a few minutes.

What must hold: every good page sealed with every result succeeded; every hostile result failed
or skipped with its reason; nothing left started; each hostile host paused by its breaker, the
good one never; no host ever ran more than HOST_CONCURRENCY results at once; hostile snapshots
backed off as a whole (fewer runs against a hostile server than its results times their
attempts); no double claim, no "database is locked", no traceback.

The issue wants the good pages done within 1.3x their time alone. That time runs from the
crawl's first claim of a result (the orchestrator's start-up is not the pages') to the last
good page sealed; the test prints it for every run and the ratio of the best of each kind, for
the closing note, and never asserts it (a 2-core machine shared with other work times nothing
reliably).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from core.choices import HostStatus, ResultStatus, SnapshotStatus
from core.extractors.registry import READS_SAVED
from core.models import ArchiveResult, Host, Snapshot
from core.services.crawls import crawl_create
from core.tests.hostile_site import HostileSite
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator import claimlog
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

ROUNDS = 2
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
RUN_LIMIT = 300  # seconds a crawl may take before the test fails
SHARED = "page did not answer"  # the error of a result that shared another's failed attempt
PROBLEM_LINES = re.compile(rb"database is locked|Traceback", re.IGNORECASE)


@pytest.fixture
def good_site() -> Iterator[ManyPagesSite]:
    site = ManyPagesSite(GOOD_PAGES).start()
    yield site
    site.stop()


@pytest.fixture
def hostile_servers() -> Iterator[Callable[[], dict[str, HostileSite]]]:
    """Start a new set of the three hostile servers (new ports: hosts no breaker knows)."""
    started: list[HostileSite] = []

    def start() -> dict[str, HostileSite]:
        sites = {name: HostileSite().start() for name in HOSTILE}
        started.extend(sites.values())
        return sites

    yield start
    for site in started:
        site.stop()


@dataclass
class Run:
    """One crawl, run to its seal: its installation, its crawl, and the seconds its good pages
    took from the crawl's first claim of a result to the last of them sealed."""

    vellum: Installation
    crawl: Crawl
    good_seconds: float = 0.0


def run_crawl(vellum: Installation, urls: list[str], good_urls: list[str]) -> Run:
    """Queue ``urls`` as one crawl, run the orchestrator until it is sealed, stop it."""
    name = vellum.data_dir.name
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
    run = Run(vellum, Crawl.objects.get(pk=crawl.pk))
    first = min(hold.start for hold in result_holds(run))
    good = Snapshot.objects.filter(crawl=crawl, url__in=good_urls)
    last = max(good.values_list("end_ts", flat=True))
    run.good_seconds = (last - first).total_seconds()
    return run


def result_holds(run: Run, urls: list[str] | None = None) -> list[claimlog.Hold]:
    """The claims log's holds of the crawl's results (of ``urls`` only, if given)."""
    results = ArchiveResult.objects.filter(snapshot__crawl=run.crawl)
    if urls is not None:
        results = results.filter(snapshot__url__in=urls)
    pks = {str(pk) for pk in results.values_list("pk", flat=True)}
    holds = claimlog.read_holds(run.vellum.logs_dir / "claims.jsonl")
    return [hold for hold in holds if hold.kind == "archiveresult" and hold.pk in pks]


def actor_seconds(run: Run, urls: list[str]) -> float:
    """Seconds actors held results of ``urls``, added up (from the claims log)."""
    return sum((hold.end - hold.start).total_seconds() for hold in result_holds(run, urls))


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


def host_of(url: str) -> str:
    return url.split("/")[2]


def check_good_pages(run: Run, good_urls: list[str]) -> None:
    """Every good page sealed, every one of its results succeeded."""
    good = Snapshot.objects.filter(crawl=run.crawl, url__in=good_urls)
    assert good.count() == len(good_urls)
    assert set(good.values_list("status", flat=True)) == {SnapshotStatus.SEALED}
    results = ArchiveResult.objects.filter(snapshot__in=good)
    assert results.count() == len(good_urls) * len(EXTRACTORS)
    assert set(results.values_list("status", flat=True)) == {ResultStatus.SUCCEEDED}


def check_hostile_pages(
    run: Run, sites: dict[str, HostileSite], urls: dict[str, list[str]]
) -> dict[str, int]:
    """Every hostile result failed or skipped with its reason; each hostile host's breaker
    opened; each hostile snapshot backed off as a whole. Return the page requests each hostile
    server saw."""
    requests = {}
    for name, site in sites.items():
        results = ArchiveResult.objects.filter(
            snapshot__crawl=run.crawl, snapshot__url__in=urls[name]
        )
        assert results.count() == HOSTILE_PER_HOST * len(EXTRACTORS)
        for result in results:
            assert result.status in (ResultStatus.FAILED, ResultStatus.SKIPPED), result.error
            assert any(word in result.error for word in HOSTILE[name][1]), (name, result.error)
        host = Host.objects.get(name=host_of(site.url("/")))
        assert host.failures >= 3, (name, host.status, host.failures, host.error)
        # Runs of each result's every attempt would make this many requests; shared failures
        # spare some. (favicon's request for /favicon.ico is not the page's, and not counted.)
        requests[name] = site.requests_containing(HOSTILE[name][0])
        assert requests[name] < HOSTILE_PER_HOST * len(EXTRACTORS) * MAX_ATTEMPTS, requests
        assert results.filter(error__contains=SHARED).exists(), name
    return requests


def check_run(run: Run, hosts: list[str]) -> None:
    """Nothing left started; no host over HOST_CONCURRENCY; no double claim; quiet logs."""
    assert not ArchiveResult.objects.filter(
        snapshot__crawl=run.crawl, status=ResultStatus.STARTED
    ).exists()
    assert not Snapshot.objects.filter(crawl=run.crawl, status=SnapshotStatus.STARTED).exists()
    for host in hosts:
        # Results that read what the snapshot saved ask the host nothing and hold no place.
        results = ArchiveResult.objects.filter(
            snapshot__crawl=run.crawl, snapshot__host=host
        ).exclude(extractor__in=READS_SAVED)
        assert most_at_once(results) <= HOST_CONCURRENCY, (run.crawl.pk, host)
    claims = check_claims(run.vellum.logs_dir / "claims.jsonl", run.crawl)
    assert claims.double_claims == [], "\n".join(map(str, claims.double_claims[:20]))
    problems = lines_matching(run.vellum.logs_dir, PROBLEM_LINES)
    assert problems == [], "\n".join(problems[:20])


@pytest.mark.timeout(2 * ROUNDS * RUN_LIMIT + 180)
def test_good_pages_keep_flowing_while_hostile_hosts_wait(
    good_site: ManyPagesSite, hostile_servers, settings, tmp_path: Path
) -> None:
    settings.EXTRACTORS = list(EXTRACTORS)
    good_urls = good_site.urls()
    good_host = host_of(good_urls[0])
    alone_runs: list[Run] = []
    mixed_runs: list[Run] = []
    for round_number in range(1, ROUNDS + 1):
        alone = Installation(tmp_path / f"alone-{round_number}", settings, **FAIR_ENV)
        alone_runs.append(run_crawl(alone, good_urls, good_urls))
        check_good_pages(alone_runs[-1], good_urls)
        check_run(alone_runs[-1], [good_host])

        sites = hostile_servers()
        hostile = {
            name: [site.url(f"{HOSTILE[name][0]}?n={n}") for n in range(HOSTILE_PER_HOST)]
            for name, site in sites.items()
        }
        every_hostile = [url for urls in hostile.values() for url in urls]
        mixed = Installation(tmp_path / f"mixed-{round_number}", settings, **FAIR_ENV)
        # The hostile URLs first: their snapshots start first and meet the actors first.
        run = run_crawl(mixed, every_hostile + good_urls, good_urls)
        mixed_runs.append(run)
        check_good_pages(run, good_urls)
        requests = check_hostile_pages(run, sites, hostile)
        check_run(run, [good_host, *(host_of(urls[0]) for urls in hostile.values())])
        good_row = Host.objects.get(name=good_host)
        assert (good_row.status, good_row.failures) == (HostStatus.OK, 0)

        print(
            "\n"
            + summary(
                f"fair under faults on {connection.vendor}, round {round_number}",
                good_alone_s=round(alone_runs[-1].good_seconds, 1),
                good_with_hostile_s=round(run.good_seconds, 1),
                actor_s_on_good_host=(
                    round(actor_seconds(alone_runs[-1], good_urls), 1),
                    round(actor_seconds(run, good_urls), 1),
                ),
                actor_s_on_hostile_hosts=round(actor_seconds(run, every_hostile), 1),
                hostile_page_requests=requests,
                shared_failures=ArchiveResult.objects.filter(
                    snapshot__crawl=run.crawl, error__contains=SHARED
                ).count(),
                hostile_hosts_failures={
                    name: Host.objects.get(name=host_of(urls[0])).failures
                    for name, urls in hostile.items()
                },
            )
        )
    best_alone = min(run.good_seconds for run in alone_runs)
    best_mixed = min(run.good_seconds for run in mixed_runs)
    print(
        summary(
            f"fair under faults on {connection.vendor}",
            good_pages=len(good_urls),
            hostile_urls=3 * HOSTILE_PER_HOST,
            best_good_alone_s=round(best_alone, 1),
            best_good_with_hostile_s=round(best_mixed, 1),
            ratio=round(best_mixed / best_alone, 2),
        )
    )
