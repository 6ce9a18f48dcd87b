"""``add --wait``'s progress display reads the counts at most so often, whatever the tick rate."""

from __future__ import annotations

from io import StringIO

import pytest
from model_bakery import baker
from rich.console import Console

from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator import display
from orchestrator.display import CrawlProgress

pytestmark = pytest.mark.django_db


def started_crawl() -> Crawl:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    snapshot = baker.make(
        Snapshot, crawl=crawl, url="http://example.com/", status=SnapshotStatus.STARTED
    )
    baker.make(ArchiveResult, snapshot=snapshot, extractor="wget", status=ResultStatus.QUEUED)
    return crawl


def test_a_live_bar_reads_the_counts_once_per_refresh_interval(django_assert_num_queries) -> None:
    progress = CrawlProgress(started_crawl(), Console(file=StringIO(), force_terminal=True))

    with django_assert_num_queries(3):  # snapshots, results, paused hosts
        progress.update()
    with django_assert_num_queries(0):  # a tick within the interval reads nothing
        progress.update()
    progress.last_read -= display.BAR_REFRESH_SECONDS  # as if that much time had passed
    with django_assert_num_queries(3):
        progress.update()
    with django_assert_num_queries(3):  # the last refresh, when the crawl is done
        progress.update(force=True)


def test_no_line_before_the_crawl_has_snapshots_nor_at_the_end() -> None:
    """Before the crawl starts there is nothing to count, and at the end the caller's summary
    says it all: a crawl done within the interval prints no progress line."""
    crawl = baker.make(Crawl, status=CrawlStatus.QUEUED, seeds="http://a.example/")
    out = StringIO()

    with CrawlProgress(crawl, Console(file=out, force_terminal=False, width=200)) as progress:
        progress.update()
        baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.SEALED, retry_at=None)
        Crawl.objects.filter(pk=crawl.pk).update(status=CrawlStatus.SEALED, retry_at=None)

    assert out.getvalue() == ""


def test_a_crawl_left_unsealed_ends_with_its_last_counts_at_once() -> None:
    """Held or interrupted, no summary follows: the last line says where the crawl stands,
    even within the interval."""
    crawl = started_crawl()
    out = StringIO()

    with CrawlProgress(crawl, Console(file=out, force_terminal=False, width=200)) as progress:
        progress.update()
        ArchiveResult.objects.filter(snapshot__crawl=crawl).update(status=ResultStatus.FAILED)

    assert out.getvalue().splitlines() == [
        "snapshots 0/1, results 0/1 (0 failed, 0 in backoff)",
        "snapshots 0/1, results 1/1 (1 failed, 0 in backoff)",
    ]


def test_lines_come_every_plain_interval_with_the_counts_of_that_moment() -> None:
    crawl = started_crawl()
    out = StringIO()
    progress = CrawlProgress(crawl, Console(file=out, force_terminal=False, width=200))

    progress.update()
    ArchiveResult.objects.filter(snapshot__crawl=crawl).update(status=ResultStatus.SUCCEEDED)
    progress.update()  # within the interval: not read, not printed
    progress.last_read -= display.PLAIN_INTERVAL_SECONDS  # as if that much time had passed
    progress.last_print -= display.PLAIN_INTERVAL_SECONDS
    progress.update()

    assert out.getvalue().splitlines() == [
        "snapshots 0/1, results 0/1 (0 failed, 0 in backoff)",
        "snapshots 0/1, results 1/1 (0 failed, 0 in backoff)",
    ]
