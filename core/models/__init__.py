"""Core models: what was archived (snapshots, results, tags) and the proofs that keep it
(storage copies, fixity checks), and the API tokens that reach them."""

from core.models.hosts import Host, HostQuerySet
from core.models.payloads import PayloadRecord, PayloadRevisit
from core.models.preservation import FixityCheck, StorageCopy, StorageCopyQuerySet
from core.models.results import ArchiveResult, ArchiveResultQuerySet
from core.models.search import SnapshotText
from core.models.snapshots import Snapshot, SnapshotQuerySet, Tag
from core.models.tokens import ApiToken

__all__ = [
    "ApiToken",
    "ArchiveResult",
    "ArchiveResultQuerySet",
    "FixityCheck",
    "Host",
    "HostQuerySet",
    "PayloadRecord",
    "PayloadRevisit",
    "Snapshot",
    "SnapshotQuerySet",
    "SnapshotText",
    "StorageCopy",
    "StorageCopyQuerySet",
    "Tag",
]
