"""``manage.py status``: how many crawls, snapshots, results and storage copies are in each state,
and what fixity audits found."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.timesince import timesince
from rich.console import Console
from rich.table import Table

from core.management.database import require_migrated_database
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.diskguard import disk_usage
from orchestrator.models import QueueState, QueueStatus
from orchestrator.status import fixity_status, kind_titles, status_counts

HELD_SHOWN = 20  # held crawls listed with their reasons (the count is in the table)


class Command(BaseCommand):
    help = (
        "Count crawls, snapshots, archive results and storage copies per state; show what "
        "fixity audits flagged."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print JSON instead of a table."
        )

    def handle(self, *args, as_json: bool, **options):
        require_migrated_database()
        counts = status_counts()
        fixity = fixity_status()
        queue = QueueState.current()
        held_crawls = list(
            Crawl.objects.filter(status=CrawlStatus.HELD)
            .order_by("pk")
            .values("id", "hold_reason")[:HELD_SHOWN]
        )
        try:
            disk = disk_usage()
        except OSError as error:
            reason = f"Cannot measure the disk holding {settings.DATA_DIR}: {error}"
            raise CommandError(reason) from None
        if as_json:
            guard = {
                "path": str(disk.path),
                "used_percent": round(disk.used_percent, 1),
                "hold_percent": disk.hold_percent,
                "held": disk.held,
            }
            last = fixity["last_checked_at"]
            fixity = {**fixity, "last_checked_at": last.isoformat() if last else None}
            since = queue.held_since.isoformat() if queue.held_since else None
            hold = {
                "held": queue.status == QueueStatus.HELD,
                "since": since,
                "reason": queue.reason,
            }
            document = {
                "data_dir": str(settings.DATA_DIR), "queue": hold, "disk_guard": guard, **counts,
                "fixity": fixity, "held_crawls": held_crawls,
            }  # fmt: skip
            self.stdout.write(json.dumps(document))
            return
        console = Console(file=self.stdout._out, highlight=False)
        console.print(f"Data folder: {settings.DATA_DIR}")
        style = "bold red" if disk.held else ""
        console.print(disk.describe().capitalize(), style=style, soft_wrap=True)
        if queue.status == QueueStatus.HELD:
            console.print(
                f"The {queue}: nothing is claimed (manage.py release --queue).",
                style="bold red",
                soft_wrap=True,
            )
        # One table, so that every section's numbers line up in one column.
        table = Table(show_header=False, box=None, padding=(0, 1, 0, 0))
        titles = kind_titles()
        for kind, states in counts.items():
            _section(table, titles[kind], states.items())
        _section(
            table,
            "fixity",
            [
                ("flagged snapshots", fixity["flagged"]),
                ("never checked", fixity["unchecked"]),
                ("last check", _when(fixity["last_checked_at"])),
            ],
        )
        console.print(table)
        for crawl in held_crawls:
            reason = crawl["hold_reason"] or "held by an operator"
            console.print(f"Crawl {crawl['id']} is held: {reason}.", soft_wrap=True)
        if not settings.STORAGE_TARGETS:
            console.print(
                "No storage targets configured (STORAGE_TARGETS): snapshots are kept in "
                "DATA_DIR only.",
                soft_wrap=True,
            )
        flagged = fixity["flagged"]
        if flagged:
            console.print(
                f"{flagged} snapshot{'s' if flagged != 1 else ''} flagged by fixity audits: "
                "manage.py verify --all, then manage.py restore --flagged (from a storage copy) "
                "or manage.py rearchive --flagged",
                style="bold red",
                soft_wrap=True,
            )


def _section(table: Table, title: str, rows) -> None:
    table.add_row(title, "", style="bold")
    for label, value in rows:
        table.add_row(f"  {label}", str(value))


def _when(moment: datetime | None) -> str:
    """``2025-06-01 03:30 UTC (2 hours ago)``, or "never" for None."""
    if moment is None:
        return "never"
    if timezone.now() - moment < timedelta(minutes=1):
        ago = "just now"
    else:
        ago = timesince(moment, depth=1).replace("\xa0", " ") + " ago"
    return f"{timezone.localtime(moment):%Y-%m-%d %H:%M %Z} ({ago})"
