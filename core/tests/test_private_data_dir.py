"""DATA_DIR is its user's alone, whatever the umask (issue 16 item 4, DESIGN.md §8).

The acceptance test runs ``manage.py init`` and ``manage.py add --wait`` as subprocesses under
``umask 022`` (the usual default, which leaves files world-readable) in a DATA_DIR of their own,
then stats everything in it. The others check how an existing DATA_DIR is tightened and warned
about.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from django.conf import settings

from archive.privacy import make_private_dir, tighten_data_dir
from core.checks import check_data_dir_private
from core.tests.site import LiveSite
from orchestrator.tests.test_orchestrator import Vellum

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")


def manage(data_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``manage.py <args>`` under ``umask 022`` with ``data_dir`` and its own SQLite DB;
    its huey queue in a SQLite file, as in production (the test settings run tasks at once)."""
    vellum = Vellum(data_dir, HUEY_IMMEDIATE="0")
    umask = os.umask(0o022)  # what the command inherits (the test's own files are not written)
    try:
        return vellum.manage(*args, timeout=timeout)
    finally:
        os.umask(umask)


def walk(root: Path) -> Iterator[Path]:
    """``root`` and every path under it (symbolic links not followed)."""
    yield root
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            yield Path(folder) / name


def open_to_others(root: Path) -> list[str]:
    """Every path under ``root`` that group or others have any permission on, with its mode."""
    return [
        f"{path.relative_to(root.parent)} {stat.S_IMODE(path.lstat().st_mode):04o}"
        for path in walk(root)
        if not path.is_symlink() and path.lstat().st_mode & 0o077
    ]


@pytest.mark.slow
def test_a_fresh_data_dir_under_umask_022_is_closed_to_other_users(
    live_site: LiveSite, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"

    init = manage(data_dir, "init")
    assert init.returncode == 0, init.stderr
    # With an address to notify, the sealed crawl's report is queued: the huey queue is made.
    added = manage(
        data_dir, "add", "--wait", "--email", "archivist@example.com", live_site.url("/"),
        timeout=240,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr

    names = {path.relative_to(data_dir).as_posix() for path in walk(data_dir)}
    # What is checked is really there: the database with its WAL, the huey queue, the keys, the
    # saved input, logs, collected static files and a sealed snapshot with its WARC and WACZ.
    for expected in ("db.sqlite3", "huey.sqlite3", "secret_key", "keys/signing-key.pem",
                     "keys/signing-key.pub.pem", "logs/claims.jsonl"):  # fmt: skip
        assert expected in names, expected
    assert any(name.startswith("sources/") for name in names)
    assert any(name.startswith("static/") for name in names)
    for suffix in ("index.json", ".warc.gz", ".wacz", "manifest-sha256.txt.sig"):
        assert any(name.startswith("archive/") and name.endswith(suffix) for name in names)
    assert open_to_others(data_dir) == []
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700


def test_the_database_write_ahead_log_follows_the_database_mode(tmp_path: Path) -> None:
    """SQLite gives -wal and -shm the database file's mode (os_unix.c, findCreateFileMode),
    whatever the umask of the process that opens it: a 0600 database keeps them 0600. The
    writers' lock file (archive/backends/sqlite3) is made 0600 by Vellum itself."""
    data_dir = tmp_path / "data"
    assert manage(data_dir, "init").returncode == 0
    old = os.umask(0o022)
    try:
        with closing(sqlite3.connect(data_dir / "db.sqlite3")) as db:
            db.execute("CREATE TABLE probe (x)")  # WAL mode persists: this write makes -wal
            modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in data_dir.iterdir()
                     if path.name.startswith("db.sqlite3")}  # fmt: skip
    finally:
        os.umask(old)

    assert modes == {"db.sqlite3": 0o600, "db.sqlite3-wal": 0o600, "db.sqlite3-shm": 0o600,
                     "db.sqlite3-writer.lock": 0o600}  # fmt: skip


def test_init_closes_a_data_dir_an_older_version_left_open(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert manage(data_dir, "init").returncode == 0
    opened = [data_dir, data_dir / "db.sqlite3", data_dir / "keys", data_dir / "archive",
              data_dir / "keys" / "signing-key.pub.pem"]  # fmt: skip
    for path in opened:
        path.chmod(0o755 if path.is_dir() else 0o644)

    again = manage(data_dir, "init")

    assert again.returncode == 0, again.stderr
    assert "Closed to other users: " in again.stdout
    assert {path: stat.S_IMODE(path.stat().st_mode) for path in opened} == {
        path: 0o700 if path.is_dir() else 0o600 for path in opened
    }


def test_make_private_dir_ignores_the_umask_and_leaves_parents_alone(tmp_path: Path) -> None:
    parent = tmp_path / "shared"
    parent.mkdir(mode=0o755)
    parent.chmod(0o755)
    old = os.umask(0)
    try:
        make_private_dir(parent / "data")
    finally:
        os.umask(old)

    assert stat.S_IMODE((parent / "data").stat().st_mode) == 0o700
    assert stat.S_IMODE(parent.stat().st_mode) == 0o755


def test_tighten_keeps_the_owners_bits_and_passes_over_links(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (tmp_path / "link").symlink_to("/etc/hostname")
    tmp_path.chmod(0o755)

    changed = tighten_data_dir(tmp_path)

    assert changed == [tmp_path, tool]
    assert stat.S_IMODE(tool.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path("/etc/hostname").stat().st_mode) & 0o044  # not followed


def test_an_open_data_dir_is_a_startup_warning(settings, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path
    tmp_path.chmod(0o750)

    warnings = check_data_dir_private(None)

    assert [(warning.id, str(tmp_path) in warning.msg) for warning in warnings] == [
        ("core.W002", True)
    ]
    tmp_path.chmod(0o700)
    assert check_data_dir_private(None) == []
