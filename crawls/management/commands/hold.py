"""``manage.py hold``: pause crawls, or the whole queue, until they are released."""

from __future__ import annotations

from core.services.crawls import crawl_hold
from crawls.management.holds import HoldCommand
from crawls.models import Crawl
from orchestrator.services import queue_hold


class Command(HoldCommand):
    help = (
        "Hold crawls (or with --queue all work): nothing of them is claimed until `manage.py "
        "release`; work under way finishes."
    )
    verb = "hold"
    all_help = "Every crawl not yet sealed."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--reason", default="", help="Why (shown by status and the admin).")

    def all_crawls(self):
        return Crawl.objects.active()

    def change_crawl(self, crawl_id: int, options) -> Crawl:
        return crawl_hold(crawl_id=crawl_id, reason=options["reason"])

    def change_queue(self, options):
        return queue_hold(reason=options["reason"][:200])
