"""``manage.py status``: how many crawls, snapshots, results and storage copies are in each state,
which hosts are paused after connection failures, and what fixity audits found."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.timesince import timesince
from rich.console import Console
from rich.table import Table

from core.management.database import require_migrated_database
from core.models import Host
from core.services.hosts import hosts_paused
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.diskguard import DiskUsage, disk_usage
from orchestrator.models import QueueState, QueueStatus
from orchestrator.status import fixity_status, kind_titles, status_counts

HELD_SHOWN = 20  # held crawls listed with their reasons (the count is in the table)
PAUSED_HOSTS_SHOWN = 20  # paused hosts listed, the soonest resumed first


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
        status = _gather()
        if as_json:
            self.stdout.write(json.dumps(_document(status)))
        else:
            _print(Console(file=self.stdout._out, highlight=False), status)


@dataclass(frozen=True)
class _Status:
    """What ``status`` shows: counts per kind and state (orchestrator.status.status_counts),
    fixity_status()'s summary, the queue's hold, the first held crawls (id, hold_reason), the
    disk guard's reading and the paused hosts (core.services.hosts.hosts_paused)."""

    counts: dict[str, dict[str, int]]
    fixity: dict
    queue: QueueState
    held_crawls: list[dict]
    disk: DiskUsage
    paused_hosts: list[Host]


def _gather() -> _Status:
    """Read everything ``status`` shows; raise CommandError when the disk holding DATA_DIR
    cannot be measured."""
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
    return _Status(counts, fixity, queue, held_crawls, disk, hosts_paused())


def _document(status: _Status) -> dict:
    """``status --json``'s document: times in ISO 8601, None where there is none."""
    disk, queue = status.disk, status.queue
    guard = {
        "path": str(disk.path),
        "used_percent": round(disk.used_percent, 1),
        "hold_percent": disk.hold_percent,
        "held": disk.held,
    }
    last = status.fixity["last_checked_at"]
    fixity = {**status.fixity, "last_checked_at": last.isoformat() if last else None}
    since = queue.held_since.isoformat() if queue.held_since else None
    hold = {
        "held": queue.status == QueueStatus.HELD,
        "since": since,
        "reason": queue.reason,
    }
    now = timezone.now()
    paused = [
        {
            "host": host.name,
            "on_trial": host.paused_until <= now,
            "paused_until": host.paused_until.isoformat(),
            "failures": host.failures,
            "error": host.error,
        }
        for host in status.paused_hosts
    ]
    return {
        "data_dir": str(settings.DATA_DIR), "queue": hold, "disk_guard": guard, **status.counts,
        "fixity": fixity, "held_crawls": status.held_crawls, "paused_hosts": paused,
    }  # fmt: skip


def _print(console: Console, status: _Status) -> None:
    """Print ``status`` for a person: where and how full, the table, then what needs doing."""
    _print_header(console, status.disk, status.queue)
    console.print(_table(status.counts, status.fixity))
    _print_notes(console, status.held_crawls, status.fixity["flagged"])
    _print_hosts(console, status.paused_hosts)


def _print_header(console: Console, disk: DiskUsage, queue: QueueState) -> None:
    console.print(f"Data folder: {settings.DATA_DIR}")
    style = "bold red" if disk.held else ""
    line = disk.describe()  # not str.capitalize(): that lowercases the path in it
    console.print(line[:1].upper() + line[1:], style=style, soft_wrap=True)
    if queue.status == QueueStatus.HELD:
        console.print(
            f"The {queue}: nothing is claimed (manage.py release --queue).",
            style="bold red",
            soft_wrap=True,
        )


def _table(counts: dict[str, dict[str, int]], fixity: dict) -> Table:
    """One table, so that every section's numbers line up in one column."""
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
    return table


def _print_notes(console: Console, held_crawls: list[dict], flagged: int) -> None:
    """Say why each held crawl is held, that no storage target copies the archive, and what to
    do about snapshots fixity audits flagged."""
    for crawl in held_crawls:
        reason = crawl["hold_reason"] or "held by an operator"
        console.print(f"Crawl {crawl['id']} is held: {reason}.", soft_wrap=True)
    if not settings.STORAGE_TARGETS:
        console.print(
            "No storage targets configured (STORAGE_TARGETS): snapshots are kept in DATA_DIR only.",
            soft_wrap=True,
        )
    if flagged:
        console.print(
            f"{flagged} snapshot{'s' if flagged != 1 else ''} flagged by fixity audits: "
            "manage.py verify --all, then manage.py restore --flagged (from a storage copy) "
            "or manage.py rearchive --flagged",
            style="bold red",
            soft_wrap=True,
        )


def _print_hosts(console: Console, paused: list[Host]) -> None:
    """Say which hosts are paused after connection failures, until when and why: their results
    wait, the other hosts' run (core/models/hosts.py)."""
    for host in paused[:PAUSED_HOSTS_SHOWN]:
        described = host.describe()
        console.print(f"{described[0].upper()}{described[1:]}.", style="yellow", soft_wrap=True)
    if len(paused) > PAUSED_HOSTS_SHOWN:
        console.print(f"... and {len(paused) - PAUSED_HOSTS_SHOWN} more paused hosts.")
    if paused:
        console.print(
            "A paused host's results wait; once its pause has passed, one at a time is tried "
            "(the admin's Hosts page resumes a host at once).",
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
