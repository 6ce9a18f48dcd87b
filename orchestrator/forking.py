"""Start actors warm: forked from the orchestrator, which has set Django up already (issue 19).

A new ``manage.py actor`` process spends most of a second importing Vellum and setting Django up
before it claims anything; a child forked from the orchestrator starts where its parent is, in a
few milliseconds. It stays a process of its own, which the orchestrator watches (its exit code,
its sentinel), signals and, if it dies, replaces; what it held is recovered through its lease as
before (DESIGN.md §3).

Forking a process that talks to a database asks for care, and this module takes it:

- database connections are never shared: the parent closes its own before each fork, and a child
  that still finds one open (a caller that forked otherwise) sets it aside unused and unclosed (on
  PostgreSQL closing it would end the parent's session on the server, on SQLite a handle must not
  cross a fork), then opens its own;
- the child takes the signal handlers, logs, standard streams and process title of an actor, and
  closes the wake-up FIFOs it inherited (orchestrator/wakeups.py);
- the orchestrator starts no browser, so no Chromium or Playwright thread is ever forked: each
  actor starts its own, as before.

``manage.py actor KIND`` still runs an actor in a process of its own.
"""

from __future__ import annotations

import gc
import multiprocessing
import signal
import sys
from collections.abc import Callable
from multiprocessing.process import BaseProcess

from django.conf import settings
from django.db import connections
from setproctitle import setproctitle

from orchestrator.actor import Actor
from orchestrator.logs import log_forked_child_to_file
from orchestrator.work import work_types

_FORK = multiprocessing.get_context("fork")
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
# Connections a child found open, kept referenced so that nothing ever closes them in the child.
_set_aside: list[object] = []


def start_actor(kind: str, *, idle_exit: float | None = None) -> BaseProcess:
    """Fork an actor of ``kind`` (``crawl``, ``snapshot``, ``archiveresult``, ``storagecopy``)
    that exits after ``idle_exit`` seconds without work (default ACTOR_IDLE_EXIT); return its
    process once started (see ``fork_process``)."""
    idle_exit = settings.ACTOR_IDLE_EXIT if idle_exit is None else idle_exit
    return fork_process(run_forked_actor, kind, idle_exit, name=f"{kind} actor")


def fork_process(target: Callable[..., object], *args, name: str | None = None) -> BaseProcess:
    """Fork a child that calls ``target(*args)`` and exits (0, 1 on an exception, -N when
    killed by signal N); return its process (``pid``, ``exitcode``, ``sentinel``, ``join()``).

    This process's database connections are closed first (its next query opens a new one), and
    the objects it holds are frozen (``gc.freeze()``: never collected, see the comment).
    SIGINT and SIGTERM are blocked across the fork: the child starts with the default action
    for both, so that one sent while it is still starting up ends it by the signal rather than
    running the parent's handlers in it. Raises OSError when the fork fails.
    """
    connections.close_all()
    # What the parent holds now is shared with the child page by page until either writes to
    # it; a collection in the child would write to every object it walks. Frozen objects are
    # walked by none (the gc module's advice for processes that fork without exec).
    gc.freeze()
    process = _FORK.Process(target=_child, args=(target, *args), name=name)
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return process


def _child(target: Callable[..., object], *args) -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    target(*args)


def run_forked_actor(kind: str, idle_exit: float) -> None:
    """The forked child's life: become an actor of ``kind`` and run it until idle for
    ``idle_exit`` seconds, drained or stopped (orchestrator/actor.py)."""
    setproctitle(actor_title(kind))
    set_aside_inherited_connections()
    log_forked_child_to_file("actors.log")
    Actor(work_types()[kind], idle_exit=idle_exit).run()


def actor_title(kind: str) -> str:
    """The process title of a forked actor: the command line it would have had as a process of
    its own, so that ``ps`` and whatever looks for actors see one."""
    return f"{sys.executable} {settings.BASE_DIR / 'manage.py'} actor {kind}"


def set_aside_inherited_connections() -> int:
    """In a forked child: stop using every database connection inherited open, without closing
    it; return how many there were. The next query opens the child's own."""
    count = 0
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            _set_aside.append(connection.connection)
            connection.connection = None
            count += 1
    return count
