"""``manage.py export``: write a crawl's or a snapshot's sealed snapshots as a BagIt bag or WACZ."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from core.management.database import require_migrated_database
from core.services.export import (
    ExportError,
    ExportProgress,
    ExportReport,
    ProgressCallback,
    export_bagit,
    export_wacz,
    select_snapshots,
)


class Command(BaseCommand):
    help = (
        "Export the sealed snapshots of a crawl, or one snapshot, for another archive: as a "
        "BagIt bag in DEST (an empty or new folder), or as WACZ files in DEST (one per snapshot, "
        "and for a crawl one combining them all). Snapshots that no longer match their "
        "manifest are left out, and the command then fails after exporting the rest."
    )

    def add_arguments(self, parser):
        parser.add_argument("--format", required=True, choices=["bagit", "wacz"])
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--crawl", type=int, metavar="ID", help="Every snapshot of a crawl.")
        which.add_argument("--snapshot", metavar="ID", help="One snapshot (its UUID).")
        parser.add_argument("dest", type=Path, metavar="DEST", help="Where to write the export.")

    def handle(self, *args, format: str, crawl: int | None, snapshot: str | None, dest, **options):
        require_migrated_database()
        try:
            selection = select_snapshots(crawl_id=crawl, snapshot_id=snapshot)
            with self._progress() as on_progress:
                if format == "bagit":
                    report = export_bagit(selection, dest, on_progress=on_progress)
                else:
                    report = export_wacz(selection, dest, on_progress=on_progress)
        except ExportError as error:
            raise CommandError(str(error)) from None
        except OSError as error:  # disk full, permissions: the export stops where it was
            raise CommandError(f"export to {dest} failed: {error}") from None
        self._summarize(report)

    @contextmanager
    def _progress(self) -> Iterator[ProgressCallback]:
        """Yield the callback that shows progress: a bar per stage on a terminal, else one line
        per snapshot (lines saying why a snapshot is left out show in both)."""
        console = Console(file=self.stdout._out)
        if not console.is_terminal:
            yield lambda event: event.line and self.stdout.write(event.line)
            return
        columns = (SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn())
        with Progress(*columns, MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
            tasks: dict[str, tuple] = {}  # stage: (task id, total)

            def finish_stages() -> None:
                for task, total in tasks.values():
                    bar.update(task, total=total or 1, completed=total or 1)

            def on_progress(event: ExportProgress) -> None:
                if event.stage not in tasks:
                    finish_stages()  # a new stage begins when the one before is over
                    task = bar.add_task(event.stage, total=event.total or None)
                    tasks[event.stage] = (task, event.total)
                bar.update(tasks[event.stage][0], completed=event.done)
                if event.left_out:
                    bar.console.print(event.line, markup=False, highlight=False, soft_wrap=True)

            yield on_progress
            finish_stages()

    def _summarize(self, report: ExportReport) -> None:
        exported = len(report.exported)
        if exported:
            what = "a BagIt bag" if report.format == "bagit" else "WACZ files"
            valid = "validation FAILED" if report.failures else "validated"
            line = f"Exported {_count(exported)} as {what} to {report.dest} ({valid})"
            if report.combined is not None:
                line += f", and {report.combined.name} combining them"
            self.stdout.write(line)
        for failure in report.failures:
            self.stdout.write(f"  {failure}")
        if report.left_out:
            self.stdout.write(
                f"Left out {len(report.left_out)} of {_count(report.selected)}: "
                f"{report.left_out_summary()}"
            )
        if not exported:
            every = "the snapshot was" if report.selected == 1 else f"all {report.selected} were"
            raise CommandError(f"Nothing exported: {every} left out (see above)")
        if report.problems:
            raise CommandError(
                f"{len(report.problems)} of {_count(report.selected)} could not be exported "
                f"({report.left_out_summary(report.problems)}); {exported} exported"
            )
        if report.failures:
            raise CommandError(f"the export to {report.dest} is not valid (see above)")


def _count(number: int) -> str:
    return f"{number} snapshot{'' if number == 1 else 's'}"
