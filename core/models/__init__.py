"""Core models: what was archived (snapshots, results, tags) and the proofs that keep it
(storage copies, fixity checks)."""

from core.models.archive import (
    ArchiveResult,
    ArchiveResultQuerySet,
    Snapshot,
    SnapshotQuerySet,
    Tag,
)
from core.models.preservation import FixityCheck, StorageCopy, StorageCopyQuerySet

__all__ = [
    "ArchiveResult",
    "ArchiveResultQuerySet",
    "FixityCheck",
    "Snapshot",
    "SnapshotQuerySet",
    "StorageCopy",
    "StorageCopyQuerySet",
    "Tag",
]
