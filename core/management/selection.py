"""Choosing snapshots from command-line arguments: ids checked, readable errors."""

from __future__ import annotations

import uuid

from django.core.management.base import CommandError

from core.choices import SnapshotStatus
from core.models import Snapshot
from crawls.models import Crawl


def parse_snapshot_ids(values: list[str]) -> list[uuid.UUID]:
    """Return ``values`` as snapshot ids; raise CommandError naming the first that is not one."""
    ids = []
    for value in values:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            raise CommandError(f"{value!r} is not a snapshot id (a UUID)") from None
    return ids


def known_snapshot_ids(values: list[str]) -> list[uuid.UUID]:
    """Return ``values`` as the ids of existing snapshots; raise CommandError naming the first
    that is no snapshot id or no snapshot's (a mistyped id is an error, not "nothing to do")."""
    ids = parse_snapshot_ids(values)
    found = set(Snapshot.objects.filter(pk__in=ids).values_list("pk", flat=True))
    for pk in ids:
        if pk not in found:
            raise CommandError(f"no snapshot {pk}")
    return ids


def require_crawl(crawl_id: int) -> None:
    """Raise CommandError when there is no crawl ``crawl_id``."""
    if not Crawl.objects.filter(pk=crawl_id).exists():
        raise CommandError(f"no crawl {crawl_id}")


def sealed_snapshots(values: list[str]) -> list[Snapshot]:
    """Return the snapshots named by ``values``, in that order.

    Raises CommandError for an id that is malformed, unknown, or of a snapshot not sealed (only
    sealed snapshots have a signed manifest to check against).
    """
    ids = parse_snapshot_ids(values)
    found = {snapshot.pk: snapshot for snapshot in Snapshot.objects.filter(pk__in=ids)}
    for pk in ids:
        if pk not in found:
            raise CommandError(f"no snapshot {pk}")
        if found[pk].status != SnapshotStatus.SEALED:
            raise CommandError(
                f"snapshot {pk} is {found[pk].status}: only sealed snapshots are signed"
            )
    return [found[pk] for pk in ids]
