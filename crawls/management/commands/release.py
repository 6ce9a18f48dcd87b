"""``manage.py release``: resume held crawls, or the whole queue, where they stopped."""

from __future__ import annotations

from core.services.crawls import crawl_release
from crawls.choices import CrawlStatus
from crawls.management.holds import HoldCommand
from crawls.models import Crawl
from orchestrator.services import queue_release


class Command(HoldCommand):
    help = "Release held crawls (or with --queue the whole queue): their work resumes."
    verb = "release"
    all_help = "Every held crawl."

    def all_crawls(self):
        return Crawl.objects.filter(status=CrawlStatus.HELD)

    def change_crawl(self, crawl_id: int, options) -> Crawl:
        return crawl_release(crawl_id=crawl_id)

    def change_queue(self, options):
        return queue_release()
