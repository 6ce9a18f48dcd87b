"""Politeness and scope of a crawl (issue 21, item 2): robots.txt, scope and patterns, page and
byte limits, the per-crawl host limit and delay, and a 429 that slows a whole host.

The crawls run through the whole pipeline in this process (core/tests/pipeline.py) against a
site on 127.0.0.1 (core/tests/polite_site.py); the end-to-end test at the bottom runs
``manage.py add --wait`` with real actors, where the site counts the requests it serves at once.
"""

from __future__ import annotations

import importlib
import itertools
import json
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.models import Sum
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_fsm import TransitionNotAllowed
from model_bakery import baker

from core.choices import HostStatus, ResultStatus, SnapshotStatus
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.extractors.headers import HeadersExtractor
from core.extractors.robots import ROBOTS_CRAWL_DELAY_CAP, RobotsRules
from core.extractors.wget import WgetExtractor
from core.models import ArchiveResult, Host, Snapshot
from core.services.crawls import CrawlOptions, check_crawl_options, crawl_create, crawl_start
from core.services.hosts import host_note_outcome, host_start_wait
from core.services.rearchive import snapshot_rearchive
from core.services.removal import snapshot_remove
from core.services.results import result_tick
from core.services.schedules import schedule_run_now
from core.services.scope import host_robots
from core.services.snapshots import (
    snapshot_queue_outlinks,
    snapshot_screen_outlinks,
    snapshot_start,
)
from core.services.tokens import token_create
from core.tests.pipeline import archive_crawl
from core.tests.polite_site import PAGES, PRIVATE, PoliteSite
from core.tests.users import keeper, staff_with
from crawls.choices import CrawlScope, CrawlStatus, SkipReason
from crawls.models import Crawl, CrawlSchedule, crawl_add_bytes
from crawls.seeds import InputError
from orchestrator.claims import hand_back
from orchestrator.tests.test_orchestrator import CRAWL_TIMEOUT, Vellum

pytestmark = pytest.mark.django_db(transaction=True)

LEASE = timedelta(seconds=600)
PAGE_NUMBERS = itertools.count()


@pytest.fixture
def site() -> Iterator[PoliteSite]:
    server = PoliteSite().start()
    yield server
    server.stop()


@pytest.fixture
def lean(settings) -> None:
    """The extractors that fetch a page and find its links, nothing more (a quick crawl)."""
    settings.EXTRACTORS = ["wget", "outlinks"]


def crawl_of(site: PoliteSite, **options) -> Crawl:
    return crawl_create(
        data=site.url("/index.html").encode(),
        source_name="urls.txt",
        options=CrawlOptions(depth=1, **options),
    )


def skipped(crawl: Crawl, reason: str) -> list[str]:
    return sorted(crawl.skips.filter(reason=reason).values_list("url", flat=True))


# --- robots.txt, scope, patterns ----------------------------------------------------------------


@pytest.mark.usefixtures("data_dir", "lean")
def test_a_crawl_that_obeys_robots_skips_the_disallowed_pages_and_lists_them(
    site: PoliteSite,
) -> None:
    crawl = archive_crawl(crawl_of(site, robots=True, include="/other/"))

    urls = set(crawl.snapshots.values_list("url", flat=True))
    assert site.url("/p/1.html") in urls
    assert site.url("/other/x.html") in urls  # host scope, and included anyway
    assert not urls & {site.url(path) for path in PRIVATE}
    assert site.asked("/private/a.html") == site.asked("/private/b.html") == 0
    assert site.asked("/robots.txt") == 1  # kept on the Host row, not asked again per page
    assert skipped(crawl, SkipReason.ROBOTS) == sorted(site.url(path) for path in PRIVATE)
    assert crawl.report["skipped"] == {"robots": 2, "scope": 1}
    listed = {entry["url"]: entry for entry in crawl.report["skipped_urls"]}
    assert listed[site.url("/private/a.html")]["detail"] == "disallowed by robots.txt"
    assert listed["http://example.invalid/away"]["reason"] == "scope"


@pytest.mark.usefixtures("data_dir", "lean")
def test_without_robots_the_disallowed_pages_are_archived(site: PoliteSite) -> None:
    crawl = archive_crawl(crawl_of(site, exclude=r"/p/\d+\.html$"))

    urls = set(crawl.snapshots.values_list("url", flat=True))
    assert {site.url(path) for path in PRIVATE} <= urls
    assert site.asked("/robots.txt") == 0
    assert len(skipped(crawl, SkipReason.EXCLUDED)) == PAGES
    assert "stopped" not in crawl.report


@pytest.mark.usefixtures("data_dir", "lean")
def test_an_unreachable_robots_txt_disallows_everything(site: PoliteSite) -> None:
    crawl = crawl_create(
        data=b"http://127.0.0.1:9/index.html",  # nothing listens on port 9 (discard)
        source_name="urls.txt",
        options=CrawlOptions(robots=True),
    )
    crawl = archive_crawl(crawl)

    assert not crawl.snapshots.exists()
    (skip,) = crawl.skips.all()
    assert skip.reason == SkipReason.ROBOTS
    assert skip.detail.startswith("robots.txt unreachable")


@pytest.mark.usefixtures("data_dir", "lean")
def test_a_missing_robots_txt_allows_everything(site: PoliteSite) -> None:
    site.files.pop("/robots.txt")
    crawl = archive_crawl(crawl_of(site, robots=True, scope=CrawlScope.PAGE))

    assert list(crawl.snapshots.values_list("url", flat=True)) == [site.url("/index.html")]
    assert crawl.report["skipped"] == {"scope": PAGES + len(PRIVATE) + 2}


def robots_read_ago(host: str, minutes: float) -> None:
    ago = timezone.now() - timedelta(minutes=minutes)
    Host.objects.filter(name=host).update(robots_fetched_at=ago)


def test_an_unreachable_robots_txt_is_asked_again_after_ten_minutes(data_dir) -> None:
    host = "127.0.0.1:9"  # nothing listens on port 9 (discard)
    assert host_robots(scheme="http", host=host).unreachable
    robots_read_ago(host, 9)

    with CaptureQueriesContext(connection) as kept:
        assert host_robots(scheme="http", host=host).unreachable
    robots_read_ago(host, 11)
    host_robots(scheme="http", host=host)

    assert len(kept) == 1  # one read, no fetch, no write
    fetched_at = Host.objects.get(name=host).robots_fetched_at
    assert timezone.now() - fetched_at < timedelta(minutes=1)


def test_a_readable_robots_txt_is_kept_for_an_hour(data_dir, site: PoliteSite) -> None:
    host = f"127.0.0.1:{site.port}"
    assert host_robots(scheme="http", host=host).refusal(site.url("/private/a.html"))
    robots_read_ago(host, 59)
    host_robots(scheme="http", host=host)
    assert site.asked("/robots.txt") == 1
    robots_read_ago(host, 61)
    host_robots(scheme="http", host=host)
    assert site.asked("/robots.txt") == 2
    assert Host.objects.filter(name=host).count() == 1


@pytest.mark.parametrize(
    ("text", "delay"),
    [
        ("User-agent: *\nCrawl-delay: 2.5\n", 2.5),
        ("User-agent: vellum\nCrawl-delay: 4\n\nUser-agent: *\nCrawl-delay: 1\n", 4.0),
        ("User-agent: *\nCrawl-delay: 86400\n", ROBOTS_CRAWL_DELAY_CAP),
        ("User-agent: *\nDisallow: /private/\n", None),
        ("User-agent: *\nCrawl-delay: soon\n", None),
    ],
)
def test_the_crawl_delay_robots_txt_asks_of_vellum(text: str, delay: float | None) -> None:
    assert RobotsRules(text).crawl_delay() == delay
    assert RobotsRules(text, unreachable="HTTP 503").crawl_delay() is None


def test_a_crawl_delay_is_kept_with_the_hosts_robots_txt(data_dir) -> None:
    site = PoliteSite(robots=b"User-agent: *\nCrawl-delay: 7\nDisallow: /private/\n").start()
    try:
        host_robots(scheme="http", host=f"127.0.0.1:{site.port}")
    finally:
        site.stop()

    assert Host.objects.get(name=f"127.0.0.1:{site.port}").robots_crawl_delay == 7


# --- limits -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("data_dir", "lean")
def test_max_pages_seals_after_that_many_with_the_reason(site: PoliteSite) -> None:
    crawl = archive_crawl(crawl_of(site, max_pages=20))

    assert crawl.status == CrawlStatus.SEALED
    assert crawl.snapshots.count() == 20
    assert crawl.report["snapshots"] == {"sealed": 20}
    assert crawl.report["stopped"] == crawl.stop_reason == "max-pages 20 reached"
    assert len(skipped(crawl, SkipReason.MAX_PAGES)) == PAGES + len(PRIVATE) + 1 - 19


@pytest.mark.usefixtures("data_dir", "lean")
def test_max_bytes_stops_following_links_once_reached(site: PoliteSite) -> None:
    crawl = archive_crawl(crawl_of(site, max_bytes=1))

    assert crawl.status == CrawlStatus.SEALED
    assert crawl.report["stopped"] == crawl.stop_reason == "max-bytes 1 reached"
    assert list(crawl.snapshots.values_list("url", flat=True)) == [site.url("/index.html")]
    assert len(skipped(crawl, SkipReason.MAX_BYTES)) == PAGES + len(PRIVATE) + 1


@pytest.mark.usefixtures("data_dir", "lean")
def test_a_crawls_byte_count_follows_its_results_outputs(site: PoliteSite) -> None:
    crawl = archive_crawl(crawl_of(site, scope=CrawlScope.PAGE))
    held = ArchiveResult.objects.filter(snapshot__crawl=crawl).aggregate(n=Sum("output_size"))

    assert crawl.bytes_written == held["n"] > 0
    assert crawl.report["bytes"] == held["n"]
    (snapshot,) = crawl.snapshots.all()
    snapshot_rearchive(snapshot=snapshot)  # the earlier run's bytes move to history/
    assert Crawl.objects.get(pk=crawl.pk).bytes_written == 0


def test_a_crawl_saved_from_an_older_read_keeps_the_byte_count() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    read_before = Crawl.objects.get(pk=crawl.pk)
    crawl_add_bytes(crawl.pk, 1234)  # a result recorded meanwhile

    read_before.stop_growing(reason="max-pages 1 reached")
    read_before.save()

    assert Crawl.objects.get(pk=crawl.pk).bytes_written == 1234


def test_the_migration_counts_the_bytes_each_crawl_held() -> None:
    migration = importlib.import_module("crawls.migrations.0014_crawl_bytes_written")
    crawl, empty = baker.make(Crawl, _quantity=2)
    for size, url in ((700, "http://a.example/"), (300, "http://b.example/")):
        snapshot = baker.make(Snapshot, crawl=crawl, url=url)
        baker.make(ArchiveResult, snapshot=snapshot, output_size=size, extractor="wget")

    migration.count_bytes(django_apps, None)

    assert Crawl.objects.get(pk=crawl.pk).bytes_written == 1000
    assert Crawl.objects.get(pk=empty.pk).bytes_written == 0


def test_removing_a_snapshot_takes_its_bytes_off_its_crawl(data_dir) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.SEALED)
    snapshot = baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.SEALED, retry_at=None)
    baker.make(
        ArchiveResult,
        snapshot=snapshot,
        output_size=700,
        status=ResultStatus.SUCCEEDED,
        retry_at=None,
    )
    crawl_add_bytes(crawl.pk, 1000)

    snapshot_remove(snapshot_id=snapshot.pk)

    assert Crawl.objects.get(pk=crawl.pk).bytes_written == 300


@pytest.mark.usefixtures("data_dir", "lean")
def test_reindex_brings_back_the_options_the_skips_and_the_stop(site: PoliteSite) -> None:
    crawl = archive_crawl(crawl_of(site, robots=True, exclude="/p/1\\.html$", max_pages=4))
    skips = set(crawl.skips.values_list("url", "reason", "detail", "found_on"))
    index = json.loads((crawl.snapshots.get(depth=0).output_dir / "index.json").read_text())
    assert index["crawl"]["politeness"]["max_pages"] == 4
    assert {entry["reason"] for entry in index["snapshot"]["skipped"]} >= {"robots", "excluded"}
    assert crawl.report["politeness"] == {"robots": True, "exclude": "/p/1\\.html$", "max_pages": 4}

    call_command("flush", interactive=False, verbosity=0)
    call_command("reindex", stdout=StringIO())

    restored = Crawl.objects.get(pk=crawl.pk)
    assert restored.politeness_options() == crawl.politeness_options()
    assert restored.stop_reason == crawl.stop_reason == "max-pages 4 reached"
    assert set(restored.skips.values_list("url", "reason", "detail", "found_on")) == skips
    assert without_duration(restored.report) == without_duration(crawl.report)


def without_duration(report: dict) -> dict:
    return {name: value for name, value in report.items() if name != "duration_seconds"}


def test_max_pages_counts_the_seeds_too(data_dir, settings) -> None:
    settings.EXTRACTORS = ["title"]
    crawl = crawl_create(
        data=b"http://a.example/\nhttp://b.example/\nhttp://c.example/",
        source_name="urls.txt",
        options=CrawlOptions(max_pages=2),
    )
    crawl_start(crawl=crawl)

    assert crawl.snapshots.count() == 2
    assert skipped(crawl, SkipReason.MAX_PAGES) == ["http://c.example/"]
    assert Crawl.objects.get(pk=crawl.pk).stop_reason == "max-pages 2 reached"


def test_a_crawl_starts_under_its_row_lock_with_the_limit_it_has_then(data_dir, settings) -> None:
    settings.EXTRACTORS = ["title"]
    crawl = crawl_create(
        data=b"http://a.example/\nhttp://b.example/\nhttp://c.example/",
        source_name="urls.txt",
    )
    claimed = Crawl.objects.get(pk=crawl.pk)
    Crawl.objects.filter(pk=crawl.pk).update(max_pages=1)  # changed since the claim read it

    with CaptureQueriesContext(connection) as queries:
        crawl_start(crawl=claimed)

    assert claimed.snapshots.count() == 1
    assert claimed.stop_reason == "max-pages 1 reached"
    if connection.features.has_select_for_update:  # PostgreSQL; SQLite locks the database
        assert any("FOR UPDATE" in query["sql"] for query in queries)


def test_a_held_crawl_still_keeps_its_page_limit(data_dir) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.HELD, max_pages=1, depth=1)
    parent = baker.make(Snapshot, crawl=crawl, url="http://a.example/", status="started")

    screened = snapshot_screen_outlinks(snapshot=parent, urls=["http://a.example/b"])
    queued = snapshot_queue_outlinks(snapshot=parent, screened=screened)

    assert queued == 0
    assert skipped(crawl, SkipReason.MAX_PAGES) == ["http://a.example/b"]
    assert Crawl.objects.get(pk=crawl.pk).status == CrawlStatus.HELD


# --- options --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"scope": "galaxy"}, "scope must be one of page, prefix, host, domain, any"),
        ({"scope": "domain", "any_host": True}, "any host and scope domain contradict"),
        ({"include": "(unclosed"}, "include: pattern '(unclosed' is not a regular expression"),
        ({"exclude": "surt:"}, "exclude: pattern 'surt:': an empty SURT prefix"),
        ({"max_pages": 0}, "max pages must be at least 1, not 0"),
        ({"max_bytes": -5}, "max bytes must be at least 1, not -5"),
        ({"host_concurrency": 3}, "host concurrency must be between 1 and HOST_CONCURRENCY, 2"),
        ({"host_concurrency": 0}, "host concurrency must be between 1 and"),
        ({"host_delay_seconds": -1.0}, "host delay must be between 0 and 3600 seconds, not -1"),
        ({"host_delay_seconds": float("nan")}, "host delay must be between 0 and 3600"),
    ],
)
def test_bad_politeness_options_are_named(settings, options: dict, message: str) -> None:
    settings.HOST_CONCURRENCY = 2
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        check_crawl_options(CrawlOptions(**options))


def test_good_politeness_options_are_kept(data_dir, settings) -> None:
    settings.HOST_CONCURRENCY = 2
    crawl = crawl_create(
        data=b"http://a.example/",
        source_name="urls.txt",
        options=CrawlOptions(
            scope=CrawlScope.PREFIX, include="a\nb\n", exclude="surt:org,x)/", robots=True,
            max_pages=5, max_bytes=10**9, host_concurrency=1, host_delay_seconds=1.5,
        ),
    )  # fmt: skip

    crawl.refresh_from_db()
    assert (crawl.scope, crawl.include, crawl.exclude) == ("prefix", "a\nb", "surt:org,x)/")
    assert (crawl.robots, crawl.max_pages, crawl.max_bytes) == (True, 5, 10**9)
    assert (crawl.host_concurrency, crawl.host_delay_seconds) == (1, 1.5)


# --- transitions ----------------------------------------------------------------------------------


def test_stop_growing_keeps_a_started_crawl_started_with_its_reason() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    crawl.stop_growing(reason="max-pages 3 reached")
    crawl.save()

    crawl.refresh_from_db()
    assert (crawl.status, crawl.stop_reason) == (CrawlStatus.STARTED, "max-pages 3 reached")


@pytest.mark.parametrize("status", [CrawlStatus.QUEUED, CrawlStatus.SEALED, CrawlStatus.HELD])
def test_only_a_started_crawl_stops_growing(status: str) -> None:
    crawl = baker.make(Crawl, status=status)
    with pytest.raises(TransitionNotAllowed):
        crawl.stop_growing(reason="x")


def test_leave_out_fails_a_queued_snapshot_with_the_reason(data_dir) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, max_bytes=1)
    crawl_add_bytes(crawl.pk, 5)
    snapshot = baker.make(Snapshot, crawl=crawl, url="http://a.example/", retry_at=timezone.now())

    claimed = Snapshot.objects.select_related("crawl").get(pk=snapshot.pk)  # as a claim reads it
    snapshot_start(snapshot=claimed)  # its crawl wrote more than it may: it never starts

    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.FAILED
    assert snapshot.error == "left out: max-bytes 1 reached"
    assert snapshot.retry_at is None
    assert Crawl.objects.get(pk=crawl.pk).stop_reason == "max-bytes 1 reached"


@pytest.mark.parametrize("status", [SnapshotStatus.STARTED, SnapshotStatus.SEALED])
def test_only_a_queued_snapshot_is_left_out(status: str) -> None:
    snapshot = baker.make(Snapshot, status=status, url="http://a.example/")
    with pytest.raises(TransitionNotAllowed):
        snapshot.leave_out(reason="x")


def test_slow_down_pauses_a_host_without_counting_a_failure() -> None:
    host = Host.objects.create(name="a.example")
    host.slow_down(error="HTTP 429", delay=60)
    host.save()

    host = Host.objects.get(pk=host.pk)
    assert host.status == HostStatus.PAUSED
    assert host.failures == 0
    assert 50 < (host.paused_until - timezone.now()).total_seconds() <= 60


def test_slow_down_keeps_a_longer_pause() -> None:
    host = Host.objects.create(name="a.example")
    host.pause(error="timed out", delay=600)
    until = host.paused_until
    host.slow_down(error="HTTP 429", delay=5)
    assert host.paused_until == until


# --- the host limit and delay of a crawl, and 429 -----------------------------------------------


def result_of(crawl: Crawl, host: str, status: str = ResultStatus.QUEUED) -> ArchiveResult:
    snapshot = baker.make(
        Snapshot,
        crawl=crawl,
        url=f"http://{host}/{next(PAGE_NUMBERS)}",
        status=SnapshotStatus.STARTED,
    )
    retry_at = timezone.now() + (LEASE if status == ResultStatus.STARTED else -LEASE)
    return baker.make(
        ArchiveResult, snapshot=snapshot, status=status, extractor="headers", retry_at=retry_at
    )


def wait_for_start(result: ArchiveResult):
    with transaction.atomic():
        return host_start_wait(result=result)


def test_a_crawl_may_lower_the_host_limit(settings) -> None:
    settings.HOST_CONCURRENCY = 2
    strict = baker.make(Crawl, status=CrawlStatus.STARTED, host_concurrency=1)
    usual = baker.make(Crawl, status=CrawlStatus.STARTED)
    result_of(usual, "a.example", ResultStatus.STARTED)

    until = wait_for_start(result_of(strict, "a.example"))
    assert until is not None
    assert 0 < (until - timezone.now()).total_seconds() <= 1  # its own limit: not spun on
    assert wait_for_start(result_of(usual, "a.example")) is None


def test_a_result_handed_back_for_a_delay_is_not_due_before_it() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    result = result_of(crawl, "a.example", ResultStatus.STARTED)
    due = timezone.now() + timedelta(seconds=30)

    assert hand_back(result, lease_end=result.retry_at, due_at=due) == due
    assert ArchiveResult.objects.get(pk=result.pk).retry_at == due


def test_a_host_delay_hands_back_until_the_delay_has_passed() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, host_delay_seconds=30)
    first, second = result_of(crawl, "a.example"), result_of(crawl, "a.example")

    assert wait_for_start(first) is None  # the host's first start
    until = wait_for_start(second)

    assert until is not None
    assert 25 < (until - timezone.now()).total_seconds() <= 30
    assert wait_for_start(result_of(crawl, "b.example")) is None  # another host


@pytest.mark.parametrize(
    ("robots", "own_delay", "waits"),
    [(True, 5, 30), (True, 60, 60), (False, 5, 5), (True, 0, 30)],
)
def test_a_crawl_that_obeys_robots_waits_the_longer_of_its_delay_and_crawl_delay(
    robots: bool, own_delay: float, waits: float
) -> None:
    Host.objects.create(name="a.example", robots_crawl_delay=30)
    crawl = baker.make(
        Crawl, status=CrawlStatus.STARTED, robots=robots, host_delay_seconds=own_delay
    )
    assert wait_for_start(result_of(crawl, "a.example")) is None  # the host's first start

    until = wait_for_start(result_of(crawl, "a.example"))

    assert until is not None
    assert waits - 5 < (until - timezone.now()).total_seconds() <= waits


def test_a_429_with_retry_after_pauses_the_whole_host(settings) -> None:
    settings.BACKOFF_CAP = 1000
    output = ExtractorOutput(
        outcome=Outcome.TEMPORARY, error="too many", http_status=429, retry_after=120
    )
    host_note_outcome(host="a.example", extractor="headers", output=output)  # status, not words

    host = Host.objects.get(name="a.example")
    assert host.status == HostStatus.PAUSED
    assert 110 < (host.paused_until - timezone.now()).total_seconds() <= 120
    other = result_of(baker.make(Crawl, status=CrawlStatus.STARTED), "a.example")
    assert wait_for_start(other) is not None  # another URL of the host waits too


def test_a_503_with_retry_after_backs_off_only_its_result() -> None:
    output = ExtractorOutput(
        outcome=Outcome.TEMPORARY,
        error="HTTP 503 from http://a.example/HTTP 429",  # words that once fooled it
        http_status=503,
        retry_after=9,
    )
    assert host_note_outcome(host="a.example", extractor="headers", output=output) is None
    assert not Host.objects.filter(name="a.example", status=HostStatus.PAUSED).exists()


# --- end to end: manage.py add with real actors ---------------------------------------------------


LIMIT = "2"


@pytest.mark.slow
def test_add_with_robots_and_max_pages_never_runs_more_than_two_at_once(
    tmp_path: Path, site: PoliteSite
) -> None:
    """The crawl asks for 2 results of a host at once where the server allows 4, and 4 actors
    run them: the site never sees more than 2 requests at once."""
    vellum = Vellum(tmp_path / "data", EXTRACTOR_TIMEOUT="10", HOST_CONCURRENCY="4")
    assert vellum.manage("init").returncode == 0
    index = site.url("/index.html")

    done = vellum.manage(
        "add", "--depth", "1", "--robots", "--max-pages", "20", "--host-concurrency", LIMIT,
        "--wait", index,
        timeout=CRAWL_TIMEOUT, EXTRACTORS="headers,wget,title,outlinks", ACTORS_ARCHIVERESULT="4",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "Crawl 1 sealed" in done.stdout
    assert "stopped:   max-pages 20 reached" in done.stdout
    assert f"skipped {site.url('/private/a.html')}: disallowed by robots.txt" in done.stdout
    rows = vellum.list_json()
    assert len(rows) == 20
    assert {row["status"] for row in rows} == {"sealed"}
    assert not [row for row in rows if "/private/" in row["url"]]
    assert site.asked("/private/a.html") == 0
    assert 1 <= site.most_at_once <= int(LIMIT)
    assert len(site.requests) > 20  # several fetches per page: the limit had work to hold back


# --- the options on the command line, the API and the add page ------------------------------------


def test_add_takes_the_options_and_names_a_bad_one(data_dir) -> None:
    out = StringIO()
    call_command(
        "add", "--depth", "1", "--scope", "prefix", "--include", "a", "--include", "b",
        "--exclude", "/logout", "--robots", "--max-pages", "9", "--max-bytes", "1000",
        "--host-delay", "2", "http://a.example/docs/", stdout=out,
    )  # fmt: skip

    crawl = Crawl.objects.get()
    assert (crawl.scope, crawl.include, crawl.exclude) == ("prefix", "a\nb", "/logout")
    assert (crawl.robots, crawl.max_pages, crawl.max_bytes) == (True, 9, 1000)
    assert crawl.host_delay_seconds == 2
    with pytest.raises(CommandError, match="max pages must be at least 1, not 0"):
        call_command("add", "--max-pages", "0", "http://a.example/", stdout=StringIO())
    with pytest.raises(CommandError, match="exclude: pattern '\\[' is not a regular expression"):
        call_command("add", "--exclude", "[", "http://a.example/", stdout=StringIO())
    assert Crawl.objects.count() == 1


def test_the_api_takes_the_options_and_answers_400_for_a_bad_one(data_dir) -> None:
    _token, key = token_create(username=keeper("reader", password="pw").username)
    api = Client(headers={"Authorization": f"Bearer {key}"})
    body = {"urls": ["http://a.example/"], "scope": "domain", "robots": True, "max_pages": 3,
            "exclude": ["surt:example,a)/private"]}  # fmt: skip

    made = api.post("/api/v1/crawls", body, content_type="application/json")
    bad = api.post("/api/v1/crawls", {**body, "scope": "galaxy"}, content_type="application/json")

    assert made.status_code == 201, made.content
    assert made.json()["scope"] == "domain"
    assert (made.json()["robots"], made.json()["max_pages"]) == (True, 3)
    assert Crawl.objects.get().exclude == "surt:example,a)/private"
    assert bad.status_code == 400
    assert "scope must be one of page, prefix, host, domain, any" in bad.json()["detail"]


def test_the_add_page_carries_the_options(data_dir) -> None:
    client = Client()
    client.force_login(staff_with("adder", "crawls.add_crawl", "crawls.view_crawl"))
    form = {"urls": "https://example.com/", "parser": "auto", "depth": "1", "tags": "",
            "profile": "", "behaviour_seconds": "", "scroll_page_limit": "", "scope": "prefix",
            "exclude": "/logout", "robots": "on", "max_pages": "20",
            "host_concurrency": "1"}  # fmt: skip

    assert 'name="robots"' in client.get("/add/").content.decode()
    response = client.post("/add/", form)

    assert response.status_code == 302
    crawl = Crawl.objects.get()
    assert (crawl.scope, crawl.exclude, crawl.robots) == ("prefix", "/logout", True)
    assert (crawl.max_pages, crawl.host_concurrency, crawl.host_delay_seconds) == (20, 1, 0)


def test_a_limit_too_large_for_its_column_is_named() -> None:
    with pytest.raises(InputError, match="max pages must be at most 2147483647"):
        check_crawl_options(CrawlOptions(max_pages=2**31))
    with pytest.raises(InputError, match="max bytes must be at most 9223372036854775807"):
        check_crawl_options(CrawlOptions(max_bytes=2**63))


@pytest.mark.usefixtures("data_dir")
def test_a_real_429_with_retry_after_holds_back_the_hosts_other_pages(settings) -> None:
    settings.EXTRACTORS = ["headers"]
    settings.BACKOFF_CAP = 1000  # the pause is Retry-After, at most this
    site = PoliteSite(too_many=True).start()
    try:
        crawl = crawl_create(
            data=f"{site.url('/p/1.html')}\n{site.url('/p/2.html')}".encode(),
            source_name="urls.txt",
        )
        crawl_start(crawl=crawl)
        for snapshot in crawl.snapshots.all():
            snapshot_start(snapshot=snapshot)
        first = ArchiveResult.objects.filter(snapshot__url=site.url("/p/1.html")).get()
        result_tick(result=first)
    finally:
        site.stop()

    first.refresh_from_db()
    assert first.status == ResultStatus.BACKOFF
    host = Host.objects.get(name=f"127.0.0.1:{site.port}")
    assert host.status == HostStatus.PAUSED
    assert 100 < (host.paused_until - timezone.now()).total_seconds() <= 120
    other = ArchiveResult.objects.get(snapshot__url=site.url("/p/2.html"))
    assert other.retry_at <= timezone.now()  # due, yet another URL of the host: not claimable
    assert not ArchiveResult.objects.claimable().filter(pk=other.pk).exists()
    assert site.asked("/p/2.html") == 0


@pytest.mark.parametrize("extractor", [WgetExtractor, HeadersExtractor])
def test_the_extractors_carry_the_status_of_a_429(data_dir, tmp_path, extractor) -> None:
    site = PoliteSite(too_many=True).start()
    try:
        snapshot = baker.make(Snapshot, url=site.url("/p/1.html"))
        output = extractor().run(snapshot, tmp_path)
    finally:
        site.stop()

    assert (output.outcome, output.http_status, output.retry_after) == (
        Outcome.TEMPORARY,
        429,
        120,
    )


def test_a_schedule_keeps_the_options_for_each_crawl_it_makes(data_dir) -> None:
    call_command(
        "schedule", "add", "0 * * * *", "http://a.example/", "--depth", "1", "--robots",
        "--scope", "domain", "--exclude", "/logout", "--max-pages", "7",
        stdout=StringIO(),
    )  # fmt: skip
    schedule = CrawlSchedule.objects.get()

    crawl = schedule_run_now(schedule=schedule)

    assert (crawl.robots, crawl.scope, crawl.exclude, crawl.max_pages) == (
        True, "domain", "/logout", 7,
    )  # fmt: skip


def test_the_schedule_admin_refuses_a_bad_pattern_and_keeps_good_options(admin_client) -> None:
    form = {"cron": "0 * * * *", "enabled": "on", "source": "https://example.com/",
            "parser": "auto", "depth": "1", "tags": "", "priority": "0", "profile": "",
            "notify_webhook": "", "notify_email": "", "robots": "on", "max_pages": "5"}  # fmt: skip
    add = "/admin/crawls/crawlschedule/add/"

    refused = admin_client.post(add, {**form, "exclude": "(unclosed"})
    kept = admin_client.post(add, form)

    assert "exclude: pattern" in refused.content.decode()
    assert kept.status_code == 302
    schedule = CrawlSchedule.objects.get()
    assert (schedule.robots, schedule.max_pages, schedule.scope) == (True, 5, "host")
    assert schedule.host_delay_seconds == 0


@pytest.mark.usefixtures("data_dir", "lean")
def test_a_crawl_that_chose_no_scope_lists_no_links_off_the_host(site: PoliteSite) -> None:
    crawl = archive_crawl(crawl_of(site, max_pages=50))

    assert crawl.snapshots.count() == 1 + PAGES + len(PRIVATE) + 1
    assert not crawl.skips.exists()  # http://example.invalid/away: not followed, as before
    assert "skipped" not in crawl.report
