"""Terminal display of a crawl's progress while ``add --wait`` runs the orchestrator."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from core.choices import ResultStatus
from core.models import ArchiveResult
from crawls.models import Crawl

PLAIN_INTERVAL_SECONDS = 5


class CrawlProgress:
    """Show snapshots and results of one crawl as they finish: a live bar on a terminal, a line
    every few seconds (when something changed) otherwise."""

    def __init__(self, crawl: Crawl, console: Console):
        self.crawl = crawl
        self.console = console
        self.last_line = ""
        self.last_print = 0.0
        self.progress = None
        if console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=console,
            )
            self.snapshots_task = self.progress.add_task("snapshots", total=None, detail="")
            self.results_task = self.progress.add_task("results", total=None, detail="")

    def __enter__(self) -> CrawlProgress:
        if self.progress:
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.update()
        if self.progress:
            self.progress.stop()

    def update(self, *_args) -> None:
        """Refresh the counts from the database (called once per orchestrator tick)."""
        snapshots = self.crawl.snapshots.all()
        total, final = snapshots.count(), snapshots.final().count()
        results = ArchiveResult.objects.filter(snapshot__crawl=self.crawl)
        r_total, r_final = results.count(), results.final().count()
        failed = results.filter(status=ResultStatus.FAILED).count()
        backoff = results.filter(status=ResultStatus.BACKOFF).count()
        detail = f"{failed} failed, {backoff} in backoff"
        if self.progress:
            self.progress.update(self.snapshots_task, total=total, completed=final, detail="")
            self.progress.update(self.results_task, total=r_total, completed=r_final, detail=detail)
            return
        line = f"snapshots {final}/{total}, results {r_final}/{r_total} ({detail})"
        now = time.monotonic()
        if line != self.last_line and now - self.last_print >= PLAIN_INTERVAL_SECONDS:
            self.console.print(line, highlight=False)
            self.last_line, self.last_print = line, now
