"""``manage.py restore``: repair what a fixity audit flagged, from a sound copy."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.choices import SnapshotStatus
from core.management.database import require_migrated_database
from core.management.selection import sealed_snapshots
from core.models import Snapshot
from core.services.fixity import RestoreError, snapshot_repair


class Command(BaseCommand):
    help = (
        "Restore damaged snapshots: a local folder that no longer matches its signed manifest "
        "is replaced by a sound storage copy (the damaged one is kept in DATA_DIR/quarantine/), "
        "and damaged or failed storage copies are copied again from DATA_DIR."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--snapshot", action="append", help="A snapshot id (repeatable).")
        which.add_argument(
            "--flagged", action="store_true", help="Every snapshot the last audit flagged."
        )
        parser.add_argument("--from", dest="target", help="Restore from this storage target.")

    def handle(self, *args, snapshot, flagged, target, **options):
        require_migrated_database()
        if flagged:
            snapshots = list(Snapshot.objects.flagged().filter(status=SnapshotStatus.SEALED))
        else:
            snapshots = sealed_snapshots(snapshot)
        failures = 0
        for item in snapshots:
            try:
                done = snapshot_repair(snapshot=item, target=target)
            except RestoreError as error:
                failures += 1
                self.stderr.write(f"{item.pk}: cannot restore: {error}")
                continue
            self.stdout.write(f"{item.pk}: {'; '.join(done) if done else 'sound, nothing to do'}")
        if not snapshots:
            self.stdout.write("Nothing to restore: no snapshot is flagged.")
        if failures:
            raise CommandError(
                f"{failures} of {len(snapshots)} snapshots could not be restored; "
                "manage.py rearchive ID archives one again from its URL"
            )
