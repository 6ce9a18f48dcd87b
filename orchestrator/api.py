"""REST endpoints for the whole archive's state (archive/api.py mounts them at ``/api/v1/``):
counts per state, the disk guard, and the queue's hold."""

# No ``from __future__ import annotations``: django-ninja reads these annotations at run time
# (through its pagination decorator, where postponed ones cannot be resolved).

from datetime import datetime

from ninja import Router, Schema

from core.web.permissions import staff
from orchestrator.diskguard import disk_usage
from orchestrator.models import QueueState, QueueStatus
from orchestrator.services import queue_hold, queue_release
from orchestrator.status import status_counts

router = Router()


class QueueOut(Schema):
    held: bool
    reason: str
    held_since: datetime | None

    @staticmethod
    def resolve_held(state: QueueState) -> bool:
        return state.status == QueueStatus.HELD


class DiskGuardOut(Schema):
    path: str
    used_percent: float
    hold_percent: float
    held: bool


class StatusOut(Schema):
    queue: QueueOut
    disk_guard: DiskGuardOut
    counts: dict[str, dict[str, int]]


class QueueHoldIn(Schema):
    reason: str = ""


@router.get(
    "/status",
    response=StatusOut,
    summary="Counts per state, disk guard, queue",
    auth=staff(QueueState, "view"),
)
def status(request):
    disk = disk_usage()
    return {
        "queue": QueueState.current(),
        "disk_guard": {
            "path": str(disk.path),
            "used_percent": round(disk.used_percent, 1),
            "hold_percent": disk.hold_percent,
            "held": disk.held,
        },
        "counts": status_counts(),
    }


@router.post(
    "/queue/hold",
    response=QueueOut,
    summary="Hold the whole queue",
    auth=staff(QueueState, "change"),
)
def hold_queue(request, body: QueueHoldIn | None = None):
    return queue_hold(reason=(body.reason if body else "")[:200])


@router.post(
    "/queue/release",
    response=QueueOut,
    summary="Release the whole queue",
    auth=staff(QueueState, "change"),
)
def release_queue(request):
    return queue_release()
