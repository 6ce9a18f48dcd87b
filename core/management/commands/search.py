"""``manage.py search WORDS``: find sealed snapshots by title, URL, tags and page text;
``--rebuild`` indexes every sealed snapshot again (after an upgrade or a restore)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.choices import SnapshotStatus
from core.management.database import require_migrated_database
from core.models import Snapshot
from core.services.search import search_snapshot_ids, search_words, snapshot_index_text

SHOWN = 50


class Command(BaseCommand):
    help = "Search sealed snapshots (every word must match; a word finds the words it begins)."

    def add_arguments(self, parser):
        parser.add_argument("words", nargs="*", help="What to look for.")
        parser.add_argument(
            "--rebuild", action="store_true", help="Index every sealed snapshot again first."
        )

    def handle(self, *args, words: list[str], rebuild: bool, **options):
        require_migrated_database()
        if rebuild:
            sealed = Snapshot.objects.filter(status=SnapshotStatus.SEALED).prefetch_related("tags")
            count = 0
            for snapshot in sealed.iterator(chunk_size=500):
                snapshot_index_text(snapshot=snapshot)
                count += 1
            self.stdout.write(f"{count} sealed snapshot(s) indexed.")
        query = " ".join(words)
        if not words:
            if not rebuild:
                raise CommandError("Say what to look for: manage.py search WORDS")
            return
        if not search_words(query):
            raise CommandError(f"no words to look for in {query!r}")
        ids = search_snapshot_ids(query)
        found = Snapshot.objects.in_bulk(ids[:SHOWN])
        for pk in ids[:SHOWN]:
            snapshot = found[pk]
            self.stdout.write(f"{snapshot.pk}  {snapshot.title or '-'}\n    {snapshot.url}")
        more = f" (the first {SHOWN} shown)" if len(ids) > SHOWN else ""
        self.stdout.write(f"{len(ids)} match(es){more}.")
