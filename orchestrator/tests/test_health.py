"""The orchestrator's health check: which actor exits count as crashes (Orchestrator.reap)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from multiprocessing.process import BaseProcess

import pytest
from django.conf import settings

from orchestrator.forking import fork_process
from orchestrator.orchestrator import Orchestrator


def exited_actor(sig: int) -> BaseProcess:
    """A stand-in actor process, forked as the orchestrator forks actors, killed by ``sig``
    and waited for."""
    process = fork_process(time.sleep, 30)
    os.kill(process.pid, sig)
    process.join(timeout=10)
    return process


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_an_actor_that_dies_while_the_orchestrator_runs_is_a_crash(sig: int) -> None:
    orchestrator = Orchestrator()
    orchestrator.actors["archiveresult"].append(exited_actor(sig))

    orchestrator.reap()

    assert orchestrator.crashed == 1
    assert orchestrator.actors["archiveresult"] == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_actor_stopped_by_the_signal_of_a_shutdown_is_no_crash(sig: int) -> None:
    """An actor still starting up has no handler yet, and dies of the INT or TERM sent to it."""
    orchestrator = Orchestrator()
    orchestrator.shutting_down = True
    orchestrator.actors["snapshot"].append(exited_actor(sig))

    orchestrator.reap()

    assert orchestrator.crashed == 0
    assert orchestrator.actors["snapshot"] == []


def test_an_actor_killed_during_a_shutdown_is_still_a_crash() -> None:
    orchestrator = Orchestrator()
    orchestrator.shutting_down = True
    orchestrator.actors["crawl"].append(exited_actor(signal.SIGKILL))

    orchestrator.reap()

    assert orchestrator.crashed == 1


def test_a_real_actor_asked_to_drain_while_starting_up_ends_by_the_signal(tmp_path) -> None:
    """Before its handlers are set (Django is still loading), SIGINT ends an actor by the signal,
    which the health check reads as a stop: no KeyboardInterrupt traceback in actors.log."""
    actor = subprocess.Popen(
        [sys.executable, str(settings.BASE_DIR / "manage.py"), "actor", "archiveresult"],
        env={**os.environ, "DATA_DIR": str(tmp_path)},
        stderr=subprocess.PIPE,
        cwd=settings.BASE_DIR,
    )
    time.sleep(0.1)  # importing Django alone takes several times longer
    actor.send_signal(signal.SIGINT)
    _, errors = actor.communicate(timeout=30)

    assert actor.returncode == -signal.SIGINT
    assert b"Traceback" not in errors
