"""``manage.py add``: queue URLs (arguments, a file, or stdin) as a new crawl."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from rich.console import Console

from core.models import StorageCopy
from crawls.choices import CrawlStatus
from crawls.seeds import InputError
from crawls.services import MAX_DEPTH, crawl_create
from orchestrator.display import CrawlProgress
from orchestrator.logs import log_to_file
from orchestrator.orchestrator import Orchestrator

MAX_INPUT_BYTES = 64 * 1024 * 1024
INTERRUPTED_EXIT = 130  # the shell's convention for a command ended by SIGINT


class Command(BaseCommand):
    help = "Archive URLs: given as arguments, in a text file (--file), or on stdin (-)."

    def add_arguments(self, parser):
        parser.add_argument(
            "urls", nargs="*", metavar="URL", help="URLs to archive, or - for stdin."
        )
        parser.add_argument("--file", type=Path, help="A text file with one URL per line.")
        parser.add_argument(
            "--depth", type=int, default=0, help=f"Links to follow from each URL (0-{MAX_DEPTH})."
        )
        parser.add_argument(
            "--any-host", action="store_true", help="With --depth, follow links to other hosts too."
        )
        parser.add_argument("--tag", action="append", default=[], help="Tag(s), comma-separated.")
        parser.add_argument("--priority", type=int, default=0, help="Higher runs first.")
        parser.add_argument(
            "--wait", action="store_true", help="Archive now and return when the crawl is sealed."
        )

    def handle(self, *args, urls, file, depth, any_host, tag, priority, wait, **options):
        data, source_name = self._read_input(urls, file)
        try:
            crawl = crawl_create(
                data=data,
                source_name=source_name,
                depth=depth,
                any_host=any_host,
                tags=tag,
                priority=priority,
            )
        except InputError as error:
            raise CommandError(str(error)) from None
        seeds = len(crawl.seed_list())
        self.stdout.write(f"Crawl {crawl.pk} queued: {seeds} URL(s), depth {depth}.")
        if wait:
            self._wait_for(crawl)
        else:
            self.stdout.write(
                "The orchestrator archives it (manage.py orchestrator, or add --wait)."
            )

    def _read_input(self, urls: list[str], file: Path | None) -> tuple[bytes, str]:
        """Return the raw input and its name; exactly one source may be given.

        A file or stdin is read up to MAX_INPUT_BYTES; a larger one is refused (CommandError)
        rather than cut short in the middle of a line.
        """
        sources = bool(urls) + (file is not None)
        if sources != 1 or (urls and "-" in urls and len(urls) > 1):
            raise CommandError("give URLs, --file PATH, or - (stdin): exactly one of them")
        if urls == ["-"]:
            data, name, shown = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1), "stdin", "stdin"
        elif file is not None:
            try:
                with open(file, "rb") as handle:
                    data = handle.read(MAX_INPUT_BYTES + 1)
            except OSError as error:
                raise CommandError(f"cannot read {file}: {error.strerror}") from None
            name, shown = file.name, str(file)
        else:
            return "\n".join(urls).encode(), "command line"
        if len(data) > MAX_INPUT_BYTES:
            raise CommandError(f"{shown} is larger than {MAX_INPUT_BYTES // 2**20} MiB")
        return data, name

    def _wait_for(self, crawl) -> None:
        """Run the orchestrator until ``crawl`` is sealed and its snapshots copied to every
        storage target (or until it is held), showing progress."""
        log_to_file("orchestrator.log")
        console = Console(file=self.stdout._out)
        copies = StorageCopy.objects.filter(snapshot__crawl=crawl)

        def crawl_done() -> bool:
            crawl.refresh_from_db(fields=["status"])
            if crawl.status == CrawlStatus.HELD:
                return True
            return crawl.status == CrawlStatus.SEALED and not copies.active().exists()

        with CrawlProgress(crawl, console) as progress:
            Orchestrator(until=crawl_done, on_tick=progress.update).run()
        crawl.refresh_from_db()
        if crawl.status == CrawlStatus.HELD:
            raise CommandError(
                f"crawl {crawl.pk} was held before it finished; release it to resume"
            )
        if crawl.status != CrawlStatus.SEALED:
            self.stdout.write(
                f"Crawl {crawl.pk} is unfinished (interrupted); the orchestrator finishes it "
                "(manage.py orchestrator, or add --wait again)."
            )
            raise SystemExit(INTERRUPTED_EXIT)
        self._summarize(crawl)

    def _summarize(self, crawl) -> None:
        report = crawl.report
        snapshots = ", ".join(f"{n} {state}" for state, n in sorted(report["snapshots"].items()))
        results = ", ".join(f"{n} {state}" for state, n in sorted(report["results"].items()))
        self.stdout.write(self.style.SUCCESS(f"Crawl {crawl.pk} sealed in "
                                             f"{report['duration_seconds']:.1f} s"))  # fmt: skip
        self.stdout.write(f"  snapshots: {snapshots}\n  results:   {results}")
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
