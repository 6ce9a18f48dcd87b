"""``manage.py binaries``: every extractor, the programs it needs, and whether they are found."""

from __future__ import annotations

import json
import re

from django.core.management.base import BaseCommand
from rich.console import Console
from rich.table import Table

from core.extractors.binaries import binaries_report

# A version number: "7.88.1", "156.0.8078.79", "2026.10.26".
VERSION_NUMBER = re.compile(r"\d+(?:\.\d+)+")


def short_version(line: str) -> str:
    """Cut a ``--version`` line after its first version number ("curl 7.88.1 (x86_64...)" ->
    "curl 7.88.1"); --json keeps the whole line."""
    number = VERSION_NUMBER.search(line)
    return line[: number.end()] if number else line


class Command(BaseCommand):
    help = (
        "List every extractor with the binaries it needs: found or not, version and path. "
        "An extractor whose binary is missing skips its results with that reason."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print JSON instead of a table."
        )

    def handle(self, *args, as_json: bool, **options):
        report = binaries_report()
        if as_json:
            self.stdout.write(json.dumps([row.as_dict() for row in report], indent=2))
            return
        table = Table()
        for column in ("extractor", "status", "binary"):
            table.add_column(column, no_wrap=True)
        table.add_column("version", no_wrap=True, max_width=32, overflow="ellipsis")
        for column in ("path", "timeout", "attempts"):
            table.add_column(column, no_wrap=True)
        for row in report:
            style = "green" if row.status == "ready" else "red"
            first = True
            for binary in row.binaries or [None]:
                table.add_row(
                    row.name if first else "",
                    f"[{style}]{row.status}[/]" if first else "",
                    binary.name if binary else "(none: runs in Python)",
                    short_version(binary.version) if binary else "",
                    (binary.path or "not found") if binary else "",
                    f"{row.timeout} s" if first else "",
                    str(row.max_attempts) if first else "",
                )
                first = False
        Console(file=self.stdout._out, width=140).print(table)
