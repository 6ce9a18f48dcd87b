"""The claims log (orchestrator/claimlog.py): writing it, reading it back, finding double claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from model_bakery import baker

from crawls.models import Crawl
from orchestrator import claimlog
from orchestrator.actor import Actor
from orchestrator.claimlog import append_event, find_double_claims, log_exit, read_holds
from orchestrator.work import WorkType

T0 = datetime(2025, 5, 1, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def claim(path: Path, pid: int, start: float, until: float, pk="7", kind="archiveresult") -> None:
    event = {"event": "claim", "kind": kind, "pk": pk, "pid": pid, "at": at(start)}
    append_event({**event, "until": at(until)}, path)


def release(path: Path, pid: int, when: float, pk="7", kind="archiveresult") -> None:
    append_event({"event": "release", "kind": kind, "pk": pk, "pid": pid, "at": at(when)}, path)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "claims.jsonl"


# --- finding double claims -----------------------------------------------------------------------


def test_a_claim_while_another_pid_holds_the_record_is_a_double_claim(log: Path) -> None:
    claim(log, 100, start=0, until=90)
    claim(log, 200, start=5, until=95)
    release(log, 100, when=10)
    release(log, 200, when=12)

    (double,) = find_double_claims(log)

    assert (double.first.pid, double.second.pid) == (100, 200)
    assert (double.first.kind, double.first.pk) == ("archiveresult", "7")
    assert double.first.end == T0 + timedelta(seconds=10)
    assert double.first.ended_by == "release"
    assert "archiveresult 7: pid 100 held it" in str(double)


def test_claims_one_after_another_are_no_double_claim(log: Path) -> None:
    claim(log, 100, start=0, until=90)
    release(log, 100, when=10)
    claim(log, 200, start=10, until=100)  # the very moment it was released: half-open intervals
    release(log, 200, when=12)
    claim(log, 100, start=20, until=110)
    release(log, 100, when=21)

    assert find_double_claims(log) == []
    assert [hold.ended_by for hold in read_holds(log)] == ["release"] * 3


def test_different_records_and_kinds_never_overlap(log: Path) -> None:
    claim(log, 100, start=0, until=90, pk="7")
    claim(log, 200, start=1, until=90, pk="8")
    claim(log, 300, start=2, until=90, pk="7", kind="snapshot")

    assert find_double_claims(log) == []


def test_a_killed_claim_ends_when_its_lease_runs_out(log: Path) -> None:
    """The first pid never releases (SIGKILL): it holds the record until its ``until``."""
    claim(log, 100, start=0, until=30)
    claim(log, 200, start=30, until=60)  # recovered once the lease ran out
    release(log, 200, when=31)

    assert find_double_claims(log) == []
    first, second = read_holds(log)
    assert (first.end, first.ended_by) == (T0 + timedelta(seconds=30), "lease")
    assert second.ended_by == "release"


def test_a_claim_before_a_killed_claims_lease_ran_out_is_a_double_claim(log: Path) -> None:
    claim(log, 100, start=0, until=30)
    claim(log, 200, start=29.5, until=60)
    release(log, 200, when=31)

    (double,) = find_double_claims(log)

    assert double.first.ended_by == "lease"
    assert double.second.pid == 200


def test_an_exit_ends_the_claims_of_a_dead_process(log: Path) -> None:
    claim(log, 100, start=0, until=30)
    claim(log, 100, start=0, until=30, pk="8", kind="snapshot")  # an unreleased older claim too
    log_exit(100, at=T0 + timedelta(seconds=3), path=log)
    claim(log, 200, start=4, until=60)
    release(log, 200, when=5)

    assert find_double_claims(log) == []
    assert [(hold.pid, hold.ended_by) for hold in read_holds(log)] == [
        (100, "exit"),
        (100, "exit"),
        (200, "release"),
    ]


def test_a_claim_before_the_holder_died_is_a_double_claim(log: Path) -> None:
    claim(log, 100, start=0, until=30)
    claim(log, 200, start=2, until=60)
    log_exit(100, at=T0 + timedelta(seconds=3), path=log)

    (double,) = find_double_claims(log)

    assert (double.first.ended_by, double.first.end) == ("exit", T0 + timedelta(seconds=3))


def test_an_exit_does_not_end_a_later_process_with_the_same_pid(log: Path) -> None:
    claim(log, 100, start=0, until=30)
    log_exit(100, at=T0 + timedelta(seconds=1), path=log)
    claim(log, 100, start=40, until=70)  # pid reused by a new actor, which is then killed
    claim(log, 200, start=50, until=80)

    (double,) = find_double_claims(log)

    assert (double.first.start, double.first.ended_by) == (T0 + timedelta(seconds=40), "lease")


def test_a_release_ends_only_the_claim_of_the_same_record(log: Path) -> None:
    claim(log, 100, start=0, until=30, pk="7")
    release(log, 100, when=1, pk="8")  # not the record it holds
    claim(log, 200, start=2, until=60, pk="7")

    assert len(find_double_claims(log)) == 1


def test_no_log_means_no_claims(log: Path) -> None:
    assert find_double_claims(log) == []


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        '{"event": "release", "kind": "crawl", "pk": "1", "pid": 1, "at": "2025-05-01T10',
        '{"event": "claim", "kind": "crawl", "pk": "1", "pid": 1, "at": "2025-05-01T10:00:00Z"}',
        '{"event": "shrug", "pid": 1, "at": "2025-05-01T10:00:00+00:00"}',
        "[1, 2]",
    ],
    ids=["text", "torn", "no-until", "unknown-event", "not-an-object"],
)
def test_a_malformed_line_is_reported_with_its_number(log: Path, line: str) -> None:
    claim(log, 100, start=0, until=30)
    with open(log, "a") as handle:
        handle.write(line + "\n")

    with pytest.raises(ValueError, match=r"claims\.jsonl:2: not a claims log event"):
        find_double_claims(log)


def test_a_time_without_a_zone_is_refused(log: Path) -> None:
    append_event(
        {"event": "exit", "pid": 1, "at": "2025-05-01T10:00:00"},
        log,
    )

    with pytest.raises(ValueError, match="without a zone"):
        read_holds(log)


# --- writing -------------------------------------------------------------------------------------

WRITER = """
import sys
from pathlib import Path
from orchestrator.claimlog import append_event
path, name = Path(sys.argv[1]), sys.argv[2]
for i in range(int(sys.argv[3])):
    append_event({"event": "exit", "pid": i, "at": "2025-05-01T10:00:00+00:00",
                  "writer": name, "padding": "x" * (i % 300)}, path)
"""


def test_lines_of_concurrent_writers_never_interleave(log: Path) -> None:
    writers, lines = 4, 1500
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(log), f"w{n}", str(lines)],
            cwd=settings.BASE_DIR,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    for process in processes:
        _out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err

    events = claimlog.read_events(log)  # raises on any torn or mixed line

    assert len(events) == writers * lines
    for n in range(writers):
        mine = [e["pid"] for e in events if e["writer"] == f"w{n}"]
        assert mine == list(range(lines))  # each writer's lines whole and in its own order


def test_log_claim_and_release_write_one_line_each(settings, tmp_path: Path) -> None:
    settings.LOGS_DIR = tmp_path / "logs"  # created on first write
    until = timezone.now() + timedelta(seconds=90)

    claimed_at = claimlog.log_claim("snapshot", "0c5e", until=until)
    claimlog.log_release("snapshot", "0c5e")

    lines = (tmp_path / "logs" / "claims.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "event": "claim",
            "kind": "snapshot",
            "pk": "0c5e",
            "pid": os.getpid(),
            "at": claimed_at.isoformat(),
            "until": until.isoformat(),
        },
        {
            "event": "release",
            "kind": "snapshot",
            "pk": "0c5e",
            "pid": os.getpid(),
            "at": json.loads(lines[1])["at"],
        },
    ]
    (hold,) = read_holds(tmp_path / "logs" / "claims.jsonl")
    assert claimed_at <= hold.end <= datetime.now(UTC)


def test_with_claims_log_off_nothing_is_written(settings, tmp_path: Path) -> None:
    settings.LOGS_DIR = tmp_path / "logs"
    settings.CLAIMS_LOG = False

    claimlog.log_claim("snapshot", "0c5e", until=timezone.now() + timedelta(seconds=90))
    claimlog.log_release("snapshot", "0c5e")

    assert not (tmp_path / "logs" / "claims.jsonl").exists()


def test_an_unwritable_claims_log_does_not_stop_the_actor(settings, tmp_path: Path, caplog) -> None:
    (tmp_path / "logs").write_text("a file where the folder should be")
    settings.LOGS_DIR = tmp_path / "logs"

    claimlog.log_claim("crawl", 1, until=timezone.now())

    assert "could not write the claims log" in caplog.text


# --- the actor writes it -------------------------------------------------------------------------


def crawl_kind(tick) -> WorkType:
    return WorkType("crawl", Crawl, tick, lambda _record: 90.0, "ACTORS_CRAWL")


def poll_later(crawl: Crawl) -> None:
    """Like a crawl waiting for its snapshots: move retry_at off the lease, then keep busy."""
    crawl.retry_at = timezone.now() + timedelta(seconds=5)
    crawl.save(update_fields=["retry_at", "modified_at"])
    time.sleep(0.3)  # what the actor does after the save must not count as holding the record


def crash(crawl: Crawl) -> None:
    time.sleep(0.1)
    raise RuntimeError("boom")


@pytest.mark.django_db
def test_the_actor_dates_a_release_at_the_save_that_gave_the_record_back(
    settings, tmp_path: Path
) -> None:
    settings.LOGS_DIR = tmp_path
    crawl = baker.make(Crawl, retry_at=timezone.now() - timedelta(seconds=1))
    actor = Actor(crawl_kind(poll_later), idle_exit=0)

    assert actor.tick() is True
    returned = datetime.now(UTC)

    crawl.refresh_from_db()
    (hold,) = read_holds(tmp_path / "claims.jsonl")
    assert (hold.kind, hold.pk, hold.pid) == ("crawl", str(crawl.pk), os.getpid())
    assert hold.ended_by == "release"
    assert hold.end == crawl.modified_at  # the save, not the moment tick() returned
    assert returned - hold.end >= timedelta(seconds=0.3)
    until = datetime.fromisoformat(claimlog.read_events(tmp_path / "claims.jsonl")[0]["until"])
    assert timedelta(seconds=85) < until - hold.start <= timedelta(seconds=90)  # the lease


@pytest.mark.django_db
def test_the_actor_releases_a_record_whose_tick_failed_when_it_gives_up(
    settings, tmp_path: Path
) -> None:
    settings.LOGS_DIR = tmp_path
    baker.make(Crawl, retry_at=timezone.now() - timedelta(seconds=1))
    actor = Actor(crawl_kind(crash), idle_exit=0)

    assert actor.tick() is True

    (hold,) = read_holds(tmp_path / "claims.jsonl")
    assert hold.ended_by == "release"
    assert hold.end - hold.start >= timedelta(seconds=0.1)  # held through the failing tick
    until = datetime.fromisoformat(claimlog.read_events(tmp_path / "claims.jsonl")[0]["until"])
    assert timedelta(seconds=85) < until - hold.start <= timedelta(seconds=90)


@pytest.mark.django_db
def test_an_actor_with_nothing_due_writes_nothing(settings, tmp_path: Path) -> None:
    settings.LOGS_DIR = tmp_path
    baker.make(Crawl, retry_at=timezone.now() + timedelta(seconds=60))

    assert Actor(crawl_kind(crash), idle_exit=0).tick() is False
    assert not (tmp_path / "claims.jsonl").exists()
