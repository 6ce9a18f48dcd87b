"""``manage.py retry``: run the failed results of finished snapshots again."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.choices import ResultStatus
from core.extractors.registry import BY_NAME
from core.management.database import require_migrated_database
from core.management.selection import known_snapshot_ids, require_crawl
from core.models import Snapshot
from core.services.rearchive import snapshot_retry_failed
from orchestrator.prepared import with_related


class Command(BaseCommand):
    help = (
        "Queue the failed results of finished snapshots again (fresh attempts), and finalize "
        "snapshots whose finalizing failed again. The orchestrator then runs them."
    )

    def add_arguments(self, parser):
        parser.add_argument("snapshots", nargs="*", help="Snapshot ids (see manage.py list).")
        parser.add_argument("--crawl", type=int, help="Every snapshot of this crawl.")
        parser.add_argument("--all", action="store_true", help="Every snapshot with failures.")
        parser.add_argument(
            "--extractor", help="Only the failed results of this extractor (e.g. wget)."
        )

    def handle(self, *args, snapshots: list[str], crawl: int | None, all: bool, extractor, **opts):
        require_migrated_database()
        if not (snapshots or crawl is not None or all):
            raise CommandError("Say which snapshots: their ids, --crawl ID or --all.")
        candidates = Snapshot.objects.with_failures()
        if extractor:
            if extractor not in BY_NAME:
                raise CommandError(f"no extractor {extractor!r}: one of {', '.join(BY_NAME)}")
            candidates = candidates.filter(
                results__extractor=extractor, results__status=ResultStatus.FAILED
            )
        if snapshots:
            candidates = candidates.filter(pk__in=known_snapshot_ids(snapshots))
        if crawl is not None:
            require_crawl(crawl)
            candidates = candidates.filter(crawl_id=crawl)
        retried = results = 0
        for snapshot in with_related(candidates, ("crawl",)):
            results += snapshot_retry_failed(snapshot=snapshot, extractor=extractor)
            retried += 1
        if not retried:
            self.stdout.write("Nothing to retry: no finished snapshot with failures matched.")
            return
        self.stdout.write(
            f"Queued {results} failed results of {retried} snapshots again. "
            "The orchestrator runs them (manage.py orchestrator, or bash .ci/start)."
        )
