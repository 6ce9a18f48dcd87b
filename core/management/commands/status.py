"""``manage.py status``: how many crawls, snapshots and results are in each state."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from rich.console import Console
from rich.table import Table

from core.management.database import require_migrated_database
from orchestrator.diskguard import disk_usage
from orchestrator.status import status_counts


class Command(BaseCommand):
    help = "Count crawls, snapshots and archive results per state."

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print JSON instead of a table."
        )

    def handle(self, *args, as_json: bool, **options):
        require_migrated_database()
        counts = status_counts()
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
            document = {"data_dir": str(settings.DATA_DIR), "disk_guard": guard, **counts}
            self.stdout.write(json.dumps(document))
            return
        console = Console(file=self.stdout._out)
        console.print(f"Data folder: {settings.DATA_DIR}", highlight=False)
        style = "bold red" if disk.held else ""
        console.print(disk.describe().capitalize(), style=style, highlight=False, soft_wrap=True)
        for kind, states in counts.items():
            table = Table(title=kind, title_justify="left", show_header=False, box=None)
            for state, n in states.items():
                table.add_row(state, str(n))
            console.print(table)
