"""Full-text search over sealed snapshots: titles, URLs, tags and the text of the page.

SQLite uses its FTS5 table (``core_snapshottext_fts``), PostgreSQL its full-text search over a
GIN index (migration core 0007). A query is a list of words, all required, each matching a word
of the page or its beginning (``arch`` finds "archive"); quotes and operators people type are
taken as words, so no input is a syntax error.
"""

from __future__ import annotations

import logging
import re
import uuid

from django.db import connection, transaction
from django.db.models import QuerySet

from core.extractors import registry
from core.models import Snapshot, SnapshotText
from orchestrator.prepared import UpdateStatement

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 200_000  # of a page's text kept for search: the first ~50 pages of a book
MAX_RESULTS = 1000  # matches ranked for one query
WORD = re.compile(r"\w+", re.UNICODE)


def text_sources() -> list[str]:
    """Where a snapshot's page text may be, relative to its folder, best first: the
    ``search_text`` of each registered extractor that gives one, by ``search_text_priority``
    (highest first; the registry's order among equals). For the default registry that is
    readability's article, then htmltotext's whole page."""
    givers = [extractor for extractor in registry.EXTRACTORS if extractor.search_text]
    givers.sort(key=lambda extractor: -extractor.search_text_priority)  # stable: keeps order
    return [f"{extractor.name}/{extractor.search_text}" for extractor in givers]


def snapshot_page_text(*, snapshot: Snapshot) -> str:
    """Return the page's text from the best of ``text_sources`` in ``snapshot``'s folder (its
    first MAX_TEXT_CHARS characters), or "" when it has none."""
    for relative in text_sources():
        path = snapshot.output_dir / relative
        if path.is_file():
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read(MAX_TEXT_CHARS)
    return ""


def snapshot_index_text(*, snapshot: Snapshot) -> None:
    """Write (or rewrite) ``snapshot``'s row of the search index from its folder and record.

    An UPDATE, and an INSERT when it found no row: two statements, where update_or_create
    takes six (its lock, read and savepoints) at every seal. Two processes that index one
    snapshot at once (a reindex during its seal) may both insert: the second raises
    IntegrityError, which fails that attempt, and its transaction is rolled back.
    """
    fields = {
        "title": snapshot.title,
        # PostgreSQL's parser keeps "docs.example.org" as one token: add its parts as words.
        "url": f"{snapshot.url} {' '.join(WORD.findall(snapshot.url))}",
        "tags": " ".join(snapshot.tag_names()),
        "text": snapshot_page_text(snapshot=snapshot),
    }
    with transaction.atomic(savepoint=False):
        rewritten = TEXT_REWRITTEN.run(
            snapshot.pk, fields["title"], fields["url"], fields["tags"], fields["text"]
        )
        if not rewritten:
            SnapshotText.objects.create(snapshot=snapshot, **fields)


def _text_rewritten(
    snapshot_id: uuid.UUID, title: str, url: str, tags: str, text: str
) -> tuple[QuerySet, dict[str, str]]:
    """The rows and values of the UPDATE that rewrites snapshot ``snapshot_id``'s search row."""
    rows = SnapshotText.objects.filter(snapshot_id=snapshot_id)
    return rows, {"title": title, "url": url, "tags": tags, "text": text}


# Every seal writes its snapshot's row: one UPDATE compiled once per process.
TEXT_REWRITTEN = UpdateStatement(
    "a snapshot's search text", _text_rewritten, (uuid.UUID,) + (str,) * 4, actors=("snapshot",)
)


def search_words(query: str) -> list[str]:
    """The words of ``query`` that are searched for (letters and digits; at most 20)."""
    return WORD.findall(query.lower())[:20]


def search_snapshot_ids(
    query: str, *, limit: int = MAX_RESULTS, within: QuerySet | None = None
) -> list:
    """Ids of the snapshots matching every word of ``query``, best match first (at most
    ``limit``), among ``within`` (a Snapshot queryset, e.g. SnapshotQuerySet.visible_to;
    None: all; it narrows the search itself, so the ``limit`` best are the best of those); an
    empty list for a query without words."""
    words = search_words(query)
    if not words:
        return []
    among, among_params = ("", [])
    if within is not None:
        sql, params = within.values("pk").query.sql_with_params()
        among, among_params = f" AND t.snapshot_id IN ({sql})", list(params)
    if connection.vendor == "postgresql":
        return _search_postgres(words, limit, among, among_params)
    return _search_sqlite(words, limit, among, among_params)


def _search_sqlite(words: list[str], limit: int, among: str, among_params: list) -> list:
    # Each word quoted (so FTS5 reads no operator into it) and a prefix: "arch"* finds archive.
    match = " ".join(f'"{word}"*' for word in words)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.snapshot_id FROM core_snapshottext_fts f "
            "JOIN core_snapshottext t ON t.id = f.rowid "
            f"WHERE core_snapshottext_fts MATCH %s{among} ORDER BY f.rank LIMIT %s",
            [match, *among_params, limit],
        )
        return [_as_id(row[0]) for row in cursor.fetchall()]


def _search_postgres(words: list[str], limit: int, among: str, among_params: list) -> list:
    query = " & ".join(f"{word}:*" for word in words)
    document = "to_tsvector('simple', title || ' ' || url || ' ' || tags || ' ' || text)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.snapshot_id FROM core_snapshottext t "
            f"WHERE {document} @@ to_tsquery('simple', %s){among} "
            f"ORDER BY ts_rank({document}, to_tsquery('simple', %s)) DESC LIMIT %s",
            [query, *among_params, query, limit],
        )
        return [_as_id(row[0]) for row in cursor.fetchall()]


def _as_id(value):
    """A snapshot id as the ORM gives it (SQLite returns the UUID's hex text)."""
    return Snapshot._meta.pk.to_python(value)
