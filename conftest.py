"""Fixtures shared by every app's tests: the live test site (core/tests/site.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from archive.testing import MotoS3Server, postgres_problem
from core.tests.dedup_site import DedupSite
from core.tests.site import LiveSite


@pytest.fixture(scope="session")
def live_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    """Serve the test site on 127.0.0.1 for the whole session; ``live_site.url("/page2.html")``."""
    site = LiveSite(tmp_path_factory.mktemp("site")).start()
    yield site
    site.stop()


@pytest.fixture(scope="session")
def bare_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    """Serve the same pages from a second server that has no /favicon.ico."""
    site = LiveSite(tmp_path_factory.mktemp("bare-site"), favicon=False).start()
    yield site
    site.stop()


@pytest.fixture
def dedup_site(tmp_path: Path) -> Iterator[DedupSite]:
    """Serve core/tests/dedup_site.py's page and requisites from this test's own folder (its
    files may be changed between two captures)."""
    site = DedupSite(tmp_path / "site").start()
    yield site
    site.stop()


@pytest.fixture
def data_dir(settings, tmp_path: Path) -> Path:
    """A DATA_DIR of this test's own: added crawls' inputs, snapshots and the signing key."""
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.KEYS_DIR = tmp_path / "keys"
    return tmp_path


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """An empty folder for one extractor run, as the caller provides it."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def pytest_configure(config: pytest.Config) -> None:
    """Make the (empty) STATIC_ROOT once per test process, before collection (a module may make
    a WSGI handler as it is imported). WhiteNoise warns for each handler when it is missing; the
    tests serve static files from the apps' folders (no collectstatic). Not made by the test
    settings, which every actor subprocess of a test loads too."""
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the DATA_DIR made by archive/settings_for_tests.py (unless VELLUM_KEEP_TEST_DATA):
    a pytest-xdist worker its own folder, the controller (or a run without workers) the whole."""
    made_here = os.environ.get("VELLUM_TEST_DATA_DIR_CREATED")
    if made_here and not os.environ.get("VELLUM_KEEP_TEST_DATA"):
        shutil.rmtree(os.environ["DATA_DIR"], ignore_errors=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-only",
        action="store_true",
        help="run only the tests that use the database (a second pass on another database: "
        "the others would give the same result again)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--database-only``, deselect the tests that use no database. With DATABASE_URL
    pointing at a PostgreSQL server that does not answer, skip every test that needs the
    database, saying why, instead of failing each one with a connection error. The files
    that hold slow tests go first (``_slow_files_first``)."""
    _slow_files_first(items)
    if config.getoption("--database-only"):
        used = {item.nodeid: _uses_database(item) for item in items}
        unused = [item for item in items if not used[item.nodeid]]
        if unused:
            config.hook.pytest_deselected(items=unused)
            items[:] = [item for item in items if used[item.nodeid]]
    if connection.vendor != "postgresql":
        return
    problem = _postgres_unreachable()
    if problem is None:
        return
    skip = pytest.mark.skip(reason=f"PostgreSQL at DATABASE_URL is not reachable: {problem}")
    for item in items:
        if _uses_database(item):
            item.add_marker(skip)


def _slow_files_first(items: list[pytest.Item]) -> None:
    """Move the tests of the files that hold a ``slow`` test ahead of the others, in the order
    they had (pytest-django's, database tests first: its hook runs before this one). Under
    pytest-xdist (.ci/test: --dist loadfile, with --no-loadscope-reorder, which keeps this order
    rather than taking the files with the most tests first) the workers then take the long
    files early and even out the end on the many short ones, instead of one worker running a
    long file alone at the end."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: False (slow) first


def _uses_database(item: pytest.Item) -> bool:
    """True when the test is marked ``django_db`` or asks, itself or through a fixture it
    uses (``fixturenames`` is the whole closure), for pytest-django's database fixtures."""
    return bool(
        item.get_closest_marker("django_db")
        or {"db", "transactional_db", "django_db_setup"} & set(getattr(item, "fixturenames", ()))
    )


def _postgres_unreachable() -> str | None:
    database = settings.DATABASES["default"]
    return postgres_problem(
        host=database.get("HOST") or None,
        port=database.get("PORT") or None,
        user=database.get("USER") or None,
        password=database.get("PASSWORD") or None,
        dbname="postgres",  # the test database does not exist yet
    )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3Server]:
    """Serve S3 (moto) on 127.0.0.1 for the whole session; ``s3_server.create_bucket()`` makes a
    fresh bucket, ``s3_server.storage_entry(bucket)`` its STORAGES entry."""
    server = MotoS3Server().start()
    yield server
    server.stop()
