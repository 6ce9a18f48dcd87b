"""``manage.py add``: queue URLs (arguments, a file, or stdin) as a new crawl.

A file or stdin may be plain text, an RSS or Atom feed, a bookmarks export or JSON
(crawls/inputs.py); its bad entries are named and left out, the rest queued. URLs given as
arguments are all refused when one is bad: a typo there is fixed by typing again.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from rich.console import Console

from core.checks import PIPELINE_CHECKS
from core.management.database import require_migrated_database
from core.models import StorageCopy
from core.services.crawls import crawl_create
from crawls.choices import CrawlStatus
from crawls.estimate import ESTIMATING, crawl_estimate
from crawls.estimate import describe as describe_estimate
from crawls.inputs import left_out_headline, problems_not_listed
from crawls.management.crawl_input import (
    add_crawl_arguments,
    add_politeness_arguments,
    crawl_keywords,
    read_crawl_input,
)
from crawls.seeds import InputError
from orchestrator.display import CrawlProgress
from orchestrator.handover import (
    CannotWait,
    WaitEnd,
    staying_orchestrator,
    wait_for_staying_orchestrator,
)
from orchestrator.logs import log_to_file
from orchestrator.models import queue_held

logger = logging.getLogger(__name__)

INTERRUPTED_EXIT = 130  # the shell's convention for a command ended by SIGINT
SKIPS_SHOWN = 3  # skipped URLs shown per reason
FORMAT_NAMES = {"feed": "a feed", "bookmarks": "bookmarks", "json": "JSON"}


class Command(BaseCommand):
    help = (
        "Archive URLs: given as arguments, or in a file (--file) or on stdin (-) holding text, "
        "an RSS or Atom feed, a browser's bookmarks export or a JSON list."
    )
    requires_system_checks = PIPELINE_CHECKS  # not the web side's (core/checks.py)

    def add_arguments(self, parser):
        add_crawl_arguments(parser)
        add_politeness_arguments(parser)
        parser.add_argument(
            "--estimate",
            action="store_true",
            help="HEAD each URL first and say the expected size; hold the crawl if it would not "
            "fit under the disk guard (ESTIMATE_BEFORE_CRAWL: always).",
        )
        parser.add_argument(
            "--wait", action="store_true", help="Archive now and return when the crawl is sealed."
        )

    def handle(self, *args, urls, file, depth, wait, estimate, **options):
        data, source_name = read_crawl_input(urls, file)
        require_migrated_database()
        estimate = estimate or settings.ESTIMATE_BEFORE_CRAWL
        try:
            crawl = crawl_create(
                data=data,
                source_name=source_name,
                hold_reason=ESTIMATING if estimate else "",
                **crawl_keywords(options, source_name, depth),
            )
        except InputError as error:
            raise CommandError(str(error)) from None
        self._report_input(crawl, depth)
        if estimate:
            self._estimate(crawl)
        if wait:
            self._wait_for(crawl)
        elif (pid := staying_orchestrator()) is not None:
            self.stdout.write(f"The orchestrator running on this machine (pid {pid}) archives it.")
        else:
            self.stdout.write(
                "The orchestrator archives it (manage.py orchestrator, or add --wait)."
            )

    def _estimate(self, crawl) -> None:
        """Measure the seeds (HEAD) and say the expected size; a crawl that would not fit
        under the disk guard stays held (CommandError, exit 1)."""
        with Console(file=self.stdout._out).status(f"Asking {len(crawl.seed_list())} seed(s)..."):
            try:
                estimate = crawl_estimate(crawl=crawl)
            except OSError as error:
                raise CommandError(
                    f"cannot measure the disk holding DATA_DIR ({error.strerror}); crawl "
                    f"{crawl.pk} stays held: manage.py release {crawl.pk} to run it anyway"
                ) from None
        self.stdout.write(f"Estimate: {describe_estimate(estimate)}.")
        for example in estimate["unknown_examples"]:
            self.stdout.write(f"  size unknown: {example}")
        crawl.refresh_from_db()
        if crawl.status == CrawlStatus.HELD:
            raise CommandError(
                f"crawl {crawl.pk} is held: it {crawl.hold_reason.split(': ')[0]}; free space "
                f"or raise DISK_HOLD_PERCENT, then manage.py release {crawl.pk}"
            )

    def _report_input(self, crawl, depth: int) -> None:
        """Say what was queued and, on stderr, which entries were left out and why."""
        report = crawl.input_report
        kind = f" from {FORMAT_NAMES[report['format']]}" if report["format"] != "text" else ""
        self.stdout.write(
            f"Crawl {crawl.pk} queued: {report['accepted']} URL(s){kind}, depth {depth}."
        )
        if headline := left_out_headline(report):
            more = problems_not_listed(report)
            self.stderr.write(f"{headline}:")
            for problem in report["problems"]:
                self.stderr.write(f"  {problem}")
            if more:
                self.stderr.write(f"  ... and {more} more")

    def _wait_for(self, crawl) -> None:
        """Wait until ``crawl`` is sealed and its snapshots copied to every storage target (or
        until it is held), showing progress: in the orchestrator that stays on this machine
        (orchestrator/handover.py), or else, or once that one stops, in an orchestrator of its
        own."""
        log_to_file("orchestrator.log")
        console = Console(file=self.stdout._out)
        copies = StorageCopy.objects.filter(snapshot__crawl=crawl)

        def crawl_done() -> bool:
            crawl.refresh_from_db(fields=["status"])
            if crawl.status == CrawlStatus.HELD or queue_held():
                return True
            return crawl.status == CrawlStatus.SEALED and not copies.active().exists()

        with CrawlProgress(crawl, console) as progress:
            if not self._leave_to_staying_orchestrator(crawl, crawl_done, progress, console):
                # Imported here: a crawl handed over spares it (some 40 ms of the command's
                # start); an orchestrator of its own imports it before it forks any actor.
                from orchestrator.orchestrator import Orchestrator

                Orchestrator(until=crawl_done, on_tick=progress.update).run()
        crawl.refresh_from_db()
        if crawl.status == CrawlStatus.HELD:
            raise CommandError(
                f"crawl {crawl.pk} was held before it finished{_because(crawl)}; release it "
                f"to resume (manage.py release {crawl.pk})"
            )
        if queue_held() and crawl.status != CrawlStatus.SEALED:
            raise CommandError(
                f"the queue is held, so crawl {crawl.pk} waits; release it to resume "
                "(manage.py release --queue)"
            )
        if crawl.status != CrawlStatus.SEALED:
            self.stdout.write(
                f"Crawl {crawl.pk} is unfinished (interrupted); the orchestrator finishes it "
                "(manage.py orchestrator, or add --wait again)."
            )
            raise SystemExit(INTERRUPTED_EXIT)
        self._summarize(crawl)

    def _leave_to_staying_orchestrator(
        self, crawl, crawl_done, progress: CrawlProgress, console: Console
    ) -> bool:
        """Wait for ``crawl`` in the orchestrator that stays on this machine, if one runs; True
        when the crawl ended there, False when none runs or it stopped first (this command then
        archives the rest). Ctrl-C or SIGTERM ends the wait, not the crawl: exit 130."""
        pid = staying_orchestrator()
        if pid is None:
            return False

        def say(text: str) -> None:  # through the console, which the live bar redraws around
            console.print(text, markup=False, highlight=False, soft_wrap=True)

        say(
            f"The orchestrator running on this machine (pid {pid}) archives crawl {crawl.pk}; "
            "waiting for the crawl (Ctrl-C stops the waiting, not the crawl)."
        )
        logger.info("add --wait: crawl %s left to the orchestrator (pid %d)", crawl.pk, pid)
        try:
            end = wait_for_staying_orchestrator(crawl_done, progress.update)
        except CannotWait as error:
            say(f"Cannot wait for the orchestrator (pid {pid}): {error}; the crawl goes on here.")
            return False
        if end is WaitEnd.DONE:
            return True
        if end is WaitEnd.INTERRUPTED:
            say(f"Stopped waiting; crawl {crawl.pk} goes on in the orchestrator (pid {pid}).")
            raise SystemExit(INTERRUPTED_EXIT)
        say(f"The orchestrator (pid {pid}) stopped; crawl {crawl.pk} goes on here.")
        logger.info("add --wait: orchestrator %d stopped; crawl %s goes on here", pid, crawl.pk)
        return False

    def _summarize(self, crawl) -> None:
        report = crawl.report
        snapshots = ", ".join(f"{n} {state}" for state, n in sorted(report["snapshots"].items()))
        results = ", ".join(f"{n} {state}" for state, n in sorted(report["results"].items()))
        self.stdout.write(self.style.SUCCESS(f"Crawl {crawl.pk} sealed in "
                                             f"{report['duration_seconds']:.1f} s"))  # fmt: skip
        self.stdout.write(f"  snapshots: {snapshots}\n  results:   {results or 'none'}")
        if "unchanged" in report:
            self.stdout.write(f"  unchanged: {report['unchanged']} (kept as revisits of their "
                              "last capture, not archived again)")  # fmt: skip
        if "stopped" in report:
            self.stdout.write(f"  stopped:   {report['stopped']}")
        if "skipped" in report:
            counts = ", ".join(f"{n} {reason}" for reason, n in sorted(report["skipped"].items()))
            self.stdout.write(f"  skipped:   {counts}")
            shown: dict[str, int] = {}
            for skip in report["skipped_urls"]:  # a few of each reason
                shown[skip["reason"]] = shown.get(skip["reason"], 0) + 1
                if shown[skip["reason"]] <= SKIPS_SHOWN:
                    self.stdout.write(f"  skipped {skip['url']}: {skip['detail']}")
            self.stdout.write(
                f"  (all of them: the report of crawl {crawl.pk}, in the admin or the API)"
            )
        copies = StorageCopy.objects.filter(snapshot__crawl=crawl)
        for target in sorted(set(copies.values_list("target", flat=True))):
            states = copies.filter(target=target).count_by_status()
            counted = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
            self.stdout.write(f"  copies on {target}: {counted}")
        grouped: dict[tuple[str, str], list[str]] = {}
        for failure in report["failures"]:
            grouped.setdefault((failure["url"], failure["error"]), []).append(failure["extractor"])
        for (url, error), extractors in list(grouped.items())[:10]:
            self.stdout.write(f"  failed {url} ({', '.join(extractors)}): {error}")
        if len(grouped) > 10:
            self.stdout.write(
                f"  ... and {len(grouped) - 10} more (manage.py list --crawl {crawl.pk} --json)"
            )


def _because(crawl) -> str:
    return f" ({crawl.hold_reason})" if crawl.hold_reason else ""
