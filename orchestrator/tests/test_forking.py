"""Warm actors (orchestrator/forking.py): forked children use database connections of their own,
look like ``manage.py actor KIND`` processes, and run a real actor that a signal stops.

The connection tests run on whatever database the suite uses (DATABASE_URL): on PostgreSQL a
connection is told apart by its server process (``pg_backend_pid()``), on SQLite by its handle.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
from django.db import connection

from archive.testing import process_cmdline
from orchestrator.forking import (
    actor_title,
    fork_process,
    set_aside_inherited_connections,
    start_actor,
)
from orchestrator.usage import ACTOR_EXIT, cpu_used
from orchestrator.wakeups import wake_dir

pytestmark = pytest.mark.django_db(transaction=True)

LONG = 60  # seconds: only a child that never comes reaches it


def connection_identity() -> tuple[str, int]:
    """Which connection this process's default alias uses now (opening one if needed)."""
    connection.ensure_connection()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return "backend pid", cursor.fetchone()[0]
    return "handle", id(connection.connection)


def report_to(write_fd: int, *, set_aside: bool = False) -> None:
    """In the child: write what it inherited and which connection it uses, as JSON."""
    inherited_open = connection.connection is not None
    set_aside_count = set_aside_inherited_connections() if set_aside else 0
    kind, identity = connection_identity()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        works = cursor.fetchone() == (1,)
    report = {"inherited_open": inherited_open, "set_aside": set_aside_count, "kind": kind,
              "identity": identity, "works": works}  # fmt: skip
    os.write(write_fd, json.dumps(report).encode())


def read_report(read_fd: int, child) -> dict:
    child.join(timeout=LONG)
    assert child.exitcode == 0
    with os.fdopen(read_fd) as pipe:
        return json.loads(pipe.read())


def test_a_forked_child_opens_a_database_connection_of_its_own() -> None:
    _kind, parent_identity = connection_identity()
    read_fd, write_fd = os.pipe()

    child = fork_process(report_to, write_fd)
    os.close(write_fd)
    report = read_report(read_fd, child)

    assert report["inherited_open"] is False  # the parent closed it before forking
    assert report["works"] is True
    if connection.vendor == "postgresql":
        assert report["identity"] != parent_identity
    assert connection_identity()[0] == report["kind"]  # and the parent opens a new one


def test_a_child_forked_while_the_parent_is_connected_sets_that_connection_aside() -> None:
    """A fork that did not close first (fork_process always does): the child neither uses nor
    closes the parent's connection, which keeps working (on PostgreSQL, closing it in the
    child would end the parent's session on the server)."""
    _kind, parent_identity = connection_identity()
    read_fd, write_fd = os.pipe()

    child = multiprocessing.get_context("fork").Process(
        target=report_to, args=(write_fd,), kwargs={"set_aside": True}
    )
    child.start()
    os.close(write_fd)
    report = read_report(read_fd, child)

    assert report["inherited_open"] is True
    assert report["set_aside"] == 1
    assert report["works"] is True
    assert report["identity"] != parent_identity
    assert connection_identity()[1] == parent_identity  # the parent's own, still open
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_a_forked_actor_runs_as_an_actor_and_drains_on_sigint(settings, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path
    settings.LOGS_DIR = tmp_path / "logs"

    parent_before = cpu_used().own
    actor = start_actor("crawl", idle_exit=LONG)
    try:
        deadline = time.monotonic() + LONG
        while not list(wake_dir().glob(f"crawl.{actor.pid}.*")):  # listening, idle
            assert actor.exitcode is None, (settings.LOGS_DIR / "actors.log").read_text()
            assert time.monotonic() < deadline, "the actor never listened for wake-ups"
            time.sleep(0.01)
        title = " ".join(process_cmdline(actor.pid))

        os.kill(actor.pid, signal.SIGINT)
        actor.join(timeout=LONG)
    finally:
        if actor.exitcode is None:
            actor.kill()
            actor.join()

    assert title == actor_title("crawl")
    assert title.split()[-3:] == [str(settings.BASE_DIR / "manage.py"), "actor", "crawl"]
    assert actor.exitcode == 0  # drained: a clean exit, not death by the signal
    log = (settings.LOGS_DIR / "actors.log").read_text()
    assert f"actor crawl started (pid {actor.pid})" in log
    # As it exits, the actor says what CPU it used, and its commands (it ran none): its own
    # since the fork, not counting the test process's before it (seconds: Django, the tests).
    (used,) = [line for line in ACTOR_EXIT.finditer(log) if line["pid"] == str(actor.pid)]
    assert (used["kind"], used["records"], used["commands"]) == ("crawl", "0", "0.00")
    assert float(used["own"]) < parent_before
    assert not list(wake_dir().glob(f"crawl.{actor.pid}.*"))  # its FIFO went with it


def test_sigint_while_a_forked_child_starts_ends_it_by_the_signal() -> None:
    """SIGINT and SIGTERM are blocked across the fork and the child takes their default
    action: one sent at once ends it, never the parent's handler (the test process's)."""
    child = fork_process(time.sleep, LONG)
    os.kill(child.pid, signal.SIGINT)
    child.join(timeout=LONG)

    assert child.exitcode == -signal.SIGINT
