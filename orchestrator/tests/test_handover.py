"""Waiting for the orchestrator that stays (orchestrator/handover.py), in process: a
Listener("all") of this test stands for that orchestrator, and a thread ends the crawl, stops
the orchestrator or sends a signal once the wait has begun (the first ``done()`` says so).

No test measures time: each waits for the event it names (at most LONG seconds). The end-to-end
cases (``add --wait`` beside a real ``manage.py orchestrator``) are in
orchestrator/tests/test_orchestrator.py.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from django.db import DatabaseError

from orchestrator import handover
from orchestrator.handover import WaitEnd, staying_orchestrator, wait_for_staying_orchestrator
from orchestrator.wakeups import FINAL, Listener, ping, wake_dir

LONG = 60  # seconds: only a missing wake-up ever waits that long


@pytest.fixture(autouse=True)
def own_wake_folder(settings, tmp_path: Path) -> None:
    """A DATA_DIR of this test's own, so that no other listener is seen or pinged."""
    settings.DATA_DIR = tmp_path


class Crawl:
    """A crawl for ``done()``: it ends when ``end()`` is called, and ``waiting`` is set by the
    first check (the waiter's FIFO exists by then)."""

    def __init__(self) -> None:
        self.waiting = threading.Event()
        self.ended = threading.Event()
        self.checks = 0

    def done(self) -> bool:
        self.checks += 1
        ended = self.ended.is_set()  # read first: an end that comes next is seen next time
        self.waiting.set()
        return ended

    def once_waiting(self, action) -> threading.Thread:
        """Run ``action`` in another thread once the wait has begun."""

        def run() -> None:
            assert self.waiting.wait(LONG)
            action()

        thread = threading.Thread(target=run)
        thread.start()
        return thread


def test_no_orchestrator_staying_is_said_at_once() -> None:
    with Listener("passing"):  # add --wait's own: it ends with its own crawl
        assert staying_orchestrator() is None
        assert wait_for_staying_orchestrator(lambda: False) is WaitEnd.ORCHESTRATOR_STOPPED


def test_a_crawl_that_ends_in_the_staying_orchestrator_ends_the_wait(monkeypatch) -> None:
    monkeypatch.setattr(handover, "HANDOVER_POLL_SECONDS", LONG)  # only the ping can end it
    crawl, woken = Crawl(), []

    def end_the_crawl() -> None:
        crawl.ended.set()
        ping(FINAL, "crawl")

    with Listener("all"):
        assert staying_orchestrator() == os.getpid()
        thread = crawl.once_waiting(end_the_crawl)

        end = wait_for_staying_orchestrator(crawl.done, lambda: woken.append(1))

    thread.join()
    assert end is WaitEnd.DONE
    assert woken == [1]  # woken once, by the final ping
    assert list(wake_dir().iterdir()) == []  # the waiter's FIFO went with it


def test_an_orchestrator_that_stops_before_the_crawl_ends_ends_the_wait() -> None:
    crawl, orchestrator = Crawl(), Listener("all")
    thread = crawl.once_waiting(orchestrator.close)

    end = wait_for_staying_orchestrator(crawl.done)

    thread.join()
    assert end is WaitEnd.ORCHESTRATOR_STOPPED
    assert crawl.checks >= 2  # it waited: the orchestrator was there at the first check


def test_a_crawl_the_orchestrator_ended_as_it_stopped_counts_as_ended() -> None:
    orchestrator = Listener("all")
    checks = []

    def done() -> bool:
        checks.append(1)
        if len(checks) == 1:
            orchestrator.close()  # it ends the crawl and stops between this check and the next
            return False
        return True

    assert wait_for_staying_orchestrator(done) is WaitEnd.DONE
    assert len(checks) == 2


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_wait_and_its_handler_is_put_back(monkeypatch, signum: int) -> None:
    monkeypatch.setattr(handover, "HANDOVER_POLL_SECONDS", LONG)  # only the signal can end it
    before = signal.getsignal(signum)
    crawl = Crawl()

    with Listener("all"):
        thread = crawl.once_waiting(lambda: os.kill(os.getpid(), signum))

        end = wait_for_staying_orchestrator(crawl.done)

    thread.join()
    assert end is WaitEnd.INTERRUPTED
    assert signal.getsignal(signum) is before


@pytest.mark.django_db  # the wait closes the broken connection
def test_a_database_error_while_waiting_is_tried_again() -> None:
    answers = iter([DatabaseError("database is locked"), False, True])

    def done() -> bool:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with Listener("all"):
        assert wait_for_staying_orchestrator(done) is WaitEnd.DONE


def test_a_folder_that_cannot_hold_the_fifo_is_said(settings, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path / "not-a-folder"
    settings.DATA_DIR.write_text("a file where DATA_DIR should be")

    with pytest.raises(handover.CannotWait):
        wait_for_staying_orchestrator(lambda: False)
