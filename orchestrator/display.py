"""Terminal display of a crawl's progress while ``add --wait`` runs the orchestrator, or waits
for the one that stays on this machine (orchestrator/handover.py)."""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.utils import timezone
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from core.choices import CopyStatus, ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Host, StorageCopy
from crawls.choices import CrawlStatus
from crawls.models import Crawl

PLAIN_INTERVAL_SECONDS = 5
# Most often, in seconds, the counts are read again for a live bar: each read is four queries,
# and add --wait's orchestrator asks after every wake-up, as often as a result ends (issue 19).
BAR_REFRESH_SECONDS = 0.5


class CrawlProgress:
    """Show snapshots, results and storage copies of one crawl as they finish, and the hosts
    whose results wait in a pause: a live bar on a terminal, a line every few seconds (when
    something changed) otherwise."""

    def __init__(self, crawl: Crawl, console: Console):
        self.crawl = crawl
        self.console = console
        self.last_line = ""
        self.last_print = 0.0
        self.last_read = -math.inf
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
            self.copies_task = None
            if settings.STORAGE_TARGETS:
                self.copies_task = self.progress.add_task("copies", total=None, detail="")

    def __enter__(self) -> CrawlProgress:
        if self.progress:
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        """Show the final counts: on the bar; in a line unless the crawl sealed, whose summary
        the caller prints (held, interrupted: the line is what the user sees last)."""
        if self.progress:
            self.update(force=True)
            self.progress.stop()
            return
        status = Crawl.objects.filter(pk=self.crawl.pk).values_list("status", flat=True).first()
        if status != CrawlStatus.SEALED:
            self.update(force=True, now=True)

    def update(self, *_args, force: bool = False, now: bool = False) -> None:
        """Refresh the counts from the database (called after each of the orchestrator's ticks
        and wake-ups, or per wake-up while waiting for the staying orchestrator): at most
        every BAR_REFRESH_SECONDS for a live bar, every PLAIN_INTERVAL_SECONDS for lines, and
        always when ``force``; a line that changed is printed at once with ``now``."""
        moment = time.monotonic()
        every = BAR_REFRESH_SECONDS if self.progress else PLAIN_INTERVAL_SECONDS
        if not force and moment - self.last_read < every:
            return
        self.last_read = moment
        snapshots = self.crawl.snapshots.count_by_status()
        total, final = sum(snapshots.values()), _sum(snapshots, SnapshotStatus.final())
        results = ArchiveResult.objects.filter(snapshot__crawl=self.crawl).count_by_status()
        r_total, r_final = sum(results.values()), _sum(results, ResultStatus.final())
        failed = results.get(ResultStatus.FAILED, 0)
        backoff = results.get(ResultStatus.BACKOFF, 0)
        detail = f"{failed} failed, {backoff} in backoff" + self._paused_hosts()
        copies = self._copies()
        if self.progress:
            self.progress.update(self.snapshots_task, total=total, completed=final, detail="")
            self.progress.update(self.results_task, total=r_total, completed=r_final, detail=detail)
            if self.copies_task is not None and copies:
                self.progress.update(self.copies_task, **copies)
            return
        if not total:
            return  # the crawl has not started: "snapshots 0/0" says nothing
        line = f"snapshots {final}/{total}, results {r_final}/{r_total} ({detail})"
        if copies:
            line += f", copies {copies['completed']}/{copies['total']} ({copies['detail']})"
        due = now or moment - self.last_print >= PLAIN_INTERVAL_SECONDS
        if line != self.last_line and due:
            self.console.print(line, highlight=False)
            self.last_line, self.last_print = line, moment

    def _paused_hosts(self) -> str:
        """``", host h paused until 10:00:05 (+1 more)"`` while hosts of the crawl's started
        snapshots are paused (their results wait, core/models/hosts.py), else ""."""
        started = self.crawl.snapshots.filter(status=SnapshotStatus.STARTED).values("host")
        paused = list(Host.objects.paused().filter(name__in=started).order_by("paused_until"))
        if not paused:
            return ""
        first = paused[0]
        more = f" (+{len(paused) - 1} more)" if len(paused) > 1 else ""
        until = timezone.localtime(first.paused_until)
        return f", host {first.name} paused until {until:%H:%M:%S}{more}"

    def _copies(self) -> dict | None:
        """Storage copies of the crawl: counts, and why copies back off (a target is down)."""
        if not settings.STORAGE_TARGETS:
            return None
        copies = StorageCopy.objects.filter(snapshot__crawl=self.crawl)
        counts = copies.count_by_status()
        waiting = copies.filter(status=CopyStatus.BACKOFF).order_by("-modified_at").first()
        detail = f"{counts.get(CopyStatus.BACKOFF, 0)} in backoff"
        if waiting is not None:
            detail += f": {waiting.error[:80]}"
        stored = counts.get(CopyStatus.STORED, 0)
        return {"total": sum(counts.values()), "completed": stored, "detail": detail}


def _sum(counts: dict[str, int], states: tuple[str, ...]) -> int:
    return sum(counts.get(state, 0) for state in states)
