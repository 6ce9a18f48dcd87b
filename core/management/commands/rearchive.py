"""``manage.py rearchive``: archive finished snapshots again, keeping their earlier runs."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from core.management.database import require_migrated_database
from core.management.selection import known_snapshot_ids, require_crawl
from core.models import Snapshot
from core.services.rearchive import snapshot_rearchive
from orchestrator.prepared import with_related


class Command(BaseCommand):
    help = (
        "Archive sealed or failed snapshots again: every extractor runs anew. The earlier run's "
        "files move to history/<run>/ in the snapshot folder (nothing is deleted), and each "
        "result keeps the earlier run's record. The orchestrator then runs them."
    )

    def add_arguments(self, parser):
        parser.add_argument("snapshots", nargs="*", help="Snapshot ids (see manage.py list).")
        parser.add_argument("--crawl", type=int, help="Every finished snapshot of this crawl.")
        parser.add_argument(
            "--flagged",
            action="store_true",
            help="Every snapshot the last fixity audit flagged (when no copy can restore it).",
        )

    def handle(self, *args, snapshots: list[str], crawl: int | None, flagged: bool, **options):
        require_migrated_database()
        if not (snapshots or crawl is not None or flagged):
            raise CommandError("Say which snapshots: their ids, --crawl ID or --flagged.")
        candidates = Snapshot.objects.all()
        if snapshots:
            candidates = candidates.filter(pk__in=known_snapshot_ids(snapshots))
        if crawl is not None:
            require_crawl(crawl)
            candidates = candidates.filter(crawl_id=crawl)
        if flagged:
            candidates = candidates.flagged()
        queued = refused = 0
        for snapshot in with_related(candidates, ("crawl",)).order_by("created_at"):
            try:
                moved_to = snapshot_rearchive(snapshot=snapshot)
            except (TransitionNotAllowed, ConcurrentTransition):
                refused += 1
                self.stderr.write(
                    f"{snapshot.pk}: still in progress ({snapshot.status}), left alone"
                )
                continue
            queued += 1
            self.stdout.write(f"{snapshot.pk}: queued again; its earlier run is in {moved_to}/")
        if not queued and not refused:
            self.stdout.write("Nothing to re-archive: no snapshot matched.")
            return
        self.stdout.write(
            f"Queued {queued} snapshots to be archived again. "
            "The orchestrator runs them (manage.py orchestrator, or bash .ci/start)."
        )
        if refused:
            raise CommandError(f"{refused} snapshots still in progress were left alone")
