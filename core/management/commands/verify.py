"""``manage.py verify``: the fixity audit on demand (core/services/fixity.py)."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.progress import track

from core.choices import FixityOutcome, SnapshotStatus
from core.management.database import require_migrated_database
from core.management.selection import sealed_snapshots
from core.models import Snapshot
from core.services.fixity import snapshot_audit
from crawls.models import Crawl


class Command(BaseCommand):
    help = (
        "Re-hash sealed snapshots against their signed manifests, in DATA_DIR and on every "
        "storage target that holds a copy; check signatures. Exits 1 when something is flagged."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", action="store_true", help="Every sealed snapshot.")
        which.add_argument("--crawl", type=int, help="The sealed snapshots of this crawl.")
        which.add_argument("--snapshot", action="append", help="A snapshot id (repeatable).")
        parser.add_argument(
            "--local-only", action="store_true", help="Check DATA_DIR only, not storage targets."
        )
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print one JSON document."
        )

    def handle(self, *args, all, crawl, snapshot, local_only, as_json, **options):
        require_migrated_database()
        snapshots = _select(crawl=crawl, snapshot_ids=snapshot)
        reports = []
        quiet = as_json or not sys.stdout.isatty()
        for item in track(snapshots, description="Verifying", disable=quiet, transient=True):
            checks = snapshot_audit(snapshot=item, remote=not local_only)
            reports.append(_report(item, checks))
        flagged = [report for report in reports if report["flagged"]]
        if as_json:
            self.stdout.write(json.dumps({"snapshots": reports, "flagged": len(flagged)}))
        else:
            self._print(reports, flagged)
        if flagged:
            raise CommandError(
                f"{len(flagged)} of {len(reports)} snapshots flagged; "
                "manage.py restore --snapshot ID repairs one from a sound copy",
                returncode=1,
            )

    def _print(self, reports: list[dict], flagged: list[dict]) -> None:
        console = Console(file=self.stdout._out, highlight=False, soft_wrap=True)
        unreachable = set()
        for report in reports:
            for check in report["checks"]:
                if check["outcome"] == FixityOutcome.UNREACHABLE:
                    unreachable.add(check["location"])
                    location = check["location"]
                    reason = "; ".join(p.removeprefix(location + ": ") for p in check["problems"])
                    console.print(
                        f"[yellow]not checked[/] {report['id']} on {check['location']}: {reason}"
                    )
            if report["flagged"]:
                console.print(f"[bold red]FLAGGED[/] {report['id']} {report['url']}")
                for check in report["checks"]:
                    if check["outcome"] == FixityOutcome.FLAGGED:
                        location = check["location"]
                        for problem in check["problems"]:
                            # A storage target's problems name it already.
                            problem = problem.removeprefix(f"{location}: ")
                            console.print(f"    {location}: {problem}")
        copies = sum(len(report["checks"]) for report in reports)
        summary = (
            f"Verified {_count(len(reports), 'snapshot')} ({_count(copies, 'copy', 'copies')}): "
            f"{len(reports) - len(flagged)} sound, {len(flagged)} flagged"
        )
        if unreachable:
            summary += f"; not reachable: {', '.join(sorted(unreachable))}"
        console.print(summary)


def _select(*, crawl: int | None, snapshot_ids: list[str] | None) -> list[Snapshot]:
    """Return the sealed snapshots asked for; a named snapshot that is not sealed is an error."""
    if snapshot_ids:
        return sealed_snapshots(snapshot_ids)
    selected = Snapshot.objects.filter(status=SnapshotStatus.SEALED).order_by("created_at", "pk")
    if crawl is not None:
        if not Crawl.objects.filter(pk=crawl).exists():
            raise CommandError(f"no crawl {crawl}")
        selected = selected.filter(crawl_id=crawl)
    return list(selected)


def _report(snapshot: Snapshot, checks) -> dict:
    return {
        "id": str(snapshot.pk),
        "url": snapshot.url,
        "flagged": any(check.outcome == FixityOutcome.FLAGGED for check in checks),
        "checks": [
            {"location": check.location, "outcome": check.outcome, "files": check.files,
             "problems": check.problems}
            for check in checks
        ],
    }  # fmt: skip


def _count(number: int, noun: str, plural: str = "") -> str:
    """Return "1 snapshot", "2 snapshots"."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"
