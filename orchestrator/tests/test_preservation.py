"""End to end: preservation-grade snapshots through ``manage.py`` (issue 5's acceptance).

A crawl of 20 pages of the Python documentation gives WACZ files that py-wacz validates and a
BagIt export that ``bagit.py --validate`` accepts; with a local mirror and an S3 target (moto on
127.0.0.1), every sealed snapshot ends with two verified copies, even when the S3 server stops
in the middle of the crawl and comes back later.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from archive.testing import MotoS3Server
from core.folder.wacz import WACZ_NAME, validate_wacz
from orchestrator.tests.test_full_profile import PYTHON_DOCS, DocsSite
from orchestrator.tests.test_orchestrator import CRAWL_TIMEOUT, Vellum, assert_folder_is_complete

pytestmark = [pytest.mark.slow]

# Twenty short pages of modules that stay in Python (16 to 31 KB of HTML each): they share the
# documentation's stylesheets and scripts as the long ones do, and take a fraction of the long
# ones' rendering time (twenty such as os, re and typing were 4.6 MB, and more than 2 minutes
# of this test).
DOC_PAGES = [
    "keyword", "getpass", "tty", "grp", "pwd", "copy", "colorsys", "linecache", "quopri",
    "codeop", "rlcompleter", "tabnanny", "netrc", "atexit", "copyreg", "fnmatch", "sched",
    "posix", "pydoc", "html",
]  # fmt: skip
BAGIT = Path(sys.executable).parent / "bagit.py"
WACZ_TIMEOUT = 120


@pytest.fixture
def docs_site():
    site = DocsSite().start()
    yield site
    site.stop()


@pytest.mark.skipif(not PYTHON_DOCS.is_dir(), reason="python3-doc is not installed")
def test_twenty_documentation_pages_give_valid_wacz_files_and_a_valid_bag(
    tmp_path: Path, docs_site: DocsSite
) -> None:
    vellum = Vellum(tmp_path / "data", EXTRACTORS="headers,wget,title,screenshot")
    assert vellum.manage("init").returncode == 0
    urls = [docs_site.url(f"/library/{name}.html") for name in DOC_PAGES]

    done = vellum.manage("add", "--wait", *urls, timeout=4 * CRAWL_TIMEOUT)

    assert done.returncode == 0, done.stderr
    rows = vellum.list_json()
    assert len(rows) == 20 and {row["status"] for row in rows} == {"sealed"}
    for row in rows:
        assert_folder_is_complete(row)
    # The pages share their stylesheets and scripts: the first capture of each holds it whole
    # and stores its WACZ, the others hold revisits of it and store none (replay and export
    # make theirs whole, checked below).
    stored = [row for row in rows if (Path(row["folder"]) / WACZ_NAME).is_file()]
    assert 1 <= len(stored) < 20
    verified = vellum.manage("verify", "--all")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "Verified 20 snapshots (20 copies): 20 sound, 0 flagged" in verified.stdout

    crawl_id = str(rows[0]["crawl"])
    bag = tmp_path / "bag"
    exported = vellum.manage("export", "--format", "bagit", "--crawl", crawl_id, str(bag))
    assert exported.returncode == 0, exported.stderr
    validation = subprocess.run(
        [sys.executable, str(BAGIT), "--validate", str(bag)], capture_output=True, text=True
    )
    assert validation.returncode == 0, validation.stderr
    assert len(list((bag / "data").iterdir())) == 20

    waczs = tmp_path / "wacz"
    exported = vellum.manage("export", "--format", "wacz", "--crawl", crawl_id, str(waczs))
    assert exported.returncode == 0, exported.stderr
    written = sorted(waczs.glob("*.wacz"))
    assert len(written) == 21  # one per snapshot and the crawl's combined file
    for row in rows:
        wacz = waczs / f"{row['id']}.wacz"
        assert validate_wacz(wacz, timeout=WACZ_TIMEOUT) == [], row["url"]
        with zipfile.ZipFile(wacz) as package:
            pages = package.read("pages/pages.jsonl").decode()
            names = package.namelist()
        assert row["url"] in pages
        assert any(name.startswith("archive/") and "screenshot" in name for name in names)
    combined = waczs / f"crawl-{crawl_id}.wacz"
    assert validate_wacz(combined, timeout=WACZ_TIMEOUT) == []


def wait_for(condition, *, timeout: float, what: str, state=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {state()}")
        time.sleep(0.3)


def copy_states(vellum: Vellum) -> str:
    """Copies per target and state, and the latest errors, for a failure message."""
    done = vellum.manage(
        "shell",
        "-c",
        "from collections import Counter; from core.models import StorageCopy; "
        "rows = StorageCopy.objects.values_list('target', 'status', 'error'); "
        "print(Counter((t, s) for t, s, e in rows), {e for t, s, e in rows if e})",
    )
    return done.stdout.splitlines()[-1] if done.stdout else done.stderr


def test_every_snapshot_gets_two_verified_copies_despite_an_s3_outage(
    tmp_path: Path, live_site
) -> None:
    s3 = MotoS3Server().start()
    try:
        bucket = s3.create_bucket()
        targets = {
            "mirror": {
                "BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": str(tmp_path / "mirror")},
            },
            "s3": s3.storage_entry(bucket),
        }
        vellum = Vellum(
            tmp_path / "data",
            STORAGE_TARGETS=json.dumps(targets),
            STORAGE_MAX_ATTEMPTS="1000",  # an outage must not use up the copies' attempts
            BACKOFF_CAP="1",
        )
        assert vellum.manage("init").returncode == 0
        urls = [live_site.url(f"/index.html?copy={number}") for number in range(15)]

        crawl = vellum.start("add", "--wait", *urls)
        try:
            wait_for(lambda: stored(vellum, "s3") >= 1, timeout=CRAWL_TIMEOUT, what="a copy")
            s3.stop()  # mid-crawl: later S3 copies back off, the mirror goes on
            wait_for(
                lambda: sealed(vellum) == len(urls), timeout=CRAWL_TIMEOUT, what="every snapshot"
            )
            wait_for(
                lambda: stored(vellum, "mirror") == len(urls),
                timeout=CRAWL_TIMEOUT,
                what="every mirror copy",
                state=lambda: copy_states(vellum),
            )
            assert stored(vellum, "s3") < len(urls)  # the rest wait for S3
            assert crawl.poll() is None  # add --wait waits for them too
            s3.start()
            _out, err = crawl.communicate(timeout=CRAWL_TIMEOUT)
        finally:
            if crawl.poll() is None:
                crawl.kill()
        assert crawl.returncode == 0, err

        assert stored(vellum, "s3") == stored(vellum, "mirror") == len(urls)
        verified = vellum.manage("verify", "--all")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        summary = f"Verified {len(urls)} snapshots ({3 * len(urls)} copies): {len(urls)} sound"
        assert summary in verified.stdout
    finally:
        s3.stop()


def sealed(vellum: Vellum) -> int:
    return vellum.status()["snapshot"]["sealed"]


def stored(vellum: Vellum, target: str) -> int:
    """Stored copies on ``target``, read with a query the status command does not offer."""
    done = vellum.manage(
        "shell",
        "-c",
        "from core.models import StorageCopy; "
        f"print(StorageCopy.objects.verified().filter(target={target!r}).count())",
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])  # Django 5.2 shell prints what it imported first
