"""Export sealed snapshots for another archive: as one BagIt bag (RFC 8493), or as WACZ files.

Only sealed snapshots are exported, and only those whose folder passes a fixity check
(core.services.fixity.local_problems: the manifest is the one sealed, its signature verifies,
every file matches it): a bag or a WACZ written from a damaged folder would carry fresh
checksums over the damage and pass for good. Whatever is left out is reported with its reason;
``LeftOut.problem`` tells damage and failures (which the caller should treat as an error) from
snapshots that are simply not exportable (not sealed yet, no WARC to make a WACZ from).

A snapshot whose WARCs hold revisit records (core/services/dedup.py) is not whole alone: a bag
also carries, as folders of their own, the snapshots holding the records they refer to
(``Vellum-Referred-Snapshot-Count`` in bag-info.txt), each verified and signed as it is; a WACZ
is packaged with those records in place of the revisits. A snapshot whose originals are
damaged is left out.

Copies are checked as well: a disk can return other bytes than it was given without an error.
For a bag, the SHA-256 that bagit computes of every copied file while making the bag must equal
the snapshot manifest's (one read of each copy, which bagit makes anyway); for WACZ files, the
copy's SHA-256 must equal the manifest's, and py-wacz's validator must accept the copy.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import bagit
from django.conf import settings

from core.choices import SnapshotStatus
from core.folder.manifest import TAG_FILES, TEMP_PREFIX, payload_files, read_manifest, sha256_file
from core.folder.revisits import RevisitError
from core.folder.wacz import (
    WACZ_NAME,
    PackagingError,
    PageSource,
    package_wacz,
    snapshot_warcs,
    validate_waczs,
)
from core.models import Snapshot
from core.services.dedup import (
    has_revisits,
    package_whole_wacz,
    referred_snapshots,
    whole_folder,
    whole_page,
)
from core.services.fixity import local_problems
from core.services.search import snapshot_page_text
from crawls.models import Crawl
from orchestrator.prepared import with_related

SOURCE_ORGANIZATION = "Vellum"
BAG_CHECKSUMS = ["sha256", "sha512"]
MAX_PROBLEMS_SHOWN = 3  # of one snapshot's manifest problems, in its one-line reason


class ExportError(Exception):
    """The export cannot be done as asked (unknown id, unusable destination, bagit refusing the
    folder); ``str()`` says why, for the person who asked."""


@dataclass(frozen=True)
class Selection:
    """The snapshots one export covers: a crawl's, or a single one.

    ``identifier`` names the export (``crawl-12``, ``snapshot-<id>``); ``crawl`` is None for a
    single snapshot.
    """

    identifier: str
    snapshots: list[Snapshot]
    crawl: Crawl | None = None

    def describe(self, exported: int) -> str:
        """Return one line saying what the export holds, e.g. "Vellum crawl 12: 20 snapshots of
        https://a.example/ and 2 more seeds"."""
        if self.crawl is None:
            snapshot = self.snapshots[0]
            archived = (snapshot.start_ts or snapshot.created_at).date().isoformat()
            return f"Vellum snapshot {snapshot.pk}: {snapshot.url}, archived {archived}"
        seeds = self.crawl.seed_list()
        more = f" and {_count(len(seeds) - 1, 'more seed')}" if len(seeds) > 1 else ""
        first = seeds[0] if seeds else "no seeds"
        return f"Vellum crawl {self.crawl.pk}: {_count(exported, 'snapshot')} of {first}{more}"


@dataclass(frozen=True)
class LeftOut:
    """A snapshot the export left out: ``kind`` groups reasons in a summary ("not sealed"),
    ``reason`` is the full one-line reason; ``problem`` is True for damage or a failure."""

    snapshot_id: str
    url: str
    kind: str
    reason: str
    problem: bool

    def line(self) -> str:
        return f"{self.snapshot_id} {self.url}: left out: {self.reason}"


@dataclass(frozen=True)
class ExportProgress:
    """One step of an export: ``done`` of ``total`` items of ``stage`` (``total`` 0: one step
    of unknown length); ``line`` says what happened to the snapshot just handled, if anything,
    and ``left_out`` whether that was leaving it out."""

    stage: str
    done: int
    total: int
    line: str = ""
    left_out: bool = False


ProgressCallback = Callable[[ExportProgress], None]


@dataclass
class ExportReport:
    """What an export did. ``files`` are the WACZ files written (none for a bag); ``failures``
    are problems with the export as a whole (the bag or the crawl's WACZ)."""

    format: str
    dest: Path
    selected: int
    exported: list[str] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    combined: Path | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[LeftOut]:
        """The snapshots left out because of damage or a failure."""
        return [item for item in self.left_out if item.problem]

    def left_out_summary(self, items: Iterable[LeftOut] | None = None) -> str:
        """Return e.g. "2 damaged, 1 not sealed" for ``items`` (all left out by default)."""
        kinds = Counter(item.kind for item in (self.left_out if items is None else items))
        return ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())


def select_snapshots(*, crawl_id: int | None = None, snapshot_id: str | None = None) -> Selection:
    """Return the snapshots of crawl ``crawl_id``, or snapshot ``snapshot_id`` (give one).

    Raise ExportError when the id names nothing ("no crawl 99") or is not an id.
    """
    if (crawl_id is None) == (snapshot_id is None):
        raise ExportError("Say what to export: --crawl ID or --snapshot ID.")
    if crawl_id is not None:
        crawl = Crawl.objects.filter(pk=crawl_id).first()
        if crawl is None:
            raise ExportError(f"no crawl {crawl_id}")
        snapshots = list(Snapshot.objects.for_crawl(crawl).order_by("created_at", "pk"))
        if not snapshots:
            raise ExportError(f"crawl {crawl_id} has no snapshots")
        return Selection(identifier=f"crawl-{crawl.pk}", snapshots=snapshots, crawl=crawl)
    try:
        pk = uuid.UUID(str(snapshot_id))
    except ValueError:
        raise ExportError(f"{snapshot_id!r} is not a snapshot id (a UUID)") from None
    snapshot = with_related(Snapshot.objects.filter(pk=pk), ("crawl",)).first()
    if snapshot is None:
        raise ExportError(f"no snapshot {snapshot_id}")
    return Selection(identifier=f"snapshot-{snapshot.pk}", snapshots=[snapshot])


# --- BagIt ---------------------------------------------------------------------------------------


def export_bagit(
    selection: Selection, dest: Path, *, on_progress: ProgressCallback | None = None
) -> ExportReport:
    """Write the sealed, intact snapshots of ``selection`` as a BagIt bag at ``dest``.

    ``dest`` must not exist or be an empty folder (ExportError otherwise, before anything is
    written; also when bagit refuses to make the bag). Each snapshot's folder
    (payload, manifest and signature; no temporary files) becomes ``data/<snapshot id>/``; the bag
    has sha256 and sha512 manifests and a bag-info.txt (Source-Organization,
    External-Description, External-Identifier, Vellum-Snapshot-Count; bagit adds Bagging-Date
    and Payload-Oxum). A snapshot whose copy differs from its manifest is taken out of the bag
    again and reported. The finished bag is then checked for completeness (every file its
    manifests list, no other, Payload-Oxum): its checksums are the ones make_bag just computed
    and compared with the snapshots' manifests, so hashing every copy a second time would learn
    nothing. What fails goes to ``failures``. Nothing is written when no snapshot can be exported.
    """
    dest = _usable_dest(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ExportError(f"{dest} is not an empty folder: a bag needs a folder of its own")
    progress = on_progress or (lambda event: None)
    report = ExportReport(format="bagit", dest=dest, selected=len(selection.snapshots))
    intact = _verified(selection.snapshots, report, progress)
    intact, referred = _with_referred(intact, report, progress)
    if not intact:
        return report
    dest.mkdir(parents=True, exist_ok=True)
    for done, snapshot in enumerate(intact + referred, 1):
        _copy_folder(snapshot.output_dir, dest / str(snapshot.pk))
        line = f"{snapshot.pk} {snapshot.url}: copied"
        if snapshot in referred:
            line += " (records the others refer to)"
        progress(ExportProgress("Copying", done, len(intact) + len(referred), line))
    progress(ExportProgress("Making the bag", 0, 0))
    info = _bag_info(selection, len(intact), len(referred))
    try:
        bag = bagit.make_bag(str(dest), info, checksums=BAG_CHECKSUMS)
    except bagit.BagError as error:  # files it cannot read or move
        raise ExportError(f"bagit could not make a bag of {dest}: {error}") from error
    differ = _copies_that_differ(bag, intact + referred)
    # A referrer goes with the copies it depends on.
    for snapshot in intact:
        if snapshot not in differ:
            wrong = [other for other in referred_snapshots([snapshot]) if other in differ]
            if wrong:
                differ[snapshot] = [f"the copy of snapshot {wrong[0].pk}, which it refers to"]
    for snapshot, problems in differ.items():
        shutil.rmtree(dest / "data" / str(snapshot.pk))
        if snapshot in referred:
            continue
        item = _left_out(snapshot, "copied wrong", f"copy differs: {'; '.join(problems)}", True)
        report.left_out.append(item)
        progress(ExportProgress("Making the bag", 0, 0, item.line(), left_out=True))
    kept = [snapshot for snapshot in intact if snapshot not in differ]
    needed = referred_snapshots(kept)
    for snapshot in referred:
        if snapshot not in differ and snapshot not in needed:
            shutil.rmtree(dest / "data" / str(snapshot.pk))
    if differ and kept:
        bag.info.update(_bag_info(selection, len(kept), len(needed)))
        bag.save(manifests=True)
    if not kept:
        _empty(dest)  # it was empty before: leave no bag without content
        return report
    report.exported = [str(snapshot.pk) for snapshot in kept]
    progress(ExportProgress("Validating the bag", 0, 0))
    try:
        bagit.Bag(str(dest)).validate(completeness_only=True)
    except bagit.BagError as error:
        details = getattr(error, "details", None) or []
        report.failures.append(f"the bag does not validate: {error}")
        report.failures += [str(detail) for detail in details]
    return report


def _bag_info(selection: Selection, count: int, referred: int = 0) -> dict[str, str]:
    info = {
        "Source-Organization": SOURCE_ORGANIZATION,
        "External-Description": selection.describe(count),
        "External-Identifier": selection.identifier,
        "Vellum-Snapshot-Count": str(count),
    }
    if referred:
        info["External-Description"] += (
            f", with {_count(referred, 'earlier snapshot')} holding records they refer to"
        )
        info["Vellum-Referred-Snapshot-Count"] = str(referred)
    return info


def _with_referred(
    intact: list[Snapshot], report: ExportReport, progress: ProgressCallback
) -> tuple[list[Snapshot], list[Snapshot]]:
    """Return the snapshots of ``intact`` that can go whole, and the other snapshots that hold
    the records their revisits refer to (sealed and intact; oldest first). A snapshot that
    refers to a damaged or unsealed one is left out, in ``report``."""
    referred = referred_snapshots(intact)
    if not referred:
        return intact, []
    sound = {snapshot.pk for snapshot in _verified(referred, ExportReport("", Path(), 0), _quiet)}
    kept = []
    for snapshot in intact:
        broken = [other for other in referred_snapshots([snapshot]) if other.pk not in sound]
        if not broken:
            kept.append(snapshot)
            continue
        reason = f"it refers to records of snapshot {broken[0].pk}, which is damaged or not sealed"
        item = _left_out(snapshot, "refers to damage", reason, True)
        report.left_out.append(item)
        progress(ExportProgress("Verifying", 0, 0, item.line(), left_out=True))
    return kept, referred_snapshots(kept)


def _quiet(event: ExportProgress) -> None:
    """Progress of a step not shown."""


def _copy_folder(source: Path, target: Path) -> None:
    """Copy the payload files, manifest and signature of ``source`` into ``target``.

    Symbolic links and temporary files are not copied (core.folder.manifest.payload_files).
    """
    tags = [source / name for name in TAG_FILES if (source / name).is_file()]
    for path in [*payload_files(source), *tags]:
        copy = target / path.relative_to(source)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)


def _copies_that_differ(bag: bagit.Bag, snapshots: list[Snapshot]) -> dict[Snapshot, list[str]]:
    """Return ``{snapshot: problems}`` for the snapshots whose copy in ``bag`` does not match
    their manifest (the bag's own sha256 of each copied file, against the manifest's)."""
    copied: dict[str, dict[str, str]] = {}
    for entry, digests in bag.payload_entries().items():
        _data, snapshot_id, relative = Path(entry).as_posix().split("/", 2)
        copied.setdefault(snapshot_id, {})[relative] = digests["sha256"]
    differ = {}
    for snapshot in snapshots:
        folder = snapshot.output_dir
        expected = read_manifest(folder)
        expected.update(
            {name: sha256_file(folder / name) for name in TAG_FILES if (folder / name).is_file()}
        )
        found = copied.get(str(snapshot.pk), {})
        problems = [
            f"checksum mismatch: {path}"
            for path, digest in expected.items()
            if path in found and found[path] != digest
        ]
        problems += [f"missing: {path}" for path in expected.keys() - found.keys()]
        problems += [f"not in manifest: {path}" for path in found.keys() - expected.keys()]
        if problems:
            differ[snapshot] = sorted(problems)
    return differ


# --- WACZ ----------------------------------------------------------------------------------------


def export_wacz(
    selection: Selection,
    dest: Path,
    *,
    timeout: float | None = None,
    on_progress: ProgressCallback | None = None,
) -> ExportReport:
    """Write each sealed, intact snapshot's WACZ to ``dest/<snapshot id>.wacz``; for a crawl,
    also ``dest/crawl-<id>.wacz`` combining all their WARCs, pages and screenshots.

    ``dest`` is created if needed; no existing file is overwritten (ExportError, before anything
    is written). A snapshot sealed without a WACZ but with WARCs gets one built from them; one
    without a WARC is left out (not a problem). Every file written is validated with py-wacz;
    an invalid one is removed and reported. ``timeout`` bounds py-wacz per snapshot, in seconds
    (default settings.WACZ_TIMEOUT).
    """
    timeout = settings.WACZ_TIMEOUT if timeout is None else timeout
    dest = _usable_dest(dest)
    if dest.exists() and not dest.is_dir():
        raise ExportError(f"{dest} is not a folder")
    combined = dest / f"{selection.identifier}.wacz" if selection.crawl else None
    targets = [dest / f"{snapshot.pk}.wacz" for snapshot in selection.snapshots]
    existing = [path.name for path in [*targets, combined] if path and os.path.lexists(path)]
    if existing:
        raise ExportError(f"{dest} already holds {', '.join(existing)}: not overwriting")
    progress = on_progress or (lambda event: None)
    report = ExportReport(format="wacz", dest=dest, selected=len(selection.snapshots))
    intact = _verified(selection.snapshots, report, progress)
    if not intact:
        return report
    dest.mkdir(parents=True, exist_ok=True)
    written: dict[Path, Snapshot] = {}
    for done, snapshot in enumerate(intact, 1):
        item = _write_wacz(snapshot, dest / f"{snapshot.pk}.wacz", timeout)
        if item is None:
            written[dest / f"{snapshot.pk}.wacz"] = snapshot
            line = f"{snapshot.pk} {snapshot.url}: written"
        else:
            report.left_out.append(item)
            line = item.line()
        progress(ExportProgress("Writing", done, len(intact), line, left_out=item is not None))
    progress(ExportProgress("Validating", 0, 0))
    for path, problems in _validate(list(written), timeout).items():
        if problems:
            path.unlink()
            reason = f"its WACZ does not validate: {'; '.join(problems)}"
            item = _left_out(written.pop(path), "with an invalid WACZ", reason, True)
            report.left_out.append(item)
            progress(ExportProgress("Validating", 0, 0, item.line(), left_out=True))
    report.exported = [str(snapshot.pk) for snapshot in written.values()]
    report.files = list(written)
    if combined is not None and written:
        progress(ExportProgress(f"Packaging {combined.name}", 0, 0))
        report.combined = _combine(selection, list(written.values()), combined, report, timeout)
    return report


def _write_wacz(snapshot: Snapshot, target: Path, timeout: float) -> LeftOut | None:
    """Copy (or, sealed without one, build) ``snapshot``'s WACZ to ``target``.

    Return None when written, else why it was left out.
    """
    folder = snapshot.output_dir
    source = folder / WACZ_NAME
    if has_revisits(snapshot):
        try:
            package_whole_wacz(snapshot, target, timeout=timeout)
        except (PackagingError, RevisitError) as error:
            return _left_out(snapshot, "failed to package", f"packaging failed: {error}", True)
        return None
    if source.is_file():
        expected = read_manifest(folder).get(WACZ_NAME)
        temp = target.with_name(f"{TEMP_PREFIX}{target.name}")
        try:
            shutil.copyfile(source, temp)
            if sha256_file(temp) != expected:
                return _left_out(snapshot, "copied wrong", "copy differs: checksum mismatch", True)
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
        return None
    if not snapshot_warcs(folder):
        return _left_out(snapshot, "without a WARC", "no WACZ: it has no WARC", False)
    try:
        package_wacz(
            [_page_source(snapshot)],
            target,
            title=snapshot.title or snapshot.url,
            description=f"Vellum snapshot of {snapshot.url}",
            timeout=timeout,
        )
    except PackagingError as error:
        return _left_out(snapshot, "failed to package", f"packaging failed: {error}", True)
    return None


def _validate(paths: list[Path], timeout: float) -> dict[Path, list[str]]:
    try:
        return validate_waczs(paths, timeout=timeout)
    except PackagingError as error:
        return {path: [f"validation did not finish: {error}"] for path in paths}


def _combine(
    selection: Selection,
    snapshots: list[Snapshot],
    output: Path,
    report: ExportReport,
    timeout: float,
) -> Path | None:
    """Package every exported snapshot of a crawl as one WACZ at ``output``; None if it fails
    (the reason goes to ``report.failures``)."""
    with_warcs = [snapshot for snapshot in snapshots if snapshot_warcs(snapshot.output_dir)]
    if not with_warcs:
        return None
    try:
        with ExitStack() as stack:
            sources = [
                whole_page(snapshot, stack.enter_context(whole_folder(snapshot)))
                if has_revisits(snapshot)
                else _page_source(snapshot)
                for snapshot in with_warcs
            ]
            return package_wacz(
                sources,
                output,
                title=f"Vellum crawl {selection.crawl.pk}",
                description=selection.describe(len(with_warcs)),
                timeout=timeout * len(with_warcs),
            )
    except (PackagingError, RevisitError) as error:
        report.failures.append(f"{output.name}: {error}")
        return None


def _page_source(snapshot: Snapshot) -> PageSource:
    return PageSource(
        folder=snapshot.output_dir,
        url=snapshot.url,
        title=snapshot.title,
        archived_at=snapshot.start_ts or snapshot.created_at,
        text=snapshot_page_text(snapshot=snapshot),
    )


# --- both ----------------------------------------------------------------------------------------


def _usable_dest(dest: Path) -> Path:
    """Return ``dest`` made absolute; raise ExportError if it lies inside the archive folder."""
    dest = Path(os.path.abspath(dest))
    archive = Path(os.path.abspath(settings.ARCHIVE_DIR))
    if dest == archive or archive in dest.parents:
        raise ExportError(f"{dest} is inside the archive folder {archive}: export elsewhere")
    return dest


def _verified(
    snapshots: list[Snapshot], report: ExportReport, progress: ProgressCallback
) -> list[Snapshot]:
    """Return the sealed snapshots whose folder matches its manifest; record the rest as left
    out in ``report``."""
    intact = []
    for done, snapshot in enumerate(snapshots, 1):
        item = None
        if snapshot.status != SnapshotStatus.SEALED:
            item = _left_out(snapshot, "not sealed", f"not sealed ({snapshot.status})", False)
        else:
            problems, _files = local_problems(snapshot)  # manifest, signature and every file
            if problems:
                shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
                if len(problems) > MAX_PROBLEMS_SHOWN:
                    shown += f" (+{len(problems) - MAX_PROBLEMS_SHOWN} more)"
                reason = f"does not match its manifest: {shown}"
                item = _left_out(snapshot, "damaged", reason, True)
        if item is None:
            intact.append(snapshot)
        else:
            report.left_out.append(item)
        line = item.line() if item else ""
        progress(ExportProgress("Verifying", done, len(snapshots), line, left_out=bool(item)))
    return intact


def _count(number: int, noun: str) -> str:
    """Return "1 snapshot", "2 snapshots"."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _empty(folder: Path) -> None:
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _left_out(snapshot: Snapshot, kind: str, reason: str, problem: bool) -> LeftOut:
    return LeftOut(
        snapshot_id=str(snapshot.pk), url=snapshot.url, kind=kind, reason=reason, problem=problem
    )
