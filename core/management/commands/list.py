"""``manage.py list``: snapshots with their state and per-extractor results; with ``--url``,
every capture of one URL (core/services/captures.py)."""

from __future__ import annotations

import csv
import json

from django.core.management.base import BaseCommand, CommandError
from django.template.defaultfilters import filesizeformat
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
from core.services.captures import capture_record, url_captures, url_resolve
from crawls.seeds import InvalidURL

# Columns of ``list --url URL --csv``, in order (capture_record's keys).
CAPTURE_COLUMNS = [
    "id", "url", "crawl", "timestamp", "captured_at", "status", "size", "content_digest",
    "unchanged_since", "previous",
]  # fmt: skip


class Command(BaseCommand):
    help = (
        "List snapshots (filter by crawl, state or tag), or every capture of one URL (--url), "
        "as a table, JSON or CSV."
    )

    def add_arguments(self, parser):
        parser.add_argument("--crawl", type=int, help="Only this crawl's snapshots.")
        parser.add_argument("--state", choices=SnapshotStatus.values, help="Only this state.")
        parser.add_argument("--tag", help="Only snapshots with this tag.")
        parser.add_argument(
            "--url",
            help="List every capture of this URL across crawls, newest first, with its size, "
            "content digest and since when it is unchanged (no other filter applies).",
        )
        formats = parser.add_mutually_exclusive_group()
        formats.add_argument("--json", action="store_true", help="Print a JSON array.")
        formats.add_argument("--csv", action="store_true", help="Print CSV with a header row.")

    def handle(self, *args, crawl, state, tag, url, **options):
        require_migrated_database()
        if url is not None:
            if crawl is not None or state or tag:
                raise CommandError(
                    "--url lists every capture of one URL: drop --crawl, --state, --tag"
                )
            self._list_captures(url, options)
            return
        snapshots = snapshots_for_listing(crawl=crawl, state=state, tag=tag)
        rows = [snapshot_row(snapshot) for snapshot in snapshots.iterator(chunk_size=500)]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
        elif options["csv"]:
            self._write_csv(rows)
        else:
            self._write_table(rows)

    def _list_captures(self, url: str, options: dict) -> None:
        try:
            normalized = url_resolve(url)
        except InvalidURL as error:
            raise CommandError(str(error)) from None
        rows = [capture_record(capture) for capture in url_captures(url=normalized)]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
        elif options["csv"]:
            writer = csv.DictWriter(self.stdout, CAPTURE_COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        else:
            self._write_captures_table(normalized, rows)

    def _write_captures_table(self, url: str, rows: list[dict]) -> None:
        console = Console(file=self.stdout._out, width=TABLE_WIDTH if not _is_tty(self) else None)
        if not rows:
            console.print(f"No capture of {url}.", markup=False, highlight=False)
            return
        table = Table(show_lines=False, box=None, header_style="bold")
        table.add_column("id", no_wrap=True)
        table.add_column("crawl", justify="right")
        table.add_column("captured (UTC)", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("digest", no_wrap=True)
        table.add_column("change", overflow="fold")
        by_id = {row["id"]: row for row in rows}
        for row in rows:
            table.add_row(row["id"][:8], str(row["crawl"]), _utc(row["timestamp"]), row["status"],
                          filesizeformat(row["size"]), _short_digest(row["content_digest"]),
                          _change(row, by_id))  # fmt: skip
        console.print(f"{url}", markup=False, highlight=False)
        console.print(table)
        console.print(f"{len(rows)} capture(s), newest first")

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


def _utc(timestamp: str) -> str:
    """``YYYYMMDDhhmmss`` as ``YYYY-MM-DD hh:mm:ss``."""
    t = timestamp
    return f"{t[:4]}-{t[4:6]}-{t[6:8]} {t[8:10]}:{t[10:12]}:{t[12:14]}"


def _short_digest(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12] if digest else "—"


def _change(row: dict, by_id: dict[str, dict]) -> str:
    """What the timeline says of a capture: unchanged since when, changed, or first."""
    if row["unchanged_since"]:
        return f"unchanged since {row['unchanged_since'][:19].replace('T', ' ')}"
    if row["previous"]:
        previous = by_id.get(row["previous"])
        if row["content_digest"] and previous and previous["content_digest"]:
            return "text changed"
        return "text not compared"
    return "first capture" if row["status"] == "sealed" else ""
