"""Unchanged bytes stored once (issue 20): WARC revisit records and the payload index.

A response whose payload a sealed snapshot already holds in full is kept as a ``revisit``
record (identical-payload-digest profile: core/folder/revisits.py) that refers to that
original, as wget's ``--warc-dedup``, pywb and Browsertrix Crawler do. The index of originals
(PayloadRecord) and of Vellum's revisits (PayloadRevisit) is what ties them:

- finalizing (core/services/finalizing.py) calls ``snapshot_deduplicate`` after the integrity
  check and before the WACZ and the manifest, then ``payloads_record`` as it seals;
- a re-archive moves a run's WARCs to ``history/<run>/`` and ``payloads_moved`` follows them;
- removing a snapshot first calls ``referrers_release``: every revisit that refers to it is
  made whole again, or pointed at a copy that stays (core/services/removal.py re-seals them);
- replay and export need a snapshot whole: ``whole_folder`` lays out its WARCs with every
  revisit made whole from its original, and ``snapshot_replay_wacz`` packages that once;
- ``payloads_rebuild`` reads the index back from the WARCs (``manage.py reindex``).

Only records of sealed snapshots are referred to, and a revisit row is committed before its
WARC is replaced, so that a removal always finds who depends on what it removes.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.choices import SnapshotStatus
from core.folder.manifest import TEMP_PREFIX, payload_files
from core.folder.revisits import (
    Change,
    Original,
    RecordInfo,
    Repoint,
    RevisitError,
    ToResponse,
    ToRevisit,
    rewrite_warc,
    scan_warc,
)
from core.folder.wacz import (
    SCREENSHOT_PATH,
    WACZ_NAME,
    WARC_SUFFIXES,
    PageSource,
    package_wacz,
    snapshot_warcs,
)
from core.models import ArchiveResult, PayloadRecord, PayloadRevisit, Snapshot
from core.services.search import snapshot_page_text
from crawls.models import crawl_add_bytes
from orchestrator.prepared import Statement

logger = logging.getLogger(__name__)

CACHE_DIR = "cache/replay"  # in DATA_DIR: WACZ files made whole for replay, rebuilt at will
WORK_DIR = "tmp"  # in DATA_DIR: same file system as the archive, so files can be linked
LOOKUP_BATCH = 500  # values per IN (...) query (SQLite limits a query's parameters)
ATTEMPTS = 3  # of deduplicating one WARC while the originals found are being removed

# A WARC and its records: {WARC path relative to the snapshot folder: [record, ...]}.
WarcRecords = dict[str, list[RecordInfo]]


class DependentsBusy(Exception):
    """A snapshot that refers to the one being removed is being archived or finalized: it
    cannot be made whole now. ``str()`` names it."""


# --- finalizing ----------------------------------------------------------------------------------


def snapshot_deduplicate(*, snapshot: Snapshot, results: Sequence[ArchiveResult]) -> WarcRecords:
    """Rewrite the WARCs of ``snapshot`` (in ``finalizing``) so that each response whose
    payload (DEDUP_MIN_BYTES or more) a sealed other snapshot holds in full becomes a revisit
    of it; return the responses left whole that may be referred to, by WARC, for
    ``payloads_record``.

    An uncompressed WARC (wget's) is packed on the way, DEDUPLICATE on or off: written gzipped
    as ``<name>.warc.gz``, then deleted; the result whose files held it names the packed one
    (in the database and in ``results``, the caller's copies of the snapshot's results).
    With DEDUPLICATE off the WARCs are left as they are otherwise (their originals are still
    returned).
    Repeatable: a WARC rewritten by an earlier attempt keeps its revisits. Raises RevisitError
    or OSError when a WARC cannot be rewritten (finalizing retries).
    """
    folder = snapshot.output_dir
    originals: WarcRecords = {}
    for warc in snapshot_warcs(folder):
        packed = _packed_name(warc)
        if packed is not None and packed.is_file():
            # An attempt that crashed after packing it, before deleting it: the packed copy is
            # whole (it replaced its temporary file only once it read back sound), and comes
            # next in this list (sorted: ``<name>.warc`` before ``<name>.warc.gz``).
            _packing_done(snapshot, results, warc, packed)
            continue
        relative = (packed or warc).relative_to(folder).as_posix()
        records = scan_warc(warc)
        if records is None:
            continue  # not rewritable (several records a gzip member): kept whole, not indexed
        _forget_stale_revisits(snapshot, relative, records)
        if settings.DEDUPLICATE or packed:
            records = _deduplicate_warc(snapshot, warc, relative, records, packed=packed)
        if packed is not None:
            _packing_done(snapshot, results, warc, packed)
        originals[relative] = [record for record in records if _referable(record)]
    return originals


def _packed_name(warc: Path) -> Path | None:
    """Where an uncompressed WARC (``<name>.warc``, wget's) is packed: ``<name>.warc.gz``;
    None for a WARC gzipped already."""
    return warc.with_name(f"{warc.name}.gz") if warc.name.endswith(".warc") else None


def _referable(record: RecordInfo) -> bool:
    """True for a response that holds a whole payload big enough to be worth a revisit."""
    payload = record.payload
    return (
        record.rec_type == "response"
        and payload is not None
        and not payload.truncated
        and bool(payload.digest)
        and bool(record.record_id)
        and payload.length >= settings.DEDUP_MIN_BYTES
    )


def _deduplicate_warc(
    snapshot: Snapshot,
    warc: Path,
    relative: str,
    records: list[RecordInfo],
    *,
    packed: Path | None = None,
) -> list[RecordInfo]:
    """Make revisits of the responses of ``warc`` that sealed snapshots hold (with DEDUPLICATE
    on); return its records as they are now (the changed ones as revisits). An uncompressed
    ``warc`` is written gzipped to ``packed`` (``relative`` names it) whether anything changed
    or not, so that what became a revisit is never compressed; the caller then deletes it
    (``_packing_done``)."""
    for _attempt in range(ATTEMPTS):
        used = _revisits_due(snapshot, records) if settings.DEDUPLICATE else {}
        if not used and packed is None:
            return records
        changes: dict[str, Change] = {
            record_id: ToRevisit(_as_original(original)) for record_id, original in used.items()
        }
        target = packed or warc
        temp = target.with_name(f"{TEMP_PREFIX}dedup-{target.name}")
        rewrite_warc(warc, changes, output=temp, records=records)
        try:
            if used and not _record_revisits(snapshot, relative, used):
                continue  # an original's snapshot left meanwhile: look again
            # The rows are committed first: a crash now leaves rows for whole responses,
            # which the next attempt forgets (_forget_stale_revisits), never the reverse.
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
        if used:
            logger.info("snapshot %s: %s: %d responses written as revisits", snapshot.pk,
                        relative, len(used))  # fmt: skip
        return [_as_revisit(r) if r.record_id in used else r for r in records]
    raise RevisitError(f"{relative}: the originals found kept being removed; try again")


def _packing_done(
    snapshot: Snapshot, results: Sequence[ArchiveResult], warc: Path, packed: Path
) -> None:
    """Once ``warc`` is packed: have the result whose files list it name ``packed`` instead,
    its size and the crawl's bytes (``max_bytes``) counted as stored, then delete ``warc``.

    In that order, so that a crash part-way is finished by the next attempt: a result that
    names the packed WARC already is left as it is, and nothing is counted twice."""
    folder = snapshot.output_dir
    old, new = (path.relative_to(folder).as_posix() for path in (warc, packed))
    for result in results:
        if old in result.output_files:
            shrunk = packed.stat().st_size - warc.stat().st_size
            result.output_files = [new if name == old else name for name in result.output_files]
            result.output_size += shrunk
            with transaction.atomic():  # no transition: the files' names and sizes alone
                ArchiveResult.objects.filter(pk=result.pk).update(
                    output_files=result.output_files, output_size=result.output_size
                )
                crawl_add_bytes(snapshot.crawl_id, shrunk)
    warc.unlink()


def _revisits_due(snapshot: Snapshot, records: list[RecordInfo]) -> dict[str, PayloadRecord]:
    """``{record id: original}`` for the responses of ``records`` whose payload a sealed
    other snapshot holds."""
    own = {row.record_id for row in OWN_PAYLOADS.records(snapshot.pk)}
    # A response some revisit already refers to stays whole, whatever else holds its payload.
    candidates = [r for r in records if _referable(r) and r.record_id not in own]
    found = _originals_of({r.payload.sha256 for r in candidates}, exclude=snapshot)
    return {r.record_id: found[r.payload.sha256] for r in candidates if r.payload.sha256 in found}


def _own_payloads(snapshot_id: uuid.UUID) -> QuerySet:
    """The payload records of snapshot ``snapshot_id`` (their record ids)."""
    return PayloadRecord.objects.filter(snapshot_id=snapshot_id).only("record_id")


def _revisits_in_warc(snapshot_id: uuid.UUID, warc: str) -> QuerySet:
    """The revisit rows of snapshot ``snapshot_id``'s WARC ``warc`` (their record ids)."""
    return PayloadRevisit.objects.filter(snapshot_id=snapshot_id, warc=warc).only("record_id")


def _revisit_warcs(snapshot_id: uuid.UUID) -> QuerySet:
    """The revisit rows of snapshot ``snapshot_id`` (the WARC each is in)."""
    return PayloadRevisit.objects.filter(snapshot_id=snapshot_id).only("warc")


# What finalizing reads of every snapshot's payloads, compiled once (orchestrator/prepared.py).
OWN_PAYLOADS = Statement(
    "payload records of a snapshot", _own_payloads, (uuid.UUID,), actors=("snapshot",)
)
REVISITS_IN_WARC = Statement(
    "revisits of a snapshot's WARC", _revisits_in_warc, (uuid.UUID, str), actors=("snapshot",)
)
REVISIT_WARCS = Statement(
    "WARCs with revisits of a snapshot", _revisit_warcs, (uuid.UUID,), actors=("snapshot",)
)


def _record_revisits(snapshot: Snapshot, relative: str, used: dict[str, PayloadRecord]) -> bool:
    """Commit a revisit row for each of ``used`` in WARC ``relative``; False (and none) when
    an original's snapshot is no longer sealed."""
    with transaction.atomic():
        if not _lock_sealed({original.snapshot_id for original in used.values()}):
            return False
        PayloadRevisit.objects.bulk_create(
            PayloadRevisit(snapshot=snapshot, warc=relative, record_id=record_id, original=original)
            for record_id, original in used.items()
        )
    return True


def _as_original(record: PayloadRecord) -> Original:
    return Original(
        record_id=record.record_id, target_uri=record.target_uri, warc_date=record.warc_date
    )


def _as_revisit(record: RecordInfo) -> RecordInfo:
    return RecordInfo(
        rec_type="revisit",
        record_id=record.record_id,
        target_uri=record.target_uri,
        warc_date=record.warc_date,
        offset=record.offset,
        length=record.length,
        payload=None,
        refers_to="",
    )


def _originals_of(digests: Iterable[str], *, exclude: Snapshot) -> dict[str, PayloadRecord]:
    """Return ``{payload sha256: its first original in a sealed snapshot but ``exclude``}``."""
    wanted = sorted(digests)
    found: dict[str, PayloadRecord] = {}
    for start in range(0, len(wanted), LOOKUP_BATCH):
        rows = (
            PayloadRecord.objects.usable()
            .filter(payload_sha256__in=wanted[start : start + LOOKUP_BATCH])
            .exclude(snapshot=exclude)
            .order_by("pk")
        )
        for row in rows:
            found.setdefault(row.payload_sha256, row)
    return found


def _lock_sealed(snapshot_ids: set) -> bool:
    """Lock the rows of ``snapshot_ids`` (call inside a transaction); True when all are still
    sealed. A removal locks the snapshot it removes, so the two never cross."""
    ids = list(snapshot_ids)
    locked = Snapshot.objects.select_for_update().filter(pk__in=ids, status=SnapshotStatus.SEALED)
    return len(list(locked.values_list("pk", flat=True))) == len(ids)


def _forget_stale_revisits(snapshot: Snapshot, relative: str, records: list[RecordInfo]) -> None:
    """Delete the revisit rows of ``relative`` whose record is not a revisit in it (left by an
    attempt that crashed after recording them, before replacing the WARC)."""
    revisits = {record.record_id for record in records if record.rec_type == "revisit"}
    rows = REVISITS_IN_WARC.records(snapshot.pk, relative)
    stale = [row.pk for row in rows if row.record_id not in revisits]
    for start in range(0, len(stale), LOOKUP_BATCH):
        PayloadRevisit.objects.filter(pk__in=stale[start : start + LOOKUP_BATCH]).delete()


def payloads_record(*, snapshot: Snapshot, originals: WarcRecords) -> None:
    """Index the originals ``snapshot_deduplicate`` returned (call in the sealing transaction):
    rows are added for new ones, and removed for records no longer there that nothing refers
    to."""
    rows = PayloadRecord.objects.filter(snapshot=snapshot, warc__in=list(originals))
    known = {
        (warc, record_id): pk for pk, warc, record_id in rows.values_list("pk", "warc", "record_id")
    }
    wanted = {(warc, r.record_id) for warc, records in originals.items() for r in records}
    gone = [pk for key, pk in known.items() if key not in wanted]
    PayloadRecord.objects.filter(pk__in=gone, revisits__isnull=True).delete()
    PayloadRecord.objects.bulk_create(
        _payload_row(snapshot, warc, record)
        for warc, records in originals.items()
        for record in records
        if (warc, record.record_id) not in known
    )


def _payload_row(snapshot: Snapshot, warc: str, record: RecordInfo) -> PayloadRecord:
    return PayloadRecord(
        snapshot=snapshot,
        warc=warc,
        record_id=record.record_id,
        target_uri=record.target_uri,
        warc_date=record.warc_date,
        payload_digest=record.payload.digest,
        payload_sha256=record.payload.sha256,
        payload_length=record.payload.length,
    )


# --- re-archive ----------------------------------------------------------------------------------


def payloads_moved(*, snapshot: Snapshot, moved_to: str) -> None:
    """Follow the WARCs of ``snapshot``'s run that a re-archive moved to ``moved_to``
    (``history/<run>``): the rows of its top-level WARCs now name them there."""
    for model in (PayloadRecord, PayloadRevisit):
        for pk, warc in model.objects.filter(snapshot=snapshot).values_list("pk", "warc"):
            if _top_level(warc):
                model.objects.filter(pk=pk).update(warc=f"{moved_to}/{warc}")


def _top_level(warc: str) -> bool:
    """True for ``<extractor>/warc/<name>``: a WARC of the current run (core/folder/wacz.py)."""
    parts = warc.split("/")
    return len(parts) == 3 and parts[1] == "warc"


# --- removal -------------------------------------------------------------------------------------


def referrers_release(*, snapshot: Snapshot) -> dict[Snapshot, list[str]]:
    """Make every revisit that refers to a record of ``snapshot`` independent of it; return
    the snapshots whose WARCs changed, each with one line per WARC saying what was done.

    For each original, the first snapshot that refers to it (the earliest created) gets the
    payload back in its revisit, which becomes its response again; the others' revisits then
    refer to that one, so the payload stays stored once. The caller re-seals the sealed ones.
    Repeatable after a crash. Raises DependentsBusy when a snapshot to change is being
    archived or finalized (nothing is changed then), RevisitError when an original cannot be
    read (the removal must not go on), OSError for the disk.
    """
    revisits = list(
        PayloadRevisit.objects.filter(original__snapshot=snapshot)
        .select_related("original", "snapshot")
        .order_by("snapshot__created_at", "snapshot_id", "pk")
    )
    busy = sorted({r.snapshot for r in revisits if r.snapshot.status in SnapshotStatus.active()},
                  key=lambda s: str(s.pk))  # fmt: skip
    if busy:
        raise DependentsBusy(
            f"snapshot {busy[0].pk}, which refers to records of it, is {busy[0].status}: "
            "remove this one once that is finished"
        )
    by_original: dict[int, list[PayloadRevisit]] = defaultdict(list)
    for revisit in revisits:
        by_original[revisit.original_id].append(revisit)
    done: dict[Snapshot, list[tuple[str, str]]] = defaultdict(list)
    # First the keepers: each original's first referrer gets the payload back.
    whole: dict[tuple[Snapshot, str], dict[str, Change]] = defaultdict(dict)
    for referring in by_original.values():
        keeper, original = referring[0], referring[0].original
        source = ToResponse(
            warc=snapshot.output_dir / original.warc,
            record_id=original.record_id,
            sha256=original.payload_sha256,
        )
        for revisit in referring:
            if revisit.snapshot_id == keeper.snapshot_id:
                whole[revisit.snapshot, revisit.warc][revisit.record_id] = source
    for (referrer, warc), changes in whole.items():
        rewrite_warc(referrer.output_dir / warc, changes)
        _made_whole(referrer, warc, [r for r in revisits if r.snapshot_id == referrer.pk
                                     and r.warc == warc and r.record_id in changes])  # fmt: skip
        done[referrer].append((warc, f"{len(changes)} revisits made whole"))
    # Then the others refer to the keeper's copy.
    repoint: dict[tuple[Snapshot, str], list[tuple[PayloadRevisit, PayloadRecord]]] = defaultdict(
        list
    )
    for referring in by_original.values():
        keeper = referring[0]
        kept = PayloadRecord.objects.get(snapshot=keeper.snapshot, record_id=keeper.record_id)
        for revisit in referring:
            if revisit.snapshot_id != keeper.snapshot_id:
                repoint[revisit.snapshot, revisit.warc].append((revisit, kept))
    for (referrer, warc), pairs in repoint.items():
        changes = {revisit.record_id: Repoint(_as_original(kept)) for revisit, kept in pairs}
        rewrite_warc(referrer.output_dir / warc, changes)
        with transaction.atomic():
            for revisit, kept in pairs:
                PayloadRevisit.objects.filter(pk=revisit.pk).update(original=kept)
        keepers = sorted({str(kept.snapshot_id) for _revisit, kept in pairs})
        done[referrer].append(
            (warc, f"{len(pairs)} revisits now refer to snapshot {', '.join(keepers)}")
        )
    for referrer, changes in done.items():
        _note_history(referrer, snapshot, changes)
    return {
        referrer: [f"{warc}: {line}" for warc, line in lines] for referrer, lines in done.items()
    }


def _made_whole(referrer: Snapshot, warc: str, revisits: list[PayloadRevisit]) -> None:
    """Record in the index that ``revisits`` of ``referrer``'s ``warc`` are responses again:
    each becomes an original (the next revisits may refer to it), and no longer a revisit."""
    records = {r.record_id: r for r in scan_warc(referrer.output_dir / warc) or []}
    with transaction.atomic():
        for revisit in revisits:
            record = records.get(revisit.record_id)
            if record is None or record.payload is None:
                raise RevisitError(f"{warc}: record {revisit.record_id} was not made whole")
            PayloadRecord.objects.get_or_create(
                snapshot=referrer,
                record_id=record.record_id,
                defaults={
                    "warc": warc,
                    "target_uri": record.target_uri,
                    "warc_date": record.warc_date,
                    "payload_digest": record.payload.digest,
                    "payload_sha256": record.payload.sha256,
                    "payload_length": record.payload.length,
                },
            )
            PayloadRevisit.objects.filter(pk=revisit.pk).delete()


def _note_history(referrer: Snapshot, removed: Snapshot, changes: list[tuple[str, str]]) -> None:
    """Add to the history of each result whose WARC changed what was done, and why."""
    at = timezone.now().isoformat()
    for result in ArchiveResult.objects.filter(snapshot=referrer):
        own = [
            f"{warc}: {line}" for warc, line in changes if _extractor_of(warc) == result.extractor
        ]
        if not own:
            continue
        entry = {
            "event": "revisits resolved",
            "at": at,
            "reason": f"snapshot {removed.pk} ({removed.url}), which they referred to, was removed",
            "changes": own,
        }
        result.history = [*result.history, entry]
        result.save(update_fields=["history"])


def _extractor_of(warc: str) -> str:
    """The extractor that wrote ``warc`` (``wget/warc/…``, ``history/<run>/wget/warc/…``)."""
    parts = warc.split("/")
    return parts[2] if parts[0] == "history" and len(parts) > 2 else parts[0]


# --- replay and export ---------------------------------------------------------------------------


def has_revisits(snapshot: Snapshot, *, current_run: bool = True) -> bool:
    """True when a WARC of ``snapshot`` (with ``current_run``, one of its current run: what
    its WACZ holds) has revisits of Vellum's."""
    warcs = {row.warc for row in REVISIT_WARCS.records(snapshot.pk)}
    return any(_top_level(warc) or not current_run for warc in warcs)


def replay_source(snapshot: Snapshot) -> Snapshot:
    """The capture whose WARCs replay ``snapshot``: itself, or, for a capture found unchanged
    (``unchanged_since``: core/services/unchanged.py), which holds its page alone as a revisit,
    the capture it points at, which holds the page whole with everything the page loaded."""
    while snapshot.unchanged_since is not None:
        snapshot = snapshot.unchanged_since
    return snapshot


def has_replay_wacz(snapshot: Snapshot) -> bool:
    """True when ``snapshot`` has a WACZ to replay: its own ``snapshot.wacz``, or, sealed with
    revisits in its WARCs (finalizing then stores none), the one ``snapshot_replay_wacz``
    makes whole on first use; for an unchanged capture, that of its ``replay_source``."""
    snapshot = replay_source(snapshot)
    if (snapshot.output_dir / WACZ_NAME).is_file():
        return True
    return snapshot.status == SnapshotStatus.SEALED and has_revisits(snapshot)


@contextmanager
def whole_folder(snapshot: Snapshot) -> Iterator[Path]:
    """Yield a temporary folder named like ``snapshot``'s that holds its current WARCs with
    every revisit made whole (payloads copied from the originals) and its screenshot: what a
    WACZ needs to replay the snapshot alone. Removed when the block ends. Raises RevisitError
    when an original cannot be read."""
    folder = snapshot.output_dir
    changes: dict[str, dict[str, Change]] = defaultdict(dict)
    for revisit in PayloadRevisit.objects.filter(snapshot=snapshot).select_related("original"):
        original = revisit.original
        changes[revisit.warc][revisit.record_id] = ToResponse(
            warc=settings.ARCHIVE_DIR / str(original.snapshot_id) / original.warc,
            record_id=original.record_id,
            sha256=original.payload_sha256,
        )
    work = Path(settings.DATA_DIR) / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"whole-{snapshot.pk}-", dir=work) as temp:
        root = Path(temp) / str(snapshot.pk)
        for warc in snapshot_warcs(folder):
            relative = warc.relative_to(folder).as_posix()
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if changes.get(relative):
                rewrite_warc(warc, changes[relative], output=target)
            else:
                _link_or_copy(warc, target)
        screenshot = folder / SCREENSHOT_PATH
        if screenshot.is_file():
            (root / SCREENSHOT_PATH).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(screenshot, root / SCREENSHOT_PATH)
        yield root


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def snapshot_replay_wacz(*, snapshot: Snapshot) -> Path:
    """Return the WACZ to replay ``snapshot`` from: its own ``snapshot.wacz``, or, when its
    WARCs hold revisits, one made whole from it (``whole_folder``), built on first use and
    kept in ``DATA_DIR/cache/replay/`` until the snapshot's manifest changes. A capture found
    unchanged replays as its ``replay_source``.

    Raises RevisitError when an original cannot be read, PackagingError when py-wacz fails.
    """
    snapshot = replay_source(snapshot)
    own = snapshot.output_dir / WACZ_NAME
    if not has_revisits(snapshot):
        return own
    cache = Path(settings.DATA_DIR) / CACHE_DIR
    cached = cache / f"{snapshot.pk}-{snapshot.manifest_sha256[:16]}.wacz"
    if cached.is_file():
        return cached
    cache.mkdir(parents=True, exist_ok=True)
    replay_cache_drop(snapshot_id=snapshot.pk)
    package_whole_wacz(snapshot, cached, timeout=settings.WACZ_TIMEOUT)
    return cached


def package_whole_wacz(snapshot: Snapshot, target: Path, *, timeout: float) -> None:
    """Package ``snapshot`` as one WACZ at ``target`` with every revisit made whole from its
    original (``whole_folder``), as replay and exports need it. Raises what ``package_wacz``
    and ``whole_folder`` raise (PackagingError, RevisitError, OSError)."""
    with whole_folder(snapshot) as root:
        package_wacz(
            [whole_page(snapshot, root)],
            target,
            title=snapshot.title or snapshot.url,
            description=f"Vellum snapshot of {snapshot.url}",
            timeout=timeout,
        )


def whole_page(snapshot: Snapshot, root: Path) -> PageSource:
    """The page of ``snapshot`` for a WACZ packaged from ``root`` (a ``whole_folder``)."""
    return PageSource(
        folder=root,
        url=snapshot.url,
        title=snapshot.title,
        archived_at=snapshot.start_ts or snapshot.created_at,
        text=snapshot_page_text(snapshot=snapshot),
    )


def replay_cache_drop(*, snapshot_id) -> None:
    """Remove the WACZ files made whole for replay of snapshot ``snapshot_id``."""
    cache = Path(settings.DATA_DIR) / CACHE_DIR
    for path in cache.glob(f"{snapshot_id}-*.wacz"):
        path.unlink(missing_ok=True)


def referred_snapshots(snapshots: Iterable[Snapshot]) -> list[Snapshot]:
    """Return the snapshots, not among ``snapshots``, that hold originals their WARCs' revisits
    refer to, and those the originals' snapshots refer to in turn (oldest first)."""
    selected = {snapshot.pk for snapshot in snapshots}
    seen, frontier = set(selected), list(selected)
    while frontier:
        found: set = set()
        for start in range(0, len(frontier), LOOKUP_BATCH):
            rows = PayloadRevisit.objects.filter(
                snapshot_id__in=frontier[start : start + LOOKUP_BATCH]
            )
            found.update(rows.values_list("original__snapshot_id", flat=True).distinct())
        frontier = list(found - seen)
        seen |= found
    extra = list(seen - selected)
    return list(Snapshot.objects.filter(pk__in=extra).order_by("created_at", "pk"))


# --- reindex -------------------------------------------------------------------------------------


def capture_warcs(folder: Path) -> list[Path]:
    """Every WARC of every run in ``folder``: ``<extractor>/warc/*`` and
    ``history/<run>/<extractor>/warc/*``."""
    found = []
    for path in payload_files(folder):
        parts = path.relative_to(folder).parts
        current = len(parts) == 3 and parts[1] == "warc"
        earlier = len(parts) == 5 and parts[0] == "history" and parts[3] == "warc"
        if (current or earlier) and path.name.endswith(WARC_SUFFIXES):
            found.append(path)
    return found


def payloads_rebuild(*, snapshot_ids: Iterable) -> list[tuple[str, str]]:
    """Index the originals and revisits of the sealed snapshots ``snapshot_ids`` again from
    their WARCs (after ``manage.py reindex`` restored their rows); return ``(WARC, reason)``
    for each revisit whose original is nowhere in the archive."""
    snapshots = list(
        Snapshot.objects.filter(pk__in=list(snapshot_ids), status=SnapshotStatus.SEALED)
    )
    pending: list[tuple[Snapshot, str, RecordInfo]] = []
    for snapshot in snapshots:
        folder = snapshot.output_dir
        known = set(
            PayloadRecord.objects.filter(snapshot=snapshot).values_list("record_id", flat=True)
        )
        for warc in capture_warcs(folder):
            relative = warc.relative_to(folder).as_posix()
            records = scan_warc(warc) or []
            fresh = [r for r in records if _referable(r) and r.record_id not in known]
            PayloadRecord.objects.bulk_create(_payload_row(snapshot, relative, r) for r in fresh)
            known.update(r.record_id for r in fresh)
            pending += [
                (snapshot, relative, r) for r in records if r.rec_type == "revisit" and r.refers_to
            ]
    # Every original the revisits name, read in one query, not one per revisit.
    holders: dict[str, list[PayloadRecord]] = defaultdict(list)
    for record in PayloadRecord.objects.filter(record_id__in={r.refers_to for *_, r in pending}):
        holders[record.record_id].append(record)
    problems = []
    for snapshot, relative, record in pending:
        original = next(
            (held for held in holders[record.refers_to] if held.snapshot_id != snapshot.pk), None
        )
        if original is None:
            problems.append((f"{snapshot.output_dir / relative}",
                             f"revisit {record.record_id} refers to {record.refers_to}, "
                             "which no snapshot holds"))  # fmt: skip
            continue
        PayloadRevisit.objects.get_or_create(
            snapshot=snapshot,
            record_id=record.record_id,
            defaults={"warc": relative, "original": original},
        )
    return problems
