"""The disk guard (DESIGN.md §3): no new snapshot starts while the data disk is too full.

Snapshots already started still finish (their results are small next to a whole new page), and
the hold lifts by itself as soon as space returns: it is read afresh on every check.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

MEASURE_EVERY_SECONDS = 1.0  # disk_held() is on the claim path: one statvfs a second is plenty
_last_measured: tuple[float, float] | None = None  # (monotonic time, used percent)


@dataclass(frozen=True)
class DiskUsage:
    """How full the disk holding ``path`` is, in percent of the space a user may fill."""

    path: Path
    used_percent: float
    hold_percent: float
    room_bytes: int = 0  # what may still be written before the guard holds (0 once it does)

    @property
    def held(self) -> bool:
        """True while new snapshots must wait (used above DISK_HOLD_PERCENT)."""
        return self.used_percent > self.hold_percent

    def describe(self) -> str:
        """One line for ``status`` and the logs."""
        state = "holding new snapshots" if self.held else "open"
        return (
            f"disk guard {state}: {self.path} is {self.used_percent:.1f}% full "
            f"(limit {self.hold_percent:g}%)"
        )


def disk_usage(path: Path | None = None) -> DiskUsage:
    """Measure the disk holding ``path`` (default DATA_DIR) against DISK_HOLD_PERCENT.

    Used percent is counted as df(1) does: used / (used + available to unprivileged users).
    Raises OSError when the path cannot be examined.
    """
    path = Path(path or settings.DATA_DIR)
    usage = shutil.disk_usage(path)
    fillable = usage.used + usage.free
    used_percent = 100.0 * usage.used / fillable if fillable else 100.0
    hold_percent = settings.DISK_HOLD_PERCENT
    room = int(fillable * hold_percent / 100) - usage.used
    return DiskUsage(path, used_percent, hold_percent, room_bytes=max(room, 0))


def disk_held() -> bool:
    """True while the disk guard holds new snapshots back.

    The disk is measured at most once a second per process; one that cannot be measured
    (OSError) counts as full, with a warning in the log.
    """
    global _last_measured
    now = time.monotonic()
    if _last_measured is None or now - _last_measured[0] >= MEASURE_EVERY_SECONDS:
        try:
            _last_measured = (now, disk_usage().used_percent)
        except OSError as error:
            logger.warning("cannot measure the disk holding %s: %s", settings.DATA_DIR, error)
            _last_measured = (now, math.inf)  # held whatever the limit
    return _last_measured[1] > settings.DISK_HOLD_PERCENT
