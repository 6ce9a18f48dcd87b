"""``manage.py list``: snapshots with their state and per-extractor results."""

from __future__ import annotations

import csv
import json

from django.core.management.base import BaseCommand
from rich.console import Console
from rich.table import Table

from core.choices import SnapshotStatus
from core.management.database import require_migrated_database
from core.management.snapshot_rows import (
    COLUMNS,
    results_summary,
    snapshot_row,
    snapshots_for_listing,
)


class Command(BaseCommand):
    help = "List snapshots (filter by crawl, state or tag) as a table, JSON or CSV."

    def add_arguments(self, parser):
        parser.add_argument("--crawl", type=int, help="Only this crawl's snapshots.")
        parser.add_argument("--state", choices=SnapshotStatus.values, help="Only this state.")
        parser.add_argument("--tag", help="Only snapshots with this tag.")
        formats = parser.add_mutually_exclusive_group()
        formats.add_argument("--json", action="store_true", help="Print a JSON array.")
        formats.add_argument("--csv", action="store_true", help="Print CSV with a header row.")

    def handle(self, *args, crawl, state, tag, **options):
        require_migrated_database()
        snapshots = snapshots_for_listing(crawl=crawl, state=state, tag=tag)
        rows = [snapshot_row(snapshot) for snapshot in snapshots.iterator(chunk_size=500)]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
        elif options["csv"]:
            self._write_csv(rows)
        else:
            self._write_table(rows)

    def _write_csv(self, rows: list[dict]) -> None:
        writer = csv.writer(self.stdout, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([row["id"], row["crawl"], row["status"], row["url"], row["title"],
                             row["depth"], ",".join(row["tags"]), row["created_at"],
                             results_summary(row)])  # fmt: skip

    def _write_table(self, rows: list[dict]) -> None:
        console = Console(file=self.stdout._out, width=TABLE_WIDTH if not _is_tty(self) else None)
        if not rows:
            console.print("No snapshots match.")
            return
        table = Table(show_lines=False, box=None, header_style="bold")
        table.add_column("id", no_wrap=True)
        table.add_column("crawl", justify="right")
        table.add_column("status", no_wrap=True)
        table.add_column("url", overflow="fold", ratio=3)
        table.add_column("title", overflow="ellipsis", no_wrap=True, ratio=2)
        table.add_column("results", overflow="fold", ratio=3)
        for row in rows:
            table.add_row(row["id"][:8], str(row["crawl"]), row["status"], row["url"],
                          row["title"], results_summary(row, symbols=True))  # fmt: skip
        console.print(table)
        console.print(f"{len(rows)} snapshot(s); ✓ succeeded ✗ failed - skipped ↻ backoff … to do")


TABLE_WIDTH = 160


def _is_tty(command: BaseCommand) -> bool:
    return command.stdout.isatty()
