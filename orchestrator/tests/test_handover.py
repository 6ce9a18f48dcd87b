"""Waiting in the orchestrator already running (orchestrator/handover.py), in process: a
Listener("all") of this test stands for that orchestrator, and threads end the crawl or stop it.

No test measures time: each waits for the event it names, and a wait that never ends fails the
test at pytest-timeout's limit; the slow end-to-end cases (``add --wait`` beside a real
``manage.py orchestrator``) are in orchestrator/tests/test_orchestrator.py.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from orchestrator import handover
from orchestrator.handover import running_orchestrator, wait_in_running_orchestrator
from orchestrator.wakeups import FINAL, Listener, ping


@pytest.fixture(autouse=True)
def own_wake_folder(settings, tmp_path: Path) -> None:
    """A DATA_DIR of this test's own, so that no other listener is seen or pinged."""
    settings.DATA_DIR = tmp_path


def soon(action) -> threading.Thread:
    """Run ``action`` in another thread once the waiter has had time to wait."""
    thread = threading.Timer(0.3, action)
    thread.start()
    return thread


def test_no_orchestrator_running_is_said_at_once() -> None:
    assert running_orchestrator() is None
    assert wait_in_running_orchestrator(lambda: False) is False


def test_a_crawl_that_ends_in_the_running_orchestrator_ends_the_wait(monkeypatch) -> None:
    monkeypatch.setattr(handover, "HANDOVER_POLL_SECONDS", 60)  # only the ping can end it
    ended = threading.Event()
    waits = []

    def end_the_crawl() -> None:
        ended.set()
        ping(FINAL, "crawl")

    with Listener("all"):
        assert running_orchestrator() == os.getpid()
        thread = soon(end_the_crawl)

        assert wait_in_running_orchestrator(ended.is_set, lambda: waits.append(1)) is True

    thread.join()
    assert waits == [1]  # woken once, by the final ping


def test_an_orchestrator_that_stops_before_the_crawl_ends_ends_the_wait() -> None:
    orchestrator = Listener("all")
    thread = soon(orchestrator.close)

    assert wait_in_running_orchestrator(lambda: False) is False

    thread.join()


def test_a_crawl_the_orchestrator_ended_as_it_stopped_counts_as_ended() -> None:
    orchestrator = Listener("all")
    checks = []

    def done() -> bool:
        checks.append(1)
        if len(checks) == 1:
            orchestrator.close()  # it ends the crawl and stops between this check and the next
            return False
        return True

    assert wait_in_running_orchestrator(done) is True
    assert len(checks) == 2
