"""The full-text index of snapshots: one row per sealed snapshot, with the words to find it by."""

from __future__ import annotations

from django.db import models


class SnapshotText(models.Model):
    """What a sealed snapshot is found by: its title, URL, tags and the text of the page
    (readability's article, else htmltotext's text), capped at core.services.search.MAX_TEXT_CHARS.

    On SQLite an FTS5 table mirrors these rows through triggers; on PostgreSQL a GIN index over
    their ``to_tsvector`` serves the search (migration core 0007, core/services/search.py).
    """

    # An integer primary key: SQLite's FTS5 table refers to rows by it (it is their rowid).
    snapshot = models.OneToOneField(
        "core.Snapshot", on_delete=models.CASCADE, related_name="text_index"
    )
    title = models.TextField(blank=True)
    url = models.TextField(help_text="The URL, then its words (host and path parts).")
    tags = models.TextField(blank=True)
    text = models.TextField(blank=True)

    class Meta:
        verbose_name = "snapshot text"

    def __str__(self) -> str:
        return self.url
