"""The SQLite backend (archive/backends/sqlite3). Its writer lock: transactions of different
processes take turns on a lock file; connections of one process share one hold; a forked child
holds nothing of its parent's; past its timeout a writer goes on to SQLite's own busy wait (the
other side is always a real process: a forked child, or ``python -c`` trying the lock). Its
cursor: placeholders rewritten as Django's are, once per statement."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import OperationalError, connection, transaction
from django.db.backends.sqlite3 import base as django_sqlite

from archive.backends.sqlite3.base import WriterLock, _qmark_style, writer_lock
from core.models import Tag

LONG = 60  # seconds: only a child that never comes reaches it
TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(1)
"""


def free_for_another_process(path: Path) -> bool:
    """True when a process of its own takes the lock on ``path`` at once."""
    done = subprocess.run([sys.executable, "-c", TRY_LOCK, str(path)], timeout=LONG)
    return done.returncode == 0


def in_child(work, *, meanwhile=None) -> str:
    """Fork; run ``work()`` in the child, and ``meanwhile()`` (if given) here as it runs;
    return what the child's ``work()`` returned (it must exit 0)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 1
        try:
            os.close(read_fd)
            os.write(write_fd, work().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        if meanwhile is not None:
            meanwhile()
        with os.fdopen(read_fd) as pipe:
            said = pipe.read()
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return said


def test_a_writer_waits_for_another_process_to_release(tmp_path: Path) -> None:
    """The parent releases the lock 0.3 s after the child started trying; the child's acquire
    returns after that release, not before."""
    lock = WriterLock(tmp_path / "db-writer.lock")
    lock.acquire(timeout=LONG)
    released = []

    def release_later() -> None:
        time.sleep(0.3)
        released.append(time.monotonic())
        lock.release()

    def take() -> str:
        lock.acquire(timeout=LONG)
        return str(time.monotonic())

    taken_at = float(in_child(take, meanwhile=release_later))

    assert taken_at >= released[0]


def test_past_its_timeout_a_writer_goes_on_without_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "db-writer.lock"
    lock = WriterLock(path)
    lock.acquire(timeout=LONG)
    try:
        said = in_child(lambda: f"{_timed(lambda: lock.acquire(timeout=0.2)):.3f}")
    finally:
        lock.release()

    assert 0.2 <= float(said) < LONG  # it gave up waiting, and returned


def _timed(work) -> float:
    started = time.monotonic()
    work()
    return time.monotonic() - started


def test_connections_of_one_process_share_one_hold(tmp_path: Path) -> None:
    path = tmp_path / "db-writer.lock"
    lock = WriterLock(path)

    lock.acquire(timeout=LONG)
    lock.acquire(timeout=LONG)  # a second connection: held already, returns at once
    lock.release()
    held_by_one = not free_for_another_process(path)
    lock.release()

    assert held_by_one
    assert free_for_another_process(path)
    lock.release()  # one release too many is ignored
    assert free_for_another_process(path)


def test_a_forked_child_holds_nothing_of_its_parents(tmp_path: Path) -> None:
    """The child's acquire is no second hold of the parent's: it waits for the parent, and
    gives up at its timeout."""
    lock = WriterLock(tmp_path / "db-writer.lock")
    lock.acquire(timeout=LONG)
    try:
        said = in_child(lambda: f"{lock._holders} {_timed(lambda: lock.acquire(timeout=0.2))}")
    finally:
        lock.release()

    holders, waited = said.split()
    assert holders == "0"
    assert float(waited) >= 0.2


def test_a_lock_file_that_cannot_be_opened_leaves_writers_to_sqlite(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lock = WriterLock(tmp_path / "missing-folder" / "db-writer.lock")

    lock.acquire(timeout=LONG)  # returns at once, holding nothing
    lock.release()

    assert "SQLite writers go without" in caplog.text
    assert lock._holders == 0


def test_one_lock_per_database_file(tmp_path: Path) -> None:
    first = writer_lock(tmp_path / "db.sqlite3")

    assert writer_lock(tmp_path / "db.sqlite3") is first
    assert writer_lock(tmp_path / "other.sqlite3") is not first
    assert first.path == tmp_path / "db.sqlite3-writer.lock"


# --- the backend's transactions ----------------------------------------------------------------

sqlite_only = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").split(":")[0] not in ("", "sqlite"),
    reason="the writer lock is the SQLite backend's",
)


def lock_file() -> Path:
    return Path(f"{connection.settings_dict['NAME']}-writer.lock")


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_transaction_holds_the_lock_until_it_commits() -> None:
    assert connection.vendor == "sqlite" and not connection.is_in_memory_db()

    with transaction.atomic():
        inside = free_for_another_process(lock_file())
        with transaction.atomic():  # a savepoint: the same transaction, the same hold
            nested = free_for_another_process(lock_file())

    assert (inside, nested) == (False, False)
    assert free_for_another_process(lock_file())


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_write_outside_a_transaction_holds_the_lock_while_it_runs() -> None:
    """SQLite makes it a transaction of its own: it queues on the lock as one does, rather
    than in SQLite's busy handler. A read takes no lock."""
    held_during: dict[str, bool] = {}

    def look(execute, sql, params, many, context):
        held_during[sql.split()[0]] = not free_for_another_process(lock_file())
        return execute(sql, params, many, context)

    with connection.execute_wrapper(look):
        tag = Tag.objects.create(name="news")
        Tag.objects.filter(pk=tag.pk).update(name="sport")
        names = list(Tag.objects.values_list("name", flat=True))

    assert names == ["sport"]
    assert held_during == {"INSERT": True, "UPDATE": True, "SELECT": False}
    assert free_for_another_process(lock_file())


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_transaction_rolled_back_releases_the_lock() -> None:
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        assert not free_for_another_process(lock_file())
        _ = 1 / 0

    assert free_for_another_process(lock_file())


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_begin_that_fails_releases_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    def locked(self) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr(django_sqlite.DatabaseWrapper, "_start_transaction_under_autocommit",
                        locked)  # fmt: skip

    with pytest.raises(OperationalError), transaction.atomic():
        pass

    assert free_for_another_process(lock_file())


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_closing_a_connection_in_a_transaction_releases_the_lock() -> None:
    with transaction.atomic():
        connection.close()  # as a crash of the connection would
        closed_inside = free_for_another_process(lock_file())
        transaction.set_rollback(True)

    assert closed_inside


@sqlite_only
@pytest.mark.django_db
def test_placeholders_are_rewritten_as_django_does_once_per_statement() -> None:
    statement = "SELECT %s || '%%', %s"
    with connection.cursor() as cursor:
        cursor.execute(statement, ["a", 1])
        first = cursor.fetchone()
        hits = _qmark_style.cache_info().hits
        cursor.execute(statement, ["b", 2])
        again = cursor.fetchone()
        cursor.execute("SELECT %(x)s", {"x": 3})  # "pyformat", which Django rewrites itself
        named = cursor.fetchone()

    assert (first, again, named) == (("a%", 1), ("b%", 2), (3,))
    assert _qmark_style.cache_info().hits == hits + 1
