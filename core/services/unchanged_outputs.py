"""Outputs of an unchanged page stored once, though their tool wrote a new time into them.

A PDF and a SingleFile page of a page that did not change differ from the last capture's only in
the moment Chromium printed or SingleFile saved (core/folder/stamps.py). Finalizing (DEDUPLICATE
on) puts the last sealed capture's file in place of such an output, before the snapshot's
manifest is written: the two are then the same bytes, which the shared store keeps once
(core/folder/blobs.py). As with a WARC revisit record, the file kept is the earlier one: its
stamp says when those bytes were first made, and this capture's own times are its results'
(``index.json``).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from django.conf import settings

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.registry import find_extractor
from core.folder.manifest import TEMP_PREFIX
from core.folder.stamps import same_but_stamps
from core.models import ArchiveResult, Snapshot

logger = logging.getLogger(__name__)


def snapshot_keep_unchanged_outputs(
    *, snapshot: Snapshot, results: list[ArchiveResult]
) -> list[str]:
    """Replace each output of ``snapshot``'s succeeded ``results`` that its extractor declares
    with a time stamp (``Output.stamp``) by the last sealed capture of the same URL's file,
    when the two differ only in that stamp; return the paths replaced (relative to the
    snapshot folder).

    Nothing is replaced with DEDUPLICATE off. A file that cannot be read or replaced is kept
    as it is (logged): keeping this capture's own file is always right.
    """
    stamped = list(_stamped_outputs(results)) if settings.DEDUPLICATE else []
    # Most snapshots run no stamped extractor: they need not look for an earlier capture.
    earlier = _last_sealed_capture(snapshot) if stamped else None
    if earlier is None:
        return []
    kept = []
    for relative, stamp in stamped:
        ours, theirs = snapshot.output_dir / relative, earlier.output_dir / relative
        try:
            if not (ours.is_file() and theirs.is_file() and same_but_stamps(ours, theirs, stamp)):
                continue
            _replace(ours, with_file=theirs)
        except OSError as error:
            logger.info("snapshot %s: %s kept as written: %s", snapshot.pk, relative, error)
            continue
        kept.append(relative)
    if kept:
        logger.info("snapshot %s: %s as in snapshot %s but for the time stamp",
                    snapshot.pk, ", ".join(kept), earlier.pk)  # fmt: skip
    return kept


def _last_sealed_capture(snapshot: Snapshot) -> Snapshot | None:
    captures = Snapshot.objects.captures_of(snapshot.url).exclude(pk=snapshot.pk)
    return captures.filter(status=SnapshotStatus.SEALED).order_by("-captured_at").first()


def _stamped_outputs(results: list[ArchiveResult]):
    """Yield ``(path relative to the snapshot folder, stamp)`` of each declared output with
    a time stamp of the succeeded ``results``."""
    for result in results:
        extractor = find_extractor(result.extractor)
        if result.status != ResultStatus.SUCCEEDED or extractor is None:
            continue
        for output in extractor.outputs:
            if output.stamp is not None:
                yield f"{result.extractor}/{output.path}", output.stamp


def _replace(target: Path, *, with_file: Path) -> None:
    """Make ``target`` a hard link to (or, where none can be made, a copy of) ``with_file``,
    atomically: a new name beside it, renamed over it."""
    temp = target.with_name(f"{TEMP_PREFIX}earlier-{target.name}")
    temp.unlink(missing_ok=True)
    try:
        try:
            os.link(with_file, temp)
        except OSError:
            shutil.copyfile(with_file, temp)
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
