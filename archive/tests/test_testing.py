"""The test database's URL that tests hand to subprocesses (archive/testing.py): whatever the
server's address, the subprocess must reach the same database."""

from __future__ import annotations

from pathlib import Path

import dj_database_url
import pytest

from archive.testing import database_url, postgres_problem

SOCKET_FOLDER = "/var/run/postgresql"
FIELDS = ("NAME", "USER", "PASSWORD", "HOST", "PORT")


def parsed(url: str) -> dict:
    """What a subprocess's settings make of ``url`` (archive/settings.py parses it so)."""
    settings = dj_database_url.parse(url)
    return {field: settings.get(field) or "" for field in FIELDS}


@pytest.mark.parametrize(
    "database",
    [
        {"NAME": "test", "USER": "postgres", "PASSWORD": "", "HOST": "127.0.0.1", "PORT": 5432},
        {"NAME": "test", "USER": "postgres", "PASSWORD": "", "HOST": "::1", "PORT": 5432},
        {"NAME": "test", "USER": "postgres", "PASSWORD": "", "HOST": SOCKET_FOLDER, "PORT": ""},
        {"NAME": "test_vellum", "USER": "ar chivist", "PASSWORD": "p@ss:w/rd%", "HOST": "db"},
        {"NAME": "test", "USER": "", "PASSWORD": "", "HOST": "", "PORT": ""},
    ],
    ids=["tcp", "ipv6", "unix-socket", "escaped", "defaults"],
)
def test_a_postgresql_url_parses_back_to_the_same_database(database: dict) -> None:
    expected = {field: database.get(field) or "" for field in FIELDS}

    assert parsed(database_url("postgresql", database)) == expected


def test_a_sqlite_url_names_the_same_file(tmp_path: Path) -> None:
    name = str(tmp_path / "test db.sqlite3")

    assert parsed(database_url("sqlite", {"NAME": name}))["NAME"] == name


@pytest.mark.skipif(
    not Path(SOCKET_FOLDER, ".s.PGSQL.5432").exists(), reason="no PostgreSQL socket here"
)
def test_a_unix_socket_url_reaches_the_server() -> None:
    url = database_url("postgresql", {"NAME": "test", "USER": "postgres", "HOST": SOCKET_FOLDER})
    settings = parsed(url)

    problem = postgres_problem(
        host=settings["HOST"], dbname=settings["NAME"], user=settings["USER"]
    )

    assert problem is None
