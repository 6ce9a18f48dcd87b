"""A log of claims and releases, and a check that no record was ever held by two actors at once.

With CLAIMS_LOG on (the test suite turns it on; it grows by some 3 KB per archived page, so it is
off by default), actors append one JSON object per line to ``DATA_DIR/logs/claims.jsonl``::

    {"event": "claim", "kind": "archiveresult", "pk": "17", "pid": 4242,
     "at": "2025-05-01T10:00:00.123456+00:00", "until": "2025-05-01T10:01:30.123456+00:00"}
    {"event": "release", "kind": "archiveresult", "pk": "17", "pid": 4242, "at": "..."}

``until`` is the end of the claim's lease. Whoever kills an actor may add
``{"event": "exit", "pid": 4242, "at": "..."}`` once it is dead: a process holds nothing after
its death. Times are ISO 8601 in UTC. Each line is a single ``write()`` to a file opened with
``O_APPEND``, so the lines of concurrent processes never interleave.

A claim holds its record from its ``at`` until the same pid releases it; without a release (a
SIGKILLed actor never writes one), until that pid's exit, else until ``until``: the lease, after
which another actor may rightly claim the record (DESIGN.md §3). ``find_double_claims`` reports
every record held by two pids at once.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

LOG_NAME = "claims.jsonl"
FIELDS = {
    "claim": {"kind", "pk", "pid", "at", "until"},
    "release": {"kind", "pk", "pid", "at"},
    "exit": {"pid", "at"},
}


def log_path() -> Path:
    """Return the claims log of this installation: ``DATA_DIR/logs/claims.jsonl``."""
    return settings.LOGS_DIR / LOG_NAME


# --- writing -------------------------------------------------------------------------------------


def append_event(event: dict, path: Path | None = None) -> None:
    """Append ``event`` as one JSON line to ``path`` (default: ``log_path()``) in one write().

    Raises OSError when the file cannot be written.
    """
    path = path or log_path()
    data = (json.dumps(event, sort_keys=True) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def log_claim(kind: str, pk: object, *, until: datetime) -> datetime:
    """Record that this process claimed ``kind`` ``pk`` with a lease ending ``until``.

    Return the claim's time. The claims log is a diagnostic: a failure to write it is logged as a
    warning and never stops the actor.
    """
    at = datetime.now(UTC)
    _append_quietly(
        {
            "event": "claim",
            "kind": kind,
            "pk": str(pk),
            "pid": os.getpid(),
            "at": at.isoformat(),
            "until": until.astimezone(UTC).isoformat(),
        }
    )
    return at


def log_release(kind: str, pk: object, *, at: datetime | None = None) -> None:
    """Record that this process no longer holds ``kind`` ``pk``, since ``at`` (default: now)."""
    at = at or datetime.now(UTC)
    _append_quietly(
        {
            "event": "release",
            "kind": kind,
            "pk": str(pk),
            "pid": os.getpid(),
            "at": at.astimezone(UTC).isoformat(),
        }
    )


def log_exit(pid: int, *, at: datetime | None = None, path: Path | None = None) -> None:
    """Record that process ``pid`` has ended (call it once the process is surely dead).

    Raises OSError when the file cannot be written.
    """
    at = at or datetime.now(UTC)
    append_event({"event": "exit", "pid": pid, "at": at.astimezone(UTC).isoformat()}, path)


def _append_quietly(event: dict) -> None:
    if not settings.CLAIMS_LOG:
        return
    try:
        append_event(event)
    except OSError as error:
        logger.warning("could not write the claims log: %s", error)


# --- checking ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """One claim as an interval: ``pid`` held ``kind`` ``pk`` from ``start`` to ``end``.

    ``ended_by`` says what ended it: "release", "exit" or "lease"; ``until`` is its lease's end.
    """

    kind: str
    pk: str
    pid: int
    start: datetime
    end: datetime
    ended_by: str
    until: datetime


@dataclass(frozen=True)
class DoubleClaim:
    """Two holds of the same record by different pids that overlap in time."""

    first: Hold
    second: Hold

    def __str__(self) -> str:
        a, b = self.first, self.second
        return (
            f"{a.kind} {a.pk}: pid {a.pid} held it {a.start.isoformat()} to {a.end.isoformat()} "
            f"({a.ended_by}), pid {b.pid} claimed it at {b.start.isoformat()}"
        )


def read_events(path: Path) -> list[dict]:
    """Return the events of the claims log at ``path``, in file order ([] if there is none).

    Raises ValueError naming the line when a line is not an event with the fields of its kind.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    events = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        wanted = FIELDS.get(event.get("event")) if isinstance(event, dict) else None
        if wanted is None or not wanted <= event.keys():
            raise ValueError(f"{path}:{number}: not a claims log event: {line[:200]!r}")
        events.append(event)
    return events


def read_holds(path: Path) -> list[Hold]:
    """Turn the claims log at ``path`` into holds, one per claim, in the order of the claims.

    A release or an exit ends the pid's open claim(s) that began before it; a claim that nothing
    ended lasts until its lease ran out. Raises ValueError for a malformed line.
    """
    claims: list[tuple[dict, datetime, datetime]] = []  # (event, start, lease end)
    ends: list[tuple[datetime, str] | None] = []  # parallel to ``claims``; None while open
    open_by_pid: dict[int, list[int]] = {}  # pid -> indexes of its open claims
    for event in read_events(path):
        pid = int(event["pid"])
        at = _parse_time(event["at"])
        if event["event"] == "claim":
            open_by_pid.setdefault(pid, []).append(len(claims))
            claims.append((event, at, _parse_time(event["until"])))
            ends.append(None)
        elif event["event"] == "release":
            record = (event["kind"], str(event["pk"]))
            for index in open_by_pid.get(pid, []):
                if (claims[index][0]["kind"], claims[index][0]["pk"]) == record:
                    ends[index] = (at, "release")
                    open_by_pid[pid].remove(index)
                    break
        elif event["event"] == "exit":
            for index in open_by_pid.pop(pid, []):
                ends[index] = (at, "exit")
    holds = []
    for (claim, start, until), end in zip(claims, ends, strict=True):
        moment, ended_by = end or (until, "lease")
        holds.append(
            Hold(
                claim["kind"],
                str(claim["pk"]),
                int(claim["pid"]),
                start,
                max(moment, start),
                ended_by,
                until,
            )
        )
    return holds


def find_double_claims(path: Path) -> list[DoubleClaim]:
    """Return every pair of holds in the claims log at ``path`` where two pids held one record
    at the same time ([] when no record was ever claimed twice at once).

    Intervals are half-open: a claim at the very moment the previous one ended is no overlap.
    Raises ValueError for a malformed line.
    """
    by_record: dict[tuple[str, str], list[Hold]] = {}
    for hold in read_holds(path):
        by_record.setdefault((hold.kind, hold.pk), []).append(hold)
    doubles = []
    for holds in by_record.values():
        holds.sort(key=lambda hold: hold.start)
        for i, first in enumerate(holds):
            for second in holds[i + 1 :]:
                if second.start >= first.end:
                    break
                if second.pid != first.pid:
                    doubles.append(DoubleClaim(first, second))
    return doubles


def _parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"time without a zone in the claims log: {text!r}")
    return moment.astimezone(UTC)
