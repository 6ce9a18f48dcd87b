"""Wake-ups: tell the orchestrator and idle actors at once that work became due (DESIGN.md §3).

Whoever makes a work item due (a crawl queued by ``add``, the snapshots a crawl's tick creates,
the results a snapshot's tick creates, a result whose end unblocks its snapshot, a lease handed
back) or final calls ``notify_due(kind)`` or ``notify_final(kind)``; WorkItem and WorkQuerySet
(orchestrator/models.py) do it for every save, update and bulk_create that does so. The ping
goes out when the transaction commits (``transaction.on_commit``): a listener woken earlier could
not yet see the row.

The embedded default needs no server: each listener (the orchestrator; an actor while it waits
for work) owns a FIFO in ``DATA_DIR/run/<host>/wake/<database>/`` named
``<topic>.<pid>.<token>``, where the topic is ``all`` for an orchestrator that stays
(supervisord's), ``passing`` for one that ends when idle or done (``add --wait``'s own), the
kind (``archiveresult``) for an actor, and ``watch`` for ``add --wait`` while a staying
orchestrator archives its crawl (orchestrator/handover.py); a ``watch`` FIFO takes ``final``
pings only. A ping writes one line (``due crawl``) to every FIFO whose topic takes it, without
blocking: a full FIFO already holds a wake-up. A FIFO nobody reads any more (its process was
killed) refuses the write (ENXIO), and the writer removes it. The folder is per host because a
FIFO carries data only between processes of one kernel, and DATA_DIR may be shared between
machines (DESIGN.md §6); those wake up through their own polls, which stay as the safety net.
It is per database too (``database_label``): a process on another database has no record a
ping could be about.

On PostgreSQL every ping is also a ``NOTIFY vellum_wake`` (sent in the writer's transaction,
delivered when it commits), which each orchestrator LISTENs to on a connection of its own
(``DatabaseListener``): one on another machine wakes at once too, and passes the ping on to its
own idle actors.

Listeners wait in ``select()`` on their FIFO (and on whatever else they watch: the orchestrator
its actors' sentinels and its LISTEN connection), so that, idle, they use no CPU at all;
``interrupt()`` is for signal handlers. A forked child closes the FIFO listeners it inherited
(``os.register_at_fork``) and leaves their FIFOs to the parent; an inherited LISTEN connection it
sets aside unused and unclosed (closing it would end the parent's session on the server).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import secrets
import select
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from core.extractors.process import process_state

ALL = "all"  # the topic of an orchestrator that stays (supervisord's): every ping
PASSING = "passing"  # an orchestrator that ends when idle or done (add --wait's): every ping
ORCHESTRATOR_TOPICS = (ALL, PASSING)
WATCH = "watch"  # a command waiting for a crawl to end: final pings only
# The name of a staying orchestrator's FIFO: topic, process id, random token (Listener).
STAYING_FIFO = re.compile(r"all\.(\d+)\.[0-9a-f]+")
CHANNEL = "vellum_wake"  # PostgreSQL's LISTEN/NOTIFY channel
DUE = "due"
FINAL = "final"
SIGNAL = "signal"
MESSAGE_BYTES = 64  # one ping line; far below PIPE_BUF, so a write is never interleaved
READ_BYTES = 65536

_open: set[Listener | DatabaseListener] = set()
_set_aside: list[object] = []  # LISTEN connections inherited by a forked child, never closed


def wake_dir() -> Path:
    """Return ``DATA_DIR/run/<host>/wake/<database>``, the folder of the FIFOs of this machine's
    listeners that work on this process's database (``database_label``)."""
    return Path(settings.DATA_DIR) / "run" / socket.gethostname() / "wake" / database_label()


def database_label() -> str:
    """Name the database this process works on: its vendor and a digest of where it is
    (``sqlite-<hex>``, ``postgresql-<hex>``), the same in every process that uses it.

    Wake-ups are only for processes on one database: a DATA_DIR may be shared by an
    orchestrator on PostgreSQL and a shell whose ``add`` has no DATABASE_URL (SQLite), and
    ``add --wait`` must not leave its crawl to an orchestrator that never sees it. A SQLite
    file is known by its real path (symbolic links resolved), a server's database by its name
    alone: one server is reached as ``localhost``, ``127.0.0.1`` or a socket, which no string
    shows to be the same; two servers with databases of one name, on one machine and sharing
    one DATA_DIR, share the folder. Should two processes of one database still differ (a SQLite
    file reached through a hard link), their pings go through PostgreSQL's NOTIFY or, on
    SQLite, wait for the polls.
    """
    return _label(connection.vendor, os.fspath(connection.settings_dict["NAME"]))


@functools.lru_cache(maxsize=8)
def _label(vendor: str, name: str) -> str:
    """``database_label`` of a database of ``vendor`` named ``name``, worked out once: every
    ping asks for it, and resolving a path takes a system call per folder in it."""
    where = os.path.realpath(name) if vendor == "sqlite" else name
    digest = hashlib.blake2b(where.encode("utf-8", "surrogateescape"), digest_size=5)
    return f"{vendor}-{digest.hexdigest()}"


def notify_due(*kinds: str) -> None:
    """Tell orchestrators and idle actors of each of ``kinds`` (``crawl``, ``snapshot``,
    ``archiveresult``, ``storagecopy``) that records of it are due now; sent on commit."""
    for kind in kinds:
        _notify_database(DUE, kind)
        transaction.on_commit(lambda kind=kind: ping(DUE, kind), robust=True)


def notify_final(kind: str) -> None:
    """Tell orchestrators and watching commands that a record of ``kind`` reached a final state
    (a crawl that ``add --wait`` waits for, a snapshot a held-back one waits for), or was held;
    sent on commit."""
    _notify_database(FINAL, kind)
    transaction.on_commit(lambda: ping(FINAL, kind), robust=True)


def _notify_database(event: str, kind: str) -> None:
    """On PostgreSQL, NOTIFY ``"<event> <kind> <host> <database label>"`` in the current
    transaction (delivered to every LISTENing orchestrator when it commits, never if it rolls
    back)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            payload = f"{event} {kind} {socket.gethostname()} {database_label()}"
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


def ping(event: str, kind: str, *, orchestrators: bool = True) -> int:
    """Write ``"<event> <kind>"`` to every listener on this machine that takes it: orchestrators
    (unless ``orchestrators`` is false: an orchestrator passing a ping on to its actors),
    actors of ``kind`` for ``due``, and watching commands for ``final``. Return how many were
    written to.

    Never blocks and never raises: a folder that does not exist means nobody listens. A FIFO
    whose reader is gone is removed.
    """
    message = f"{event} {kind}\n".encode()
    folder = wake_dir()
    sent = 0
    for name in _listener_names(folder):
        topic = name.split(".", 1)[0]
        if (
            (topic in ORCHESTRATOR_TOPICS and orchestrators)
            or (event == DUE and topic == kind)
            or (event == FINAL and topic == WATCH)
        ):
            sent += _write(folder / name, message)
    return sent


def staying_orchestrators() -> list[int]:
    """Return the process ids of the orchestrators that stay (not ``add --wait``'s, which end
    with their crawl) and listen on this machine now, lowest first.

    One listens when its FIFO has a reader (a dead one's FIFO is removed) and its process is
    not stopped (Ctrl-Z, SIGSTOP: it would archive nothing). Orchestrators of other machines
    sharing DATA_DIR are not seen: their FIFOs are in their own folders.
    """
    folder = wake_dir()
    pids = []
    for name in _listener_names(folder):
        match = STAYING_FIFO.fullmatch(name)
        fd = _open_for_writing(folder / name) if match else None
        if fd is None:
            continue
        os.close(fd)  # nothing written: the orchestrator is not woken
        if not _stopped(int(match[1])):
            pids.append(int(match[1]))
    return sorted(pids)


def _stopped(pid: int) -> bool:
    """True when process ``pid`` is stopped by a signal or a tracer (``T``, ``t`` in
    /proc/<pid>/stat), or gone."""
    return process_state(pid) in (None, "T", "t")


def _listener_names(folder: Path) -> list[str]:
    """Return the names of the FIFOs in ``folder`` (none when it does not exist yet)."""
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _open_for_writing(path: Path) -> int | None:
    """Open the FIFO ``path`` for writing without blocking; None when it has no reader (its
    listener's process is gone: the FIFO is removed), is no FIFO, or cannot be opened."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as error:
        if error.errno == errno.ENXIO:  # nobody has it open for reading: a dead listener's
            with contextlib.suppress(OSError):
                path.unlink()
        return None
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):  # a file put there by hand: no listener
        os.close(fd)
        return None
    return fd


def _write(path: Path, message: bytes) -> int:
    """Write ``message`` to the FIFO ``path`` without blocking; return 1 when it was written
    (or the FIFO is full of wake-ups already), else 0."""
    fd = _open_for_writing(path)
    if fd is None:
        return 0
    try:
        os.write(fd, message)
    except BlockingIOError:
        pass  # full of wake-ups not yet read: one more adds nothing
    except OSError:
        return 0
    finally:
        os.close(fd)
    return 1


@dataclass(frozen=True)
class Wake:
    """Why ``Listener.wait`` returned: ``pings`` read (``{("due", "crawl"), ...}``), a signal
    handler's ``interrupt()``, other file descriptors that became ready (``ready``), or none of
    these when the timeout passed (``timed_out``)."""

    pings: frozenset[tuple[str, str]] = frozenset()
    interrupted: bool = False
    ready: tuple[int, ...] = field(default=())

    @property
    def timed_out(self) -> bool:
        return not (self.pings or self.interrupted or self.ready)

    def describe(self) -> str:
        """``due crawl, final snapshot``, ``a signal``, ``2 file descriptors`` or ``timeout``."""
        parts = [f"{event} {kind}" for event, kind in sorted(self.pings)]
        if self.interrupted:
            parts.append("a signal")
        if self.ready:
            parts.append(f"{len(self.ready)} file descriptor(s)")
        return ", ".join(parts) or "timeout"

    def kinds(self, event: str = DUE) -> set[str]:
        """The kinds pinged with ``event``."""
        return {kind for what, kind in self.pings if what == event}


class Listener:
    """One process's FIFO for the pings of ``topic`` (``all``, or a kind); a context manager.

    Raises OSError when the FIFO cannot be created (DATA_DIR not writable).
    """

    def __init__(self, topic: str):
        folder = wake_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"{topic}.{os.getpid()}.{secrets.token_hex(4)}"
        # Made under a name no writer looks at, opened, then renamed: a writer never finds it
        # without a reader and takes it for a dead listener's.
        hidden = folder / f".{name}"
        os.mkfifo(hidden, 0o600)
        # Read and write: the FIFO never reads as closed (EOF) between two writers, and the
        # listener can write its own interrupt to it.
        self.fd = os.open(hidden, os.O_RDWR | os.O_NONBLOCK)
        os.rename(hidden, folder / name)
        self.path = folder / name
        self.topic = topic
        self._pid = os.getpid()
        _open.add(self)

    def fileno(self) -> int:
        return self.fd

    def wait(self, timeout: float | None, *, also: list[int] | tuple[int, ...] = ()) -> Wake:
        """Wait up to ``timeout`` seconds (None: for ever) for a ping, an ``interrupt()`` or one
        of the file descriptors ``also`` to become readable; return what happened.

        Pings already waiting return at once. Returns early only for these, never for a signal
        whose handler did not call ``interrupt()``.
        """
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0)
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            readable, _, _ = select.select([self.fd, *also], [], [], remaining)
            wake = self._read() if self.fd in readable else Wake()
            ready = tuple(fd for fd in readable if fd != self.fd)
            if ready:
                return Wake(wake.pings, wake.interrupted, ready)
            if not wake.timed_out or remaining == 0:
                return wake

    def drain(self) -> Wake:
        """Read and return the pings waiting, without waiting."""
        return self._read()

    def _read(self) -> Wake:
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.fd, READ_BYTES):
                data += chunk
        pings, interrupted = set(), False
        for line in data.decode(errors="replace").splitlines():
            event, _, kind = line.partition(" ")
            if event == SIGNAL:
                interrupted = True
            elif kind:
                pings.add((event, kind))
        return Wake(frozenset(pings), interrupted)

    def interrupt(self) -> None:
        """Make ``wait`` return at once (from a signal handler: a write, nothing else)."""
        with contextlib.suppress(OSError):
            os.write(self.fd, f"{SIGNAL} -\n".encode())

    def close(self) -> None:
        """Remove the FIFO and close it (in a forked child: close only, the FIFO is the
        parent's)."""
        if self.fd < 0:
            return
        if os.getpid() == self._pid:
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(self.path.lstat().st_mode):
                    self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1
        _open.discard(self)

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class DatabaseListener:
    """An orchestrator's LISTEN on PostgreSQL for the pings of other machines (its own come
    through its FIFO), on a connection of its own; a context manager.

    Raises django.db.DatabaseError when it cannot connect or LISTEN.
    """

    def __init__(self, *, host: str | None = None):
        # Pings sent from this host with this database label came through the FIFOs too.
        self.origin = (host or socket.gethostname(), database_label())
        with connection.wrap_database_errors:
            self.connection = connection.get_new_connection(connection.get_connection_params())
            self.connection.autocommit = True
            self.connection.execute(f"LISTEN {CHANNEL}")
        self._pid = os.getpid()
        _open.add(self)

    def fileno(self) -> int:
        return self.connection.fileno()

    def drain(self) -> frozenset[tuple[str, str]]:
        """Read the notifications waiting, without waiting; return the pings of other hosts
        (``{("due", "crawl"), ...}``), and of processes of this host whose FIFOs are in
        another folder (another database label for the same database: ``database_label``).
        Raises django.db.DatabaseError when the connection is lost."""
        pings = set()
        with connection.wrap_database_errors:
            for notification in self.connection.notifies(timeout=0):
                event, kind, host, label = [*notification.payload.split(" "), "", "", ""][:4]
                if kind and (host, label) != self.origin:
                    pings.add((event, kind))
        return frozenset(pings)

    def close(self) -> None:
        """Close the connection (in a forked child: set it aside, the session is the
        parent's)."""
        if self.connection is None:
            return
        if os.getpid() == self._pid:
            with contextlib.suppress(Exception):
                self.connection.close()
        else:
            _set_aside.append(self.connection)
        self.connection = None
        _open.discard(self)

    def __enter__(self) -> DatabaseListener:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _close_inherited() -> None:
    """In a forked child: close the parent's listeners (their FIFOs stay the parent's, and
    its LISTEN connection is set aside, not closed)."""
    for listener in list(_open):
        listener.close()


os.register_at_fork(after_in_child=_close_inherited)
