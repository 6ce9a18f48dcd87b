"""End to end: the default profile (every installed extractor) over the test page set, with
``manage.py add --wait`` running the real orchestrator, actors, Chromium, SingleFile, yt-dlp and
git against servers on 127.0.0.1. Then a crawl of 50 pages leaves no Chromium running.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from PIL import Image

from archive.testing import LocalServer, chromium_pids
from core.tests.git_site import README, GitSite, build_repositories, git
from core.tests.media_site import CLIP_WEBM, MediaSite
from core.tests.site import LiveSite
from crawls.seeds import normalize_url
from orchestrator.tests.test_orchestrator import CRAWL_TIMEOUT, Vellum, assert_folder_is_complete

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ALL_EXTRACTORS = {"EXTRACTORS": ""}  # the default profile: every registered extractor
# Debian's python3-doc (bash .ci/install installs it): a real site of long, styled pages.
PYTHON_DOCS = Path("/usr/share/doc/python3/html")


class DocsSite(LocalServer):
    """The Python documentation served as static files on 127.0.0.1."""

    def handler(self):
        quiet = type("QuietHandler", (SimpleHTTPRequestHandler,), {"log_message": _quiet})
        return partial(quiet, directory=str(PYTHON_DOCS))


def _quiet(handler, format: str, *args: object) -> None:
    """Keep test output quiet."""


@pytest.fixture(scope="module")
def media_site() -> Iterator[MediaSite]:
    site = MediaSite().start()
    yield site
    site.stop()


@pytest.fixture(scope="module")
def git_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitSite]:
    root = tmp_path_factory.mktemp("git-site")
    build_repositories(root, tmp_path_factory.mktemp("git-work"))
    site = GitSite(root).start()
    yield site
    site.stop()


@pytest.fixture
def vellum(tmp_path: Path) -> Vellum:
    instance = Vellum(tmp_path / "data", EXTRACTOR_TIMEOUT="30", **ALL_EXTRACTORS)
    done = instance.manage("init")
    assert done.returncode == 0, done.stderr
    return instance


def no_chromium_left(vellum: Vellum, seconds: float = 10) -> bool:
    """True once no Chromium started for this installation runs (helpers exit just after their
    browser, so allow them a moment)."""
    deadline = time.monotonic() + seconds
    while chromium_pids(vellum.data_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not chromium_pids(vellum.data_dir)


def results_by_url(vellum: Vellum) -> dict[str, dict]:
    return {row["url"]: row for row in vellum.list_json()}


def statuses(row: dict) -> dict[str, str]:
    return {name: detail["status"] for name, detail in row["results"].items()}


def output_file(row: dict, extractor: str, name: str) -> Path:
    return Path(row["folder"]) / extractor / name


def test_the_default_profile_archives_the_test_page_set(
    vellum: Vellum, live_site: LiveSite, media_site: MediaSite, git_site: GitSite, tmp_path: Path
) -> None:
    pages = {
        "html": live_site.url("/index.html"),
        "scripted": live_site.url("/rendered.html"),
        "pdf": live_site.url("/document.pdf"),
        "image": live_site.url("/static/pixel.png"),
        "video": media_site.url("/video.html"),
        "git": git_site.url("/project.git"),
    }

    done = vellum.manage("add", "--wait", *pages.values(), timeout=3 * CRAWL_TIMEOUT)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows = results_by_url(vellum)
    row = {kind: rows[normalize_url(url)] for kind, url in pages.items()}
    for each in row.values():
        assert each["status"] == "sealed", each
        assert_folder_is_complete(each)

    html = statuses(row["html"])
    assert set(html) == {
        "headers", "wget", "title", "favicon", "htmltotext", "outlinks", "screenshot", "pdf",
        "dom", "singlefile", "recording", "readability", "media", "git",
    }  # fmt: skip
    assert {name for name, status in html.items() if status != "succeeded"} == {"media", "git"}
    assert row["html"]["results"]["media"]["status"] == "skipped"
    assert row["html"]["results"]["git"]["status"] == "skipped"
    with Image.open(output_file(row["html"], "screenshot", "screenshot.png")) as image:
        assert image.format == "PNG" and image.width == 1280
    info = subprocess.run(
        ["pdfinfo", str(output_file(row["html"], "pdf", "output.pdf"))], capture_output=True
    )
    assert info.returncode == 0
    article = output_file(row["html"], "readability", "content.txt").read_text(encoding="utf-8")
    assert "Welcome to the Vellum test site" in article
    meta = json.loads(output_file(row["html"], "readability", "article.json").read_text())
    assert meta["source"] == "dom"  # it waited for dom and read its output
    single = BeautifulSoup(
        output_file(row["html"], "singlefile", "singlefile.html").read_text(encoding="utf-8"),
        "lxml",
    )
    assert all(tag["src"].startswith("data:") for tag in single.find_all(src=True))

    scripted = output_file(row["scripted"], "dom", "output.html").read_text(encoding="utf-8")
    assert 'id="added-by-script"' in scripted and "Fetched: world" in scripted

    pdf = statuses(row["pdf"])
    assert pdf["wget"] == "succeeded"
    assert pdf["screenshot"] == pdf["pdf"] == pdf["dom"] == "skipped"

    assert statuses(row["image"])["screenshot"] == "succeeded"

    video = row["video"]["results"]["media"]
    assert video["status"] == "succeeded", video
    assert output_file(row["video"], "media", video["output"]).read_bytes() == CLIP_WEBM

    repository = row["git"]["results"]["git"]
    assert repository["status"] == "succeeded", repository
    mirror = output_file(row["git"], "git", repository["output"])
    git("clone", "--quiet", mirror, tmp_path / "checkout")
    assert (tmp_path / "checkout" / "README.md").read_text(encoding="utf-8") == README

    assert no_chromium_left(vellum), "the actors left Chromium running"


@pytest.mark.skipif(not PYTHON_DOCS.is_dir(), reason="python3-doc is not installed")
def test_the_default_profile_archives_python_documentation(vellum: Vellum, tmp_path: Path) -> None:
    site = DocsSite().start()
    try:
        url = site.url("/library/json.html")
        done = vellum.manage("add", "--wait", url, timeout=3 * CRAWL_TIMEOUT)
    finally:
        site.stop()

    assert done.returncode == 0, done.stderr
    (row,) = vellum.list_json()
    assert row["status"] == "sealed"
    assert_folder_is_complete(row)
    outcome = statuses(row)
    assert {name for name, status in outcome.items() if status != "succeeded"} == {"media", "git"}
    heading = "JSON encoder and decoder"
    with Image.open(output_file(row, "screenshot", "screenshot.png")) as image:
        assert image.width == 1280 and image.height > 2000  # the whole long page
    pdf_text = subprocess.run(
        ["pdftotext", str(output_file(row, "pdf", "output.pdf")), "-"],
        capture_output=True,
        text=True,
    )
    assert pdf_text.returncode == 0 and heading in pdf_text.stdout
    assert heading in output_file(row, "dom", "output.html").read_text(encoding="utf-8")
    single = output_file(row, "singlefile", "singlefile.html").read_text(encoding="utf-8")
    page = BeautifulSoup(single, "lxml")
    assert all(tag["src"].startswith("data:") for tag in page.find_all(src=True))
    assert not page.find_all("link", rel="stylesheet")  # inlined into <style>
    article = output_file(row, "readability", "content.txt").read_text(encoding="utf-8")
    assert f"json — {heading}" in article
    assert no_chromium_left(vellum)


def test_a_crawl_of_50_pages_leaves_no_chromium_running(
    vellum: Vellum, live_site: LiveSite
) -> None:
    urls = [live_site.url(f"/index.html?page={number}") for number in range(50)]

    done = vellum.manage(
        "add", "--wait", *urls, timeout=3 * CRAWL_TIMEOUT, EXTRACTORS="screenshot,dom,singlefile"
    )

    assert done.returncode == 0, done.stderr
    rows = vellum.list_json()
    assert len(rows) == 50
    assert all(set(statuses(row).values()) == {"succeeded"} for row in rows), [
        statuses(row) for row in rows if set(statuses(row).values()) != {"succeeded"}
    ]
    assert no_chromium_left(vellum), "the actors left Chromium running"
