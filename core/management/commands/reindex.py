"""``manage.py reindex``: rebuild the index from ``DATA_DIR/archive/*/index.json``."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from core.management.database import require_migrated_database
from core.services.reindex import ReindexReport, archive_reindex


class Command(BaseCommand):
    help = (
        "Restore crawls, snapshots and results from the snapshot folders' index.json files "
        "(after the database is lost). Rows already in the database are left alone."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print the report as JSON."
        )

    def handle(self, *args, as_json: bool, **options):
        require_migrated_database()
        console = Console(file=self.stdout._out)
        if console.is_terminal and not as_json:
            report = self._reindex_with_progress(console)
        else:
            report = archive_reindex()
        if as_json:
            self.stdout.write(json.dumps(report.as_dict(), indent=2))
        else:
            self._summarize(report)
        if report.problems:
            raise CommandError(f"reindex found {len(report.problems)} problems (listed above)")

    def _reindex_with_progress(self, console: Console) -> ReindexReport:
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
            tasks = {}

            def on_progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = progress.add_task(stage, total=total)
                progress.update(tasks[stage], completed=done, total=total)

            return archive_reindex(on_progress=on_progress)

    def _summarize(self, report: ReindexReport) -> None:
        problems = len(report.problems)
        self.stdout.write(
            f"Restored {report.snapshots} snapshots ({report.results} results) in "
            f"{report.crawls} crawls; {report.already_indexed} already indexed; "
            f"{problems} problems{':' if problems else '.'}"
        )
        for path, reason in report.problems:
            self.stdout.write(f"  {path}: {reason}")
