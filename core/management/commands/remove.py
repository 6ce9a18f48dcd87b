"""``manage.py remove``: delete snapshots or a whole crawl, and with --delete their folders."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from core.management.database import require_migrated_database
from core.management.selection import known_snapshot_ids, require_crawl
from core.models import Snapshot
from core.services.removal import RemovalRefused, crawl_remove, snapshot_remove
from crawls.models import Crawl


class Command(BaseCommand):
    help = (
        "Remove snapshots (or with --crawl a whole crawl) from the index; with --delete, their "
        "folders in DATA_DIR too. Storage copies are kept. Refused while any of it is running: "
        "hold its crawl first (manage.py hold)."
    )

    def add_arguments(self, parser):
        parser.add_argument("snapshots", nargs="*", help="Snapshot ids (see manage.py list).")
        parser.add_argument("--crawl", type=int, help="Remove this crawl and all its snapshots.")
        parser.add_argument(
            "--delete", action="store_true", help="Also delete the folders in DATA_DIR/archive."
        )
        parser.add_argument("--yes", action="store_true", help="Do not ask for confirmation.")

    def handle(self, *args, snapshots: list[str], crawl: int | None, delete: bool, yes, **opts):
        require_migrated_database()
        if bool(snapshots) == (crawl is not None):
            raise CommandError("Say what to remove: snapshot ids, or --crawl ID (one of them).")
        # Named before asking: "Remove crawl 5?" of no crawl 5 would mislead.
        if crawl is not None:
            require_crawl(crawl)
        ids = known_snapshot_ids(snapshots)
        what = f"crawl {crawl}" if crawl is not None else f"{len(snapshots)} snapshot(s)"
        self._confirm(f"Remove {what}{' and delete the folders' if delete else ''}?", yes)
        if crawl is not None:
            try:
                removed = crawl_remove(crawl_id=crawl, delete_files=delete)
            except Crawl.DoesNotExist:
                raise CommandError(f"no crawl {crawl}") from None
            except RemovalRefused as error:
                raise CommandError(str(error)) from None
            self.stdout.write(f"Removed crawl {crawl} and its {removed} snapshots.")
            return
        refused = 0
        for snapshot_id in ids:
            try:
                snapshot_remove(snapshot_id=snapshot_id, delete_files=delete)
            except Snapshot.DoesNotExist:
                refused += 1
                self.stderr.write(f"no snapshot {snapshot_id}")
            except RemovalRefused as error:
                refused += 1
                self.stderr.write(str(error))
            else:
                self.stdout.write(f"Removed snapshot {snapshot_id}.")
        if refused:
            raise CommandError(f"{refused} of {len(snapshots)} snapshots not removed")

    def _confirm(self, question: str, yes: bool) -> None:
        if yes:
            return
        if not sys.stdin.isatty():
            raise CommandError(f"{question} Add --yes to confirm (no terminal to ask on).")
        if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
            raise CommandError("Nothing removed.")
