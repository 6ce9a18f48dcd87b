"""Pages that fight their capture (issue 18, part 5): every rendering extractor ends bounded.

Each page here is hostile in one way: it never finishes loading (its document, or a stylesheet,
image or script, trickles forever), it grows forever as it is scrolled, it plays a 1 GiB video,
it opens windows in a loop, it starts downloads (or is one), it redirects to a URL that is not
http(s) (file:, data:, javascript:, ftp:, an application's scheme), it calls ``alert`` in a
loop, or its script never returns. The screenshot, pdf, dom, singlefile and recording
extractors run for real in the shared Chromium against the hostile page site on 127.0.0.1
(core/tests/hostile_page_site.py, which counts what it sent), and each case checks the outcome
and its reason, that the run ended within its timeout plus MARGIN, that what it wrote stays
within MAX_DOWNLOAD_BYTES, and that the next page still captures, in the same browser unless
the deadline had to kill it. Every test starts without a browser and must leave no Chromium
process once the browser is closed. dom is the quick representative of the rendering
extractors; the others are slow-marked (core/tests/test_hostile_servers.py does the same). A page
refused or timed out before its capture runs only the extractors whose load differs (LOADERS).
"""

from __future__ import annotations

import base64
import gzip
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from bs4 import BeautifulSoup
from django.conf import settings as django_settings
from django.test import override_settings
from PIL import Image

from archive.testing import chromium_pids, process_cmdline, wait_until
from core.extractors.base import ExtractorOutput
from core.extractors.browser import Browser, close_shared_browser, shared_browser
from core.extractors.dom import DomExtractor
from core.extractors.errors import Outcome
from core.extractors.registry import get_extractor
from core.extractors.screenshot import MAX_HEIGHT
from core.tests.hostile_page_site import (
    ATTACHMENT_MARKER,
    GIB,
    REDIRECT_TARGETS,
    TRICKLING_TAGS,
    HostilePageSite,
)

pytestmark = pytest.mark.browser

MAX_BYTES = 2 * 1024**2  # MAX_DOWNLOAD_BYTES here
TIMEOUT = 3  # seconds, for pages that miss their deadline
PAGE_TIMEOUT = 20  # seconds, for pages that are captured (SingleFile is slow on these)
MARGIN = 5  # seconds a run may take past its timeout (the deadline's grace, killing Chromium)
SECRET_LINE = b"root:x:0:0:"  # how /etc/passwd starts on every Debian system
RENDERERS = ("dom", "screenshot", "pdf", "singlefile", "recording")
QUICK = ("dom",)


# The extractors whose run differs from dom's for a page that fails to load: SingleFile (its
# probe, its Node process) and recording (its run adds what the record lacks to any outcome).
# screenshot, pdf and dom share ChromiumExtractor.run and differ only in ``capture``, which a
# page refused or timed out while loading never reaches: there dom stands for all three.
LOADERS = ("dom", "singlefile", "recording")


def renderers(names: tuple[str, ...] = RENDERERS) -> list:
    """``names`` as parameters, all but the QUICK ones slow-marked."""
    return [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in names]


@pytest.fixture(scope="module")
def site() -> Iterator[HostilePageSite]:
    """Serve the hostile pages on 127.0.0.1 for this module."""
    site = HostilePageSite().start()
    yield site
    site.stop()


def ours() -> set[int]:
    """This test session's Chromium processes (other test runs may have theirs)."""
    return chromium_pids(django_settings.DATA_DIR)


@pytest.fixture(autouse=True)
def _bounded(site: HostilePageSite, settings) -> Iterator[None]:
    """Small bounds; each test starts without a browser, and once the browser is closed no
    Chromium process of this session may be left."""
    settings.MAX_DOWNLOAD_BYTES = MAX_BYTES
    settings.EXTRACTOR_TIMEOUT = TIMEOUT
    settings.EXTRACTOR_OPTIONS = {}
    settings.BEHAVIOUR_SECONDS = 2
    settings.SCROLL_PAGE_LIMIT = 10
    close_shared_browser()
    site.clear()
    yield
    close_shared_browser()
    assert wait_until(lambda: not ours()), [process_cmdline(pid)[:2] for pid in ours()]


def run(name: str, url: str, out_dir: Path) -> tuple[ExtractorOutput, float]:
    """Run extractor ``name`` on ``url``; return its output and the seconds it took."""
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    output = get_extractor(name).run(SimpleNamespace(url=url), out_dir)
    return output, time.monotonic() - started


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def nothing_kept(out_dir: Path, name: str) -> bool:
    """True when a run that missed its deadline wrote nothing, or is the recording extractor's
    (its WARC may be begun when the browser is killed under it: the pipeline discards a
    failed attempt's folder whole)."""
    return folder_bytes(out_dir) == 0 or name == "recording"


def timed_out(name: str) -> tuple[Outcome, str]:
    tool = "single-file" if name == "singlefile" else "chromium"
    return Outcome.TEMPORARY, f"{tool} timed out after {TIMEOUT} s"


def assert_next_page_captures(
    site: HostilePageSite, tmp_path: Path, *, browser_pid: int | None
) -> None:
    """The next page is captured; in the browser whose pid is ``browser_pid``, if given.
    PAGE_TIMEOUT is its deadline, whatever the hostile page's was: the calm page must load, and
    on a busy machine (the suite's other worker rendering too) 3 s may not do."""
    with override_settings(EXTRACTOR_TIMEOUT=PAGE_TIMEOUT):
        output, _took = run("dom", site.url("/calm.html"), tmp_path / "next")
    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert "CALM-PAGE" in (tmp_path / "next" / output.output).read_text(encoding="utf-8")
    if browser_pid is not None:
        assert shared_browser().pid == browser_pid


def assert_recovered(site: HostilePageSite, tmp_path: Path, first: Browser) -> None:
    """After a page missed its deadline: the next page is captured, by ``first`` (the page was
    closed with its context) or by a browser started afresh (``first`` was killed, at
    DEADLINE_GRACE past the deadline, and none of its processes is left)."""
    assert_next_page_captures(site, tmp_path, browser_pid=None)
    if shared_browser() is not first:
        assert not first.alive
        assert wait_until(lambda: not [pid for pid in ours() if group_of(pid) == first.pid])
        assert not first.temp_dir.exists()  # nor anything it would have left in /tmp
        assert not first.user_data_dir.exists()


def group_of(pid: int) -> int | None:
    """The process group of ``pid`` (None once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[2])  # state, ppid, pgrp


def captured_bytes(out_dir: Path, output: ExtractorOutput) -> bytes:
    """What a capture wrote, a gzipped WARC's records decompressed."""
    data = (out_dir / output.output).read_bytes()
    return gzip.decompress(data) if output.output.endswith(".gz") else data


def captured_text(out_dir: Path, output: ExtractorOutput) -> str:
    """The text of what a capture wrote (a PDF's and a PNG's bytes as they are)."""
    return captured_bytes(out_dir, output).decode("utf-8", errors="replace")


# --- 1. pages that never finish loading ----------------------------------------------------------


@pytest.mark.parametrize("name", renderers(LOADERS))
@pytest.mark.parametrize(
    "path", ["/trickle", *(f"/trickling.html?{kind}" for kind in TRICKLING_TAGS)]
)
def test_a_page_that_never_finishes_loading_times_out(
    site: HostilePageSite, tmp_path: Path, name: str, path: str
) -> None:
    first = shared_browser()

    output, took = run(name, site.url(path), tmp_path / "out")

    assert (output.outcome, output.error) == timed_out(name)
    assert took < TIMEOUT + MARGIN
    assert nothing_kept(tmp_path / "out", name)
    assert site.sent_under("/trickle") < 1000  # a short start, and a byte every 0.2 s
    assert_recovered(site, tmp_path, first)


@pytest.mark.parametrize("name", renderers())
def test_a_frame_that_never_answers_does_not_hold_the_capture(
    site: HostilePageSite, tmp_path: Path, settings, name: str
) -> None:
    # The page has loaded: only its frame waits, which no behaviour or capture waits for.
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    out = tmp_path / "out"
    pid = shared_browser().pid

    output, took = run(name, site.url("/late-frame.html"), out)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert took < PAGE_TIMEOUT + MARGIN
    assert site.asked("/never") == 1
    if name in ("dom", "singlefile"):
        assert "FRAME-ADDED" in captured_text(out, output)
    assert_next_page_captures(site, tmp_path, browser_pid=pid)


# --- 2. a page that grows forever as it is scrolled ----------------------------------------------


@pytest.mark.parametrize("name", renderers())
def test_an_endless_scroll_is_captured_bounded(
    site: HostilePageSite, tmp_path: Path, settings, name: str, caplog
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    settings.BEHAVIOUR_SECONDS = 5
    settings.SCROLL_PAGE_LIMIT = 3
    caplog.set_level(logging.INFO, logger="core.extractors.rendering")
    out = tmp_path / "out"

    output, took = run(name, site.url("/endless-scroll.html"), out)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert took < PAGE_TIMEOUT + MARGIN
    assert folder_bytes(out) <= MAX_BYTES
    behaviours = [r.getMessage() for r in caplog.records if "behaviours on" in r.getMessage()]
    assert len(behaviours) == 1
    assert behaviours[0].endswith(("stopped: page limit", "stopped: budget"))
    if name == "screenshot":
        with Image.open(out / output.output) as image:
            assert image.height == MAX_HEIGHT  # the page is taller: the image stops there
    if name in ("dom", "singlefile"):
        chunks = BeautifulSoup(captured_text(out, output), "lxml").select(".chunk")
        assert 2 <= len(chunks) <= 3  # SCROLL_PAGE_LIMIT


# --- 3. a 1 GiB video ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", renderers())
@pytest.mark.parametrize("variant", ["announced", "slow"])
def test_a_huge_video_is_not_read_whole(
    site: HostilePageSite, tmp_path: Path, settings, name: str, variant: str
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    out = tmp_path / "out"
    pid = shared_browser().pid

    output, took = run(name, site.url(f"/video.html?{variant}"), out)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert took < PAGE_TIMEOUT + MARGIN
    assert folder_bytes(out) <= MAX_BYTES
    # Chromium gave up on zeros it cannot decode after a few MB: nothing near the GiB was
    # read, so nothing near it was held in memory.
    assert 0 < site.sent_under("/video") < GIB // 16
    assert_next_page_captures(site, tmp_path, browser_pid=pid)


# --- 4. windows opened in a loop -----------------------------------------------------------------


def closed_pages(messages: list[str], url: str) -> int:
    """How many pages the browser said it closed for the visit of ``url`` (0 if it did not)."""
    prefix, suffix = "closed ", f" pages opened by {url}"
    counts = [m[len(prefix) : -len(suffix)] for m in messages if m.endswith(suffix)]
    assert len(counts) <= 1, counts
    return int(counts[0]) if counts else 0


@pytest.mark.parametrize("name", renderers())
def test_a_popup_storm_is_held_off(
    site: HostilePageSite, tmp_path: Path, settings, name: str, caplog
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    caplog.set_level(logging.INFO, logger="core.extractors.browser")
    out = tmp_path / "out"
    pid = shared_browser().pid
    url = site.url("/popups.html")

    output, took = run(name, url, out)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert took < PAGE_TIMEOUT + MARGIN
    # Chromium's popup blocker is on: a window opened without a gesture never opens...
    assert "--disable-popup-blocking" not in " ".join(process_cmdline(pid))
    assert site.asked("/popup?loop") == 0
    assert_next_page_captures(site, tmp_path, browser_pid=pid)  # the visit ends
    # ... and those a timer slipped in (each of Playwright's calls into the page counts as a
    # gesture) were closed as they opened (test_every_window_a_page_opens_is_closed_and_counted
    # counts them exactly).
    if site.asked("/popup"):
        assert closed_pages(caplog.messages, url) > 0


class ClickingDom(DomExtractor):
    """A dom extractor that first clicks the page's button five times, as a reader would (a
    click is a gesture: the popup blocker lets each window open), then waits until the
    browser has closed every page they opened, and notes how many of those were left open
    (the context's pages before the clicks, the captured one among them, are not counted)."""

    pages_left: list[int]

    def capture(self, page, out_dir: Path) -> str:
        before = set(page.context.pages)
        for _ in range(5):
            with page.context.expect_page():
                page.click("#open")
        opened = [other for other in page.context.pages if other not in before]
        deadline = time.monotonic() + 5
        while opened and time.monotonic() < deadline:
            page.wait_for_timeout(50)
            opened = [other for other in page.context.pages if other not in before]
        self.pages_left = [len(opened)]
        return super().capture(page, out_dir)


def test_every_window_a_page_opens_is_closed_and_counted(
    site: HostilePageSite, tmp_path: Path, settings, caplog
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    caplog.set_level(logging.INFO, logger="core.extractors.browser")
    extractor = ClickingDom()
    url = site.url("/opener.html")

    output = extractor.run(SimpleNamespace(url=url), tmp_path)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert extractor.pages_left == [0]
    assert site.asked("/popup?child") == 0  # no window opened by a window that was closed
    close_shared_browser()  # the visit ends: its count is logged
    assert closed_pages(caplog.messages, url) == 5


class CountingDom(DomExtractor):
    """A dom extractor that notes how many pages the context of its page holds."""

    pages_in_context: int

    def capture(self, page, out_dir: Path) -> str:
        self.pages_in_context = len(page.context.pages)
        return super().capture(page, out_dir)


def test_no_window_a_page_opened_is_left_to_the_next_page_of_its_crawl(
    site: HostilePageSite, tmp_path: Path, settings
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    clicking, counting = ClickingDom(), CountingDom()
    url = site.url("/opener.html")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()

    opened = clicking.run(SimpleNamespace(url=url, crawl_id=1, pk=1), first)
    after = counting.run(SimpleNamespace(url=url, crawl_id=1, pk=2), second)

    assert (opened.outcome, after.outcome) == (Outcome.SUCCEEDED, Outcome.SUCCEEDED)
    assert counting.pages_in_context == 2  # the crawl's blank page and this one


# --- 5. downloads --------------------------------------------------------------------------------


def files_holding(marker: bytes, since: float) -> list[Path]:
    """Files changed since ``since`` (a time.time()) under DATA_DIR, the temporary folder and
    ~/Downloads (where Chromium and Playwright would keep a download) whose first 64 KiB hold
    ``marker``. find(1) lists them: the temporary folder holds every earlier test's files, and
    walking them in Python took seconds a call. Raises AssertionError when find fails other than
    on a file that vanished or a folder it may not read, so that no failure reads as none found."""
    roots = (Path(django_settings.DATA_DIR), Path(tempfile.gettempdir()), Path.home() / "Downloads")
    listed = subprocess.run(
        ["find", "-H", *(str(root) for root in roots if root.is_dir()), "-type", "f",
         "-newermt", f"@{since}", "-print0"],
        capture_output=True,
        check=False,
        env={**os.environ, "LC_ALL": "C"},  # its messages in English, as read below
    )  # fmt: skip
    problems = [
        line
        for line in listed.stderr.decode(errors="replace").splitlines()
        if not line.endswith(("No such file or directory", "Permission denied"))
    ]
    assert not problems, problems
    found = []
    for name in filter(None, listed.stdout.split(b"\0")):
        path = Path(os.fsdecode(name))
        try:
            with path.open("rb") as stream:
                if marker in stream.read(64 * 1024):
                    found.append(path)
        except OSError:
            continue  # gone since it was listed, or unreadable
    return found


def assert_no_download_kept(browser: Browser, since: float) -> None:
    """Chromium writes the start of a download to a temporary file before the context refuses
    it, and deletes it: nothing of it is anywhere but in ``browser``'s temporary folder, and
    nothing at all once the browser is closed (since ``since``, a time.time())."""
    for path in files_holding(ATTACHMENT_MARKER, since):
        assert path.is_relative_to(browser.temp_dir)
    close_shared_browser()
    assert files_holding(ATTACHMENT_MARKER, since) == []


@pytest.mark.parametrize("name", renderers())
def test_downloads_a_page_starts_are_refused_and_the_page_captured(
    site: HostilePageSite, tmp_path: Path, settings, name: str, caplog
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    caplog.set_level(logging.INFO, logger="core.extractors.rendering")
    started = time.time()
    out = tmp_path / "out"
    browser = shared_browser()
    url = site.url("/downloads.html")

    output, took = run(name, url, out)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert took < PAGE_TIMEOUT + MARGIN
    if name in ("dom", "singlefile"):
        assert "SCRIPT-RAN" in captured_text(out, output)
    assert f"{name}: refused 2 downloads started by {url}" in caplog.messages
    assert site.asked("/attachment") == 2
    assert site.sent_under("/attachment") < GIB // 16
    assert_next_page_captures(site, tmp_path, browser_pid=browser.pid)
    assert_no_download_kept(browser, started)


MAIN_DOWNLOAD = (Outcome.SKIPPED, "not a page Chromium renders (the URL is a download)")
MAIN_DOWNLOADS = {
    "/attachment": {
        "chromium": MAIN_DOWNLOAD,
        "singlefile": (Outcome.SKIPPED, "not a page Chromium renders (application/zip)"),
    },
    # An HTML page, sent as an attachment: saved by a browser, not shown.
    "/attachment?html": {
        "chromium": MAIN_DOWNLOAD,
        "singlefile": (
            Outcome.SKIPPED,
            "not a page Chromium renders (Content-Disposition: attachment)",
        ),
    },
}


@pytest.mark.parametrize("name", renderers(LOADERS))
@pytest.mark.parametrize("path", list(MAIN_DOWNLOADS))
def test_a_url_that_is_a_download_is_skipped(
    site: HostilePageSite, tmp_path: Path, settings, name: str, path: str
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT  # a refusal, not a deadline, is what ends it
    started = time.time()
    out = tmp_path / "out"
    browser = shared_browser()

    output, took = run(name, site.url(path), out)

    expected = MAIN_DOWNLOADS[path]["singlefile" if name == "singlefile" else "chromium"]
    assert (output.outcome, output.error) == expected
    assert took < PAGE_TIMEOUT + MARGIN
    assert folder_bytes(out) == 0
    # SingleFile's probe of the content type reads at most MAX_DOWNLOAD_BYTES, then deletes it.
    assert site.sent_under("/attachment") < GIB // 16
    assert_next_page_captures(site, tmp_path, browser_pid=browser.pid)
    assert_no_download_kept(browser, started)


def test_temporary_folders_left_by_dead_actors_are_removed() -> None:
    parent = Path(tempfile.gettempdir())
    stale = parent / "vellum-chromium-999999999-abc"  # no such process
    (stale / "org.chromium.Chromium.x").mkdir(parents=True)
    mine = parent / f"vellum-chromium-{os.getpid()}-keep"  # a live process's, not this browser's
    mine.mkdir()

    browser = shared_browser()

    assert not stale.exists()
    assert mine.exists()
    assert browser.temp_dir.parent == parent
    assert (
        f"TMPDIR={browser.temp_dir}".encode() in Path(f"/proc/{browser.pid}/environ").read_bytes()
    )
    mine.rmdir()
    close_shared_browser()
    assert not browser.temp_dir.exists()


# --- 6. redirects to what is not http(s) ---------------------------------------------------------

UNSAFE_REDIRECT = (
    Outcome.FATAL,
    "redirect refused: its target is not an http(s) URL (chromium: ERR_UNSAFE_REDIRECT)",
)
REFUSED_REDIRECTS = {
    # Chromium refuses a redirect to javascript: before it is seen: only that it was aborted.
    "javascript": (
        Outcome.FATAL,
        "nothing to load: an empty answer (HTTP 204) or a redirect to a URL that is not"
        " http(s) (chromium: ERR_ABORTED)",
    ),
    "file": UNSAFE_REDIRECT,
    "data": UNSAFE_REDIRECT,
    # Chromium follows these to its handler of other schemes, which does nothing headless.
    "ftp": (Outcome.FATAL, f"redirect refused: {REDIRECT_TARGETS['ftp']} is not an http(s) URL"),
    "custom": (
        Outcome.FATAL,
        f"redirect refused: {REDIRECT_TARGETS['custom']} is not an http(s) URL",
    ),
}


@pytest.fixture
def xdg_open_log(tmp_path: Path, monkeypatch) -> Path:
    """Where an ``xdg-open`` first on the PATH of the browser started next (each test starts
    without one) writes what it was asked to open: Chromium hands a URL of another scheme to
    it, outside headless mode."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "xdg-open.log"
    opener = folder / "xdg-open"
    opener.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    opener.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.parametrize("name", renderers(LOADERS))
@pytest.mark.parametrize("target", list(REFUSED_REDIRECTS))
def test_a_redirect_of_the_page_to_another_scheme_is_refused(
    site: HostilePageSite, tmp_path: Path, settings, name: str, target: str, xdg_open_log: Path
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT  # a refusal, not a deadline, is what ends it
    out = tmp_path / "out"
    pid = shared_browser().pid

    output, took = run(name, site.url(f"/redirect/{target}"), out)

    assert (output.outcome, output.error) == REFUSED_REDIRECTS[target]
    assert took < PAGE_TIMEOUT + MARGIN
    assert folder_bytes(out) == 0
    assert not xdg_open_log.exists()  # no program was asked to open the URL
    assert_next_page_captures(site, tmp_path, browser_pid=pid)


def readable_forms(data: bytes) -> list[bytes]:
    """``data`` as it would appear in a capture: as it is, base64-encoded at each of the
    three alignments a data: URI may give it, and percent-encoded."""
    forms = [data]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data)[4 if offset else 0 :]
        forms.append(encoded[:-4])  # the last group depends on what follows
    return [*forms, quote(data).encode()]


@pytest.mark.parametrize("name", renderers())
def test_subresources_of_another_scheme_read_nothing_local(
    site: HostilePageSite, tmp_path: Path, settings, name: str
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    out = tmp_path / "out"
    pid = shared_browser().pid

    output, took = run(name, site.url("/subresources.html"), out)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert took < PAGE_TIMEOUT + MARGIN
    captured = captured_bytes(out, output)
    for form in readable_forms(SECRET_LINE):
        assert form not in captured
    if name != "recording":  # its WARC holds the redirects as they came, Location and all
        assert b"REDIRECTED-TO-" not in captured
    if name == "dom":
        fetched = BeautifulSoup(captured, "lxml").find(id="fetched").get_text()
        assert sorted(fetched.split("\n")) == [
            "",
            *sorted(f"{t} refused" for t in REDIRECT_TARGETS),
        ]
    assert_next_page_captures(site, tmp_path, browser_pid=pid)


# --- 7. dialogs in a loop ------------------------------------------------------------------------


@pytest.mark.parametrize("name", renderers())
def test_a_page_that_keeps_asking_is_captured(
    site: HostilePageSite, tmp_path: Path, settings, name: str
) -> None:
    settings.EXTRACTOR_TIMEOUT = PAGE_TIMEOUT
    out = tmp_path / "out"

    output, took = run(name, site.url("/alerts.html"), out)

    assert took < PAGE_TIMEOUT + MARGIN
    # Its dialogs are answered in the page (DIALOG_SCRIPT): none waits on the browser.
    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    if name == "dom":
        assert "ALERTS-DISMISSED" in captured_text(out, output)
    assert_next_page_captures(site, tmp_path, browser_pid=None)


@pytest.mark.parametrize("name", renderers())
def test_a_page_that_asks_forever_times_out(
    site: HostilePageSite, tmp_path: Path, name: str
) -> None:
    # Its alerts are answered in the page (DIALOG_SCRIPT), so its loop never yields: like
    # /busy.html, it must end at the deadline, its renderer or browser killed.
    out = tmp_path / "out"
    first = shared_browser()

    output, took = run(name, site.url("/alerts-forever.html"), out)

    assert (output.outcome, output.error) == timed_out(name)
    assert took < TIMEOUT + MARGIN
    assert nothing_kept(out, name)
    assert_recovered(site, tmp_path, first)


# --- 8. scripts that never return ----------------------------------------------------------------


@pytest.mark.parametrize("name", renderers())
@pytest.mark.parametrize("path", ["/busy.html", "/busy-after-load.html"])
def test_a_script_that_never_returns_times_out_and_the_browser_recovers(
    site: HostilePageSite, tmp_path: Path, name: str, path: str
) -> None:
    out = tmp_path / "out"
    first = shared_browser()

    output, took = run(name, site.url(path), out)

    assert (output.outcome, output.error) == timed_out(name)
    assert took < TIMEOUT + MARGIN
    assert nothing_kept(out, name)
    # The hung renderer is closed with its page, or the browser is killed with it.
    assert_recovered(site, tmp_path, first)
