"""Run a crawl through the whole pipeline in the test's own process, without the orchestrator."""

from __future__ import annotations

from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_tick
from core.services.results import result_tick
from core.services.snapshots import snapshot_tick
from crawls.choices import CrawlStatus
from crawls.models import Crawl


def archive_crawl(crawl: Crawl) -> Crawl:
    """Tick ``crawl``, its snapshots and their results in this process until it is sealed;
    return it. Raises AssertionError when 40 rounds do not seal it."""
    for _ in range(40):
        crawl = Crawl.objects.get(pk=crawl.pk)
        if crawl.status == CrawlStatus.SEALED:
            return crawl
        crawl_tick(crawl=crawl)
        for snapshot in Snapshot.objects.for_crawl(crawl).active():
            snapshot_tick(snapshot=snapshot)
        for result in ArchiveResult.objects.filter(snapshot__crawl=crawl).active():
            result_tick(result=result)
    raise AssertionError(f"crawl {crawl.pk} did not finish: {crawl.status}")
