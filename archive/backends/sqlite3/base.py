"""SQLite, its writers queued on a lock file beside the database rather than on its busy timeout,
and each statement's placeholders rewritten once (``CursorWrapper``).

SQLite lets one writer in at a time. A connection that finds the write lock taken retries in
its busy handler, which sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then 100 ms between
tries (sqlite3.c, ``sqliteDefaultBusyCallback``) and is not woken when the lock is released.
Vellum's actors write in many short transactions (DESIGN.md §3: a claim, a start, a record),
each holding the lock for about a millisecond, and the sleeps added up: archiving 200 pages,
``BEGIN IMMEDIATE`` waited 6 ms on average, 11 s of the four result actors' 88 s and 8 s of the
snapshot actors' 44 s (bench/throughput.py, issue 19).

So every transaction first takes an exclusive ``flock(2)`` on ``<database>-writer.lock`` and
keeps it until it commits or rolls back: waiting writers then take turns as the lock frees,
within a fraction of a millisecond. A write outside ``transaction.atomic()`` is a transaction
of its own to SQLite, and takes the lock for its statement too: in SQLite's busy handler, up to
100 ms between tries, it waited 1.3 ms on average for the lock a queued writer holds for
about one (snapshot_wake, 50 a run of 50 pages), and could lose its turn to them again and
again. The lock only orders the writers; SQLite's own lock still
guards the data. A writer that is not Vellum's, or one that waited SQLITE_BUSY_TIMEOUT for the
lock file, goes on to ``BEGIN IMMEDIATE`` and SQLite's busy handler as before, so the worst case
is "database is locked" after the timeout twice over (on the lock file, then in SQLite),
polled every millisecond at most rather than woken. The kernel drops the lock of a process that
dies. Threads of one process share one lock (a flock belongs to an open file, which
they share): the first to begin takes it, the last to end releases it, and between them SQLite
orders the threads as before. A forked child opens its own.
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import logging
import os
import threading
import time
from pathlib import Path

from django.db.backends.sqlite3 import base

logger = logging.getLogger(__name__)

# Seconds between two tries of a lock another process holds: short beside a transaction's
# millisecond, and a try is one system call.
RETRY_SECONDS = (0.0001, 0.0002, 0.0005, 0.001)


class WriterLock:
    """This process's exclusive flock on one lock file, counted across its connections."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._holders = 0
        self._guard = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting up to ``timeout`` seconds for another process to release it;
        past that, or when the lock file cannot be opened (logged), go on without it: SQLite's
        busy timeout then rules, as it does for writers that are not Vellum's."""
        with self._guard:
            self._holders += 1
            if self._holders > 1:
                return  # another connection of this process holds it
            try:
                self._take(timeout)
            except BaseException:  # interrupted: hold nothing
                self._holders -= 1
                if self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                raise

    def release(self) -> None:
        """Release one hold; the last one unlocks the file."""
        with self._guard:
            if self._holders == 0:
                return
            self._holders -= 1
            if self._holders == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _take(self, timeout: float) -> None:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as error:
                logger.warning("SQLite writers go without %s: %s", self.path, error)
                return
        deadline = time.monotonic() + timeout
        for attempt in itertools.count():
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)])

    def _forget(self) -> None:
        """In a forked child: the inherited file and its lock are the parent's."""
        self._guard = threading.Lock()
        self._holders = 0
        if self._fd is not None:
            os.close(self._fd)  # closing this copy leaves the parent's lock as it is
            self._fd = None


_locks: dict[Path, WriterLock] = {}
_locks_guard = threading.Lock()


def writer_lock(database: Path) -> WriterLock:
    """The WriterLock of the SQLite database file ``database`` (one per process)."""
    path = database.with_name(f"{database.name}-writer.lock")
    with _locks_guard:
        if path not in _locks:
            _locks[path] = WriterLock(path)
        return _locks[path]


class CursorWrapper(base.SQLiteCursorWrapper):
    """Django's SQLite cursor, which rewrites each statement's ``%s`` placeholders as ``?``
    before it runs: here once per statement text, not on every run (a regular expression over
    the whole statement, a twentieth of an actor's Python in its claims)."""

    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _qmark_style(query)
        return super().convert_query(query, param_names=param_names)


def _takes_no_lock(sql: str) -> bool:
    """True for a read (SELECT), and for the BEGIN of a transaction, which has taken the lock
    already (``_start_transaction_under_autocommit``)."""
    return sql.lstrip()[:6].upper().startswith(("SELECT", "BEGIN"))


@functools.lru_cache(maxsize=1024)
def _qmark_style(query: str) -> str:
    """``query`` with "format" placeholders in "qmark" style, as Django's cursor makes it."""
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's SQLite backend whose transactions take the writer lock first (module docstring).

    An in-memory database has no other process to queue with, and takes none.
    """

    _held_writer_lock: WriterLock | None = None  # what this connection's transaction holds
    _writer_lock_of: tuple[str, WriterLock | None] | None = None  # (database NAME, its lock)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.execute_wrappers.append(self._queue_autocommit_write)

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=CursorWrapper)

    def _queue_autocommit_write(self, execute, sql, params, many, context):
        """Run a statement that writes outside any transaction under the writer lock, as its
        own transaction (the module's docstring); a read, or a statement in a transaction
        (which holds the lock already), runs as it is."""
        if self.in_atomic_block or _takes_no_lock(sql) or not self.get_autocommit():
            return execute(sql, params, many, context)
        lock = self._acquire_writer_lock()
        try:
            return execute(sql, params, many, context)
        finally:
            if lock is not None:
                lock.release()

    def _start_transaction_under_autocommit(self) -> None:
        try:
            self._held_writer_lock = self._acquire_writer_lock()
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_writer_lock()
            raise

    def _acquire_writer_lock(self) -> WriterLock | None:
        """Take this database's writer lock (waiting up to the connection's timeout) and
        return it; None for a database that has none (in memory)."""
        lock = self._writer_lock()
        if lock is not None:
            lock.acquire(timeout=self.settings_dict["OPTIONS"].get("timeout", 5))
        return lock

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_writer_lock()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_writer_lock()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._release_writer_lock()

    def _writer_lock(self) -> WriterLock | None:
        """The lock of the database this connection opens (tests change its NAME), looked up
        once per name."""
        name = self.settings_dict["NAME"]
        if self._writer_lock_of is None or self._writer_lock_of[0] != name:
            lock = None if self.is_in_memory_db() else writer_lock(Path(name))
            self._writer_lock_of = (name, lock)
        return self._writer_lock_of[1]

    def _release_writer_lock(self) -> None:
        held, self._held_writer_lock = self._held_writer_lock, None
        if held is not None:
            held.release()
