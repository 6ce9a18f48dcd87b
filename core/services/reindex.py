"""Rebuild the index from the snapshot folders (DESIGN.md §1: the disk is the second source).

Every ``DATA_DIR/archive/<snapshot id>/index.json`` describes its snapshot, every result and (from
version 2 on) the snapshot's crawl. Restoring them is like loading a fixture, not a state change:
the rows are created with their recorded state, and rows that already exist are left alone, so
running it on a live database is harmless.

It runs in three steps. Reading parses every ``index.json`` (invalid ones become problems) and
gathers the crawls. Restoring reads them again in batches, shallowest snapshots first so that a
parent is in the database before its children, and creates each batch's rows in one short
transaction (SQLite takes its write lock for each transaction, so a long run never blocks the
orchestrator for long), then indexes the payloads and revisit records of their WARCs
(core/services/dedup.py). Finishing writes each restored crawl's report and, on PostgreSQL,
moves the crawl id sequence past the ids restored.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.color import no_style
from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Min, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce

from core.choices import SnapshotStatus
from core.folder.index_json import (
    CrawlRecord,
    FolderIndex,
    InvalidIndex,
    read_folder,
)
from core.folder.manifest import INDEX_NAME
from core.models import ArchiveResult, Snapshot, Tag
from core.services.captures import snapshot_content_digest
from core.services.crawls import crawl_report
from core.services.dedup import payloads_rebuild
from core.services.search import snapshot_index_text
from crawls.choices import CrawlStatus
from crawls.models import Crawl, CrawlSkip

BATCH_SIZE = 200  # snapshot folders per transaction

ProgressCallback = Callable[[str, int, int], None]


@dataclass
class ReindexReport:
    """What one reindex did: counts of folders and rows, and every folder it could not restore.

    ``problems`` holds ``(path, reason)`` pairs, one line each, in the order they were found.
    """

    folders: int = 0
    snapshots: int = 0
    results: int = 0
    crawls: int = 0
    already_indexed: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        """Return the report as JSON-ready data (problems as ``{"path", "reason"}`` objects)."""
        data = asdict(self)
        data["problems"] = [{"path": path, "reason": reason} for path, reason in self.problems]
        return data


# --- the three steps -----------------------------------------------------------------------------


@dataclass
class _Planned:
    folder: Path
    snapshot_id: uuid.UUID
    crawl_id: int
    depth: int


@dataclass
class _Version1Crawl:
    """What the version-1 snapshots of one crawl tell about it (they carry no crawl block)."""

    depth: int = 0
    tags: set[str] | None = None
    created_at: datetime | None = None
    hosts: dict[uuid.UUID, tuple[str, uuid.UUID | None]] = field(default_factory=dict)

    def add(self, entry: FolderIndex) -> None:
        snapshot = entry.snapshot
        self.depth = max(self.depth, snapshot["depth"])
        self.tags = set(entry.tags) if self.tags is None else self.tags & set(entry.tags)
        self.created_at = min(filter(None, [self.created_at, snapshot["created_at"]]))
        self.hosts[snapshot["id"]] = (urlsplit(snapshot["url"]).netloc, entry.parent_id)

    def record(self, crawl_id: int) -> CrawlRecord:
        """Tags: those all its snapshots have; it
        followed links to any host if a child's host differs from its parent's."""
        any_host = any(
            parent in self.hosts and self.hosts[parent][0] != host
            for host, parent in self.hosts.values()
        )
        return CrawlRecord(
            id=crawl_id,
            seeds=(),  # filled in from the depth-0 snapshots, as for version 2
            depth=self.depth,
            any_host=any_host,
            priority=0,
            tags=tuple(sorted(self.tags or ())),
            source_file="",
            created_at=self.created_at,
        )


def archive_reindex(
    *, archive_dir: Path | None = None, on_progress: ProgressCallback | None = None
) -> ReindexReport:
    """Restore the crawls, snapshots, results and tags described by ``archive_dir/*/index.json``.

    ``archive_dir`` defaults to settings.ARCHIVE_DIR. ``on_progress(stage, done, total)`` is
    called as folders are read (stage ``"reading"``) and restored (``"restoring"``). Snapshots
    already in the database (by id) are counted as already indexed and left alone. A folder that
    cannot be restored becomes a ``(path, reason)`` problem in the report; nothing is raised for
    it. Raises only for database errors.
    """
    archive_dir = Path(archive_dir or settings.ARCHIVE_DIR)
    progress = on_progress or (lambda stage, done, total: None)
    report = ReindexReport()
    try:
        folders = sorted(p for p in archive_dir.iterdir() if p.is_dir() and p.name[0] != ".")
    except OSError as error:
        report.problems.append((str(archive_dir), f"cannot list the archive: {error.strerror}"))
        return report
    report.folders = len(folders)
    # A live database holds folders mid-work (no index.json yet, or moved to history/ by a
    # re-archive): the ones it already has are left alone unread.
    indexed = _existing_snapshots(_uuid_or_none(folder.name) for folder in folders)
    unindexed = [folder for folder in folders if _uuid_or_none(folder.name) not in indexed]
    report.already_indexed += len(folders) - len(unindexed)
    plan, crawls = _read_all(unindexed, report, progress)
    restored_crawls = _restore_all(plan, crawls, report, progress)
    # Which records hold payloads and which revisits refer to them is read from the WARCs.
    report.problems += payloads_rebuild(snapshot_ids=[planned.snapshot_id for planned in plan])
    if restored_crawls:
        _reset_crawl_sequence()
    _finish_crawls()
    return report


def _uuid_or_none(name: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(name)
    except ValueError:
        return None


def _read_all(
    folders: list[Path], report: ReindexReport, progress: ProgressCallback
) -> tuple[list[_Planned], dict[int, CrawlRecord]]:
    """Read every folder; return what to restore, shallowest first, and every crawl described."""
    plan, described, version1 = [], {}, {}
    roots: dict[int, list[tuple[datetime, str]]] = {}  # crawl id: its seeds, with their times
    given: dict[int, dict[str, dict]] = {}  # crawl id: {seed URL: its title and tags}
    stops: dict[int, str] = {}  # crawl id: why it stopped growing
    for done, folder in enumerate(folders, 1):
        try:
            entry = read_folder(folder)
        except InvalidIndex as problem:
            report.problems.append((str(folder), str(problem)))
        else:
            crawl_id = entry.snapshot["crawl_id"]
            plan.append(_Planned(folder, entry.snapshot["id"], crawl_id, entry.snapshot["depth"]))
            if entry.snapshot["depth"] == 0:
                roots.setdefault(crawl_id, []).append(
                    (entry.snapshot["created_at"], entry.snapshot["url"])
                )
                if entry.given:
                    given.setdefault(crawl_id, {})[entry.snapshot["url"]] = entry.given
            if entry.crawl is not None:
                described.setdefault(crawl_id, entry.crawl)
                if entry.crawl.stop_reason:  # known to the snapshots finalized after it
                    stops[crawl_id] = entry.crawl.stop_reason
            else:
                version1.setdefault(crawl_id, _Version1Crawl()).add(entry)
        progress("reading", done, len(folders))
    crawls = {crawl_id: parts.record(crawl_id) for crawl_id, parts in version1.items()}
    crawls.update(described)  # a crawl block says more than its version-1 snapshots
    for crawl_id, record in crawls.items():  # the seeds: its depth-0 snapshots, oldest first
        seeds = tuple(url for _, url in sorted(roots.get(crawl_id, [])))
        crawls[crawl_id] = replace(
            record,
            seeds=seeds,
            seed_details=given.get(crawl_id, {}),
            stop_reason=stops.get(crawl_id, ""),
        )
    plan.sort(key=lambda planned: (planned.depth, planned.folder.name))
    return plan, crawls


@dataclass
class _Restored:
    snapshots: int = 0
    results: int = 0
    crawls: list[int] = field(default_factory=list)
    already_indexed: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    orphans: dict[uuid.UUID, uuid.UUID] = field(default_factory=dict)  # child: parent not yet in


def _restore_all(
    plan: list[_Planned],
    crawls: dict[int, CrawlRecord],
    report: ReindexReport,
    progress: ProgressCallback,
) -> list[int]:
    """Restore ``plan`` in batches; return the ids of the crawls created."""
    planned_ids = {planned.snapshot_id for planned in plan}
    created_crawls: list[int] = []
    orphans: dict[uuid.UUID, uuid.UUID] = {}
    for start in range(0, len(plan), BATCH_SIZE):
        entries = _read_batch(plan[start : start + BATCH_SIZE], report)
        for restored in _restore_entries(entries, crawls, planned_ids):
            report.snapshots += restored.snapshots
            report.results += restored.results
            report.crawls += len(restored.crawls)
            report.already_indexed += restored.already_indexed
            report.problems += restored.problems
            created_crawls += restored.crawls
            orphans.update(restored.orphans)
        progress("restoring", min(start + BATCH_SIZE, len(plan)), len(plan))
    _link_orphans(orphans)
    return created_crawls


def _read_batch(batch: list[_Planned], report: ReindexReport) -> list[FolderIndex]:
    """Read again the folders of ``batch`` that are not in the database; count those that are
    in ``report`` and name there those that changed since they were planned."""
    existing = _existing_snapshots(planned.snapshot_id for planned in batch)
    entries = []
    for planned in batch:
        if planned.snapshot_id in existing:
            report.already_indexed += 1
            continue
        try:
            entry = read_folder(planned.folder)
        except InvalidIndex as problem:  # changed since it was read
            report.problems.append((str(planned.folder), str(problem)))
            continue
        if entry.snapshot["crawl_id"] != planned.crawl_id:
            reason = f"{INDEX_NAME} changed while reindexing: run reindex again"
            report.problems.append((str(planned.folder), reason))
            continue
        entries.append(entry)
    return entries


def _existing_snapshots(ids: Iterable[uuid.UUID | None]) -> set[uuid.UUID]:
    """Return which of ``ids`` (None ignored) are snapshots in the database, asking in batches
    (SQLite limits the parameters of one query)."""
    wanted = [pk for pk in ids if pk is not None]
    found = set()
    for start in range(0, len(wanted), BATCH_SIZE):
        batch = wanted[start : start + BATCH_SIZE]
        found.update(Snapshot.objects.filter(pk__in=batch).values_list("pk", flat=True))
    return found


def _restore_entries(
    entries: list[FolderIndex], crawls: dict[int, CrawlRecord], planned_ids: set[uuid.UUID]
) -> list[_Restored]:
    """Restore ``entries`` in one transaction; should a row collide with one written meanwhile
    (a unique constraint), restore them one by one so that only that folder is a problem."""
    if not entries:
        return []
    try:
        with transaction.atomic():
            return [_restore_batch(entries, crawls, planned_ids)]
    except IntegrityError as error:
        if len(entries) == 1:
            return [_Restored(problems=[(str(entries[0].folder), f"database refused it: {error}")])]
    return [
        restored for entry in entries for restored in _restore_entries([entry], crawls, planned_ids)
    ]


def _restore_batch(
    entries: list[FolderIndex], crawls: dict[int, CrawlRecord], planned_ids: set[uuid.UUID]
) -> _Restored:
    """Create the rows of ``entries`` (call inside a transaction): the crawls new to the
    database, the snapshots with their tags, and their results. Entries already in the database
    are counted, those that conflict with its rows named as problems."""
    restored = _Restored()
    existing = _existing_snapshots(entry.snapshot["id"] for entry in entries)
    restored.already_indexed = sum(entry.snapshot["id"] in existing for entry in entries)
    entries = [entry for entry in entries if entry.snapshot["id"] not in existing]
    accepted, new_crawls = _accept(entries, crawls, restored.problems)
    names = {name for record in new_crawls for name in record.tags}
    tag_ids = _tag_ids(names | {name for entry in accepted for name in entry.tags})
    _create_crawls(new_crawls, tag_ids)
    snapshots = _create_snapshots(accepted, tag_ids, planned_ids, restored.orphans)
    results = [
        ArchiveResult(snapshot_id=entry.snapshot["id"], retry_at=None, **values)
        for entry in accepted
        for values in entry.results
    ]
    ArchiveResult.objects.bulk_create(results, batch_size=BATCH_SIZE)
    _count_bytes(accepted)
    _restore_skips(accepted)
    sealed = Snapshot.objects.filter(pk__in=[s.pk for s in snapshots], status=SnapshotStatus.SEALED)
    for snapshot in sealed:
        snapshot_index_text(snapshot=snapshot)  # found by search again
        _restore_content_digest(snapshot)
    restored.snapshots, restored.results = len(snapshots), len(results)
    restored.crawls = [record.id for record in new_crawls]
    return restored


def _restore_skips(entries: list[FolderIndex]) -> None:
    """Record again the links each of ``entries``' pages led to and its crawl left out (those
    recorded already, as a live database has them, are left as they are)."""
    CrawlSkip.objects.bulk_create(
        [
            CrawlSkip(crawl_id=entry.snapshot["crawl_id"], found_on=entry.snapshot["url"], **skip)
            for entry in entries
            for skip in entry.skipped
        ],
        batch_size=BATCH_SIZE,
        ignore_conflicts=True,
    )


def _count_bytes(entries: list[FolderIndex]) -> None:
    """Count again the bytes of the crawls the restored ``entries`` joined, from all their
    results (a count kept by a database that lost the snapshot's row may hold it already)."""
    crawl_ids = {entry.snapshot["crawl_id"] for entry in entries}
    held = (
        ArchiveResult.objects.filter(snapshot__crawl=OuterRef("pk"))
        .order_by()
        .values("snapshot__crawl")
        .annotate(total=Sum("output_size"))
        .values("total")
    )
    Crawl.objects.filter(pk__in=crawl_ids).update(bytes_written=Coalesce(Subquery(held), 0))


def _accept(
    entries: list[FolderIndex], crawls: dict[int, CrawlRecord], problems: list[tuple[str, str]]
) -> tuple[list[FolderIndex], list[CrawlRecord]]:
    """Return the ``entries`` that can join the database and the crawls to create for them
    (those not in it yet); append ``(folder, reason)`` to ``problems`` for each entry that
    cannot (_conflict)."""
    crawl_ids = {entry.snapshot["crawl_id"] for entry in entries}
    crawls_in_db = dict(Crawl.objects.filter(pk__in=crawl_ids).values_list("pk", "created_at"))
    urls = [entry.snapshot["url"] for entry in entries]
    taken = set(
        Snapshot.objects.filter(crawl_id__in=crawl_ids, url__in=urls).values_list("crawl_id", "url")
    )
    accepted = []
    for entry in entries:
        problem = _conflict(entry, crawls[entry.snapshot["crawl_id"]], crawls_in_db, taken)
        if problem:
            problems.append((str(entry.folder), problem))
            continue
        taken.add((entry.snapshot["crawl_id"], entry.snapshot["url"]))
        accepted.append(entry)
    new_crawls = [crawls[pk] for pk in sorted(crawl_ids - crawls_in_db.keys())]
    new_crawls = [c for c in new_crawls if any(e.snapshot["crawl_id"] == c.id for e in accepted)]
    return accepted, new_crawls


def _create_crawls(records: list[CrawlRecord], tag_ids: dict[str, int]) -> None:
    """Create the crawls of ``records``, sealed, with their tags (``tag_ids``: {name: id})."""
    Crawl.objects.bulk_create([_crawl_row(record) for record in records])
    Crawl.tags.through.objects.bulk_create(
        [
            Crawl.tags.through(crawl_id=record.id, tag_id=tag_ids[name])
            for record in records
            for name in record.tags
        ]
    )


def _create_snapshots(
    entries: list[FolderIndex],
    tag_ids: dict[str, int],
    planned_ids: set[uuid.UUID],
    orphans: dict[uuid.UUID, uuid.UUID],
) -> list[Snapshot]:
    """Create the snapshots of ``entries`` with their tags; return them. A snapshot whose
    parent is neither in the database nor in ``entries`` gets none; if that parent is still to
    be restored (in ``planned_ids``), ``orphans`` gains ``{snapshot id: parent id}``."""
    in_batch = {entry.snapshot["id"] for entry in entries}
    parents = {entry.parent_id for entry in entries if entry.parent_id}
    present = in_batch | _existing_snapshots(parents - in_batch)
    snapshots = []
    for entry in entries:
        parent = entry.parent_id if entry.parent_id in present else None
        if entry.parent_id and parent is None and entry.parent_id in planned_ids:
            orphans[entry.snapshot["id"]] = entry.parent_id
        snapshots.append(
            Snapshot(
                **entry.snapshot,
                parent_id=parent,
                status=entry.status,
                error=entry.error,
                manifest_sha256=entry.manifest_sha256,
                retry_at=None,
            )
        )
    Snapshot.objects.bulk_create(snapshots, batch_size=BATCH_SIZE)
    Snapshot.tags.through.objects.bulk_create(
        [
            Snapshot.tags.through(snapshot_id=entry.snapshot["id"], tag_id=tag_ids[name])
            for entry in entries
            for name in entry.tags
        ]
    )
    return snapshots


def _restore_content_digest(snapshot: Snapshot) -> None:
    """Take a restored snapshot's content digest again from its folder's readable text
    (index.json does not record it); a text that cannot be read leaves none."""
    try:
        digest = snapshot_content_digest(snapshot=snapshot)
    except OSError:
        return
    Snapshot.objects.filter(pk=snapshot.pk).update(content_digest=digest)


def _conflict(
    entry: FolderIndex,
    crawl: CrawlRecord,
    crawls_in_db: dict[int, datetime],
    taken: set[tuple[int, str]],
) -> str:
    """Return why ``entry`` cannot join the database as it is ("" when it can)."""
    crawl_id, url = entry.snapshot["crawl_id"], entry.snapshot["url"]
    created = crawls_in_db.get(crawl_id)
    # Crawl ids are reused by a database started afresh: never join another crawl's snapshots.
    if created is not None and (
        created != entry.crawl.created_at if entry.crawl else created > entry.snapshot["created_at"]
    ):
        return (
            f"crawl {crawl_id} in the database is another crawl (created {created.isoformat()}, "
            f"not {crawl.created_at.isoformat()}); not restored"
        )
    if (crawl_id, url) in taken:
        return f"crawl {crawl_id} already has another snapshot of {url}"
    return ""


def _crawl_row(record: CrawlRecord) -> Crawl:
    """A crawl all of whose snapshots are restored, hence final: sealed (report written later)."""
    return Crawl(
        pk=record.id,
        status=CrawlStatus.SEALED,
        seeds="\n".join(record.seeds),
        depth=record.depth,
        any_host=record.any_host,
        priority=record.priority,
        source_file=record.source_file,
        seed_details=record.seed_details,
        input_report=record.input_report,
        **record.politeness,
        stop_reason=record.stop_reason,
        created_at=record.created_at,
        retry_at=None,
    )


def _tag_ids(names: set[str]) -> dict[str, int]:
    """Return ``{name: tag id}``, creating the tags that do not exist yet."""
    if not names:
        return {}
    Tag.objects.bulk_create([Tag(name=name) for name in sorted(names)], ignore_conflicts=True)
    return dict(Tag.objects.filter(name__in=names).values_list("name", "pk"))


def _link_orphans(orphans: dict[uuid.UUID, uuid.UUID]) -> None:
    """Link children restored before their parent (only if index.json depths disagree)."""
    present = _existing_snapshots(orphans.values())
    with transaction.atomic():
        for child, parent in orphans.items():
            if parent in present:
                Snapshot.objects.filter(pk=child, parent__isnull=True).update(parent_id=parent)


def _reset_crawl_sequence() -> None:
    """Move PostgreSQL's crawl id sequence past the ids restored (SQLite needs nothing)."""
    statements = connection.ops.sequence_reset_sql(no_style(), [Crawl])
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def _finish_crawls() -> None:
    """Write the report, start and end of every restored crawl.

    A restored crawl is created sealed with an empty report, which no sealed crawl has
    otherwise: that also finds the crawls of a reindex that stopped before this step. Start and
    end are its snapshots' earliest start and latest end, and its duration the time between.
    """
    for crawl in Crawl.objects.filter(status=CrawlStatus.SEALED, report={}):
        span = crawl.snapshots.aggregate(start=Min("start_ts"), end=Max("end_ts"))
        report = crawl_report(crawl=crawl)
        start, end = span["start"], span["end"]
        report["duration_seconds"] = round((end - start).total_seconds(), 3) if start and end else 0
        Crawl.objects.filter(pk=crawl.pk).update(report=report, start_ts=start, end_ts=end)
