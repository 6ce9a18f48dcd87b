"""End to end: the default profile (every installed extractor) over the test page set, with
``manage.py add --wait`` running the real orchestrator, actors, Chromium, SingleFile, yt-dlp and
git against servers on 127.0.0.1. Then a crawl of 50 pages, ten of them hostile (they never
finish loading, scroll forever, play 1 GiB, open windows, start downloads, redirect to file: or
javascript:, call alert in a loop, or never return), ends with every result final, each failure
with its reason, and leaves no Chromium running.
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
from core.choices import ResultStatus, SnapshotStatus
from core.tests.git_site import README, GitSite, build_repositories, git
from core.tests.hostile_page_site import HostilePageSite
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


# A page of each kind that fights its capture (core/tests/hostile_page_site.py), crawled among
# calm ones: its document or a script never finishes arriving, it grows forever as it is
# scrolled, it plays a 1 GiB video, it opens windows in a loop, it starts downloads, it redirects
# to file: or to javascript:, it calls alert in a loop, its script never returns.
HOSTILE_PAGES = [
    "/trickle",
    "/trickling.html?js",
    "/endless-scroll.html",
    "/video.html?announced",
    "/popups.html",
    "/downloads.html",
    "/redirect/file",
    "/redirect/javascript",
    "/alerts.html",
    "/busy.html",
]
# Those no extractor can capture (core/tests/test_hostile_pages.py): they time out or are refused.
NEVER_CAPTURED = {"/trickle", "/trickling.html?js", "/redirect/file", "/redirect/javascript",
                  "/busy.html"}  # fmt: skip
# Bounds for the crawl with hostile pages, as core/tests/test_hostile_pages.py sets them: a
# failure is not retried, so that a page that misses its deadline costs one timeout per result.
HOSTILE_CRAWL = {
    "EXTRACTORS": "screenshot,dom,singlefile",
    "EXTRACTOR_TIMEOUT": "15",
    "MAX_ATTEMPTS": "1",
    "BEHAVIOUR_SECONDS": "2",
    "SCROLL_PAGE_LIMIT": "3",
    "MAX_DOWNLOAD_BYTES": str(2 * 1024**2),
}


@pytest.fixture(scope="module")
def hostile_page_site() -> Iterator[HostilePageSite]:
    site = HostilePageSite().start()
    yield site
    site.stop()


def test_a_crawl_of_50_pages_with_hostile_ones_leaves_no_chromium_running(
    vellum: Vellum, live_site: LiveSite, hostile_page_site: HostilePageSite
) -> None:
    hostile = {hostile_page_site.url(path): path for path in HOSTILE_PAGES}
    calm = [live_site.url(f"/index.html?page={number}") for number in range(50 - len(hostile))]
    urls = list(calm)
    for number, url in enumerate(hostile):
        urls.insert(5 * number + 4, url)  # every fifth page is hostile

    done = vellum.manage("add", "--wait", *urls, timeout=3 * CRAWL_TIMEOUT, **HOSTILE_CRAWL)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows = results_by_url(vellum)
    assert len(rows) == 50
    assert {row["status"] for row in rows.values()} <= set(SnapshotStatus.final())
    for url in calm:
        row = rows[normalize_url(url)]
        assert set(statuses(row).values()) == {ResultStatus.SUCCEEDED}, row
    for url, path in hostile.items():
        row = rows[normalize_url(url)]
        assert set(row["results"]) == {"screenshot", "dom", "singlefile"}, row
        for detail in row["results"].values():
            assert detail["status"] in ResultStatus.final(), row
            assert detail["status"] == ResultStatus.SUCCEEDED or detail["error"], row
        if path in NEVER_CAPTURED:
            assert set(statuses(row).values()) == {ResultStatus.FAILED}, row
    assert no_chromium_left(vellum), "the actors left Chromium running"
