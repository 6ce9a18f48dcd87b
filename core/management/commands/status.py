"""``manage.py status``: how many crawls, snapshots and results are in each state."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand
from rich.console import Console
from rich.table import Table

from orchestrator.status import status_counts


class Command(BaseCommand):
    help = "Count crawls, snapshots and archive results per state."

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print JSON instead of a table."
        )

    def handle(self, *args, as_json: bool, **options):
        counts = status_counts()
        if as_json:
            self.stdout.write(json.dumps({"data_dir": str(settings.DATA_DIR), **counts}))
            return
        console = Console(file=self.stdout._out)
        console.print(f"Data folder: {settings.DATA_DIR}", highlight=False)
        for kind, states in counts.items():
            table = Table(title=kind, title_justify="left", show_header=False, box=None)
            for state, n in states.items():
                table.add_row(state, str(n))
            console.print(table)
