"""The extractors that render pages in the shared Chromium (screenshot, pdf, dom, singlefile),
and the shared browser itself: reuse, restarts, deadlines and no Chromium left behind.

Everything runs the real Debian Chromium against the live test site on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup
from django.conf import settings as django_settings
from PIL import Image, ImageChops

from archive.testing import chromium_pids, process_cmdline, unused_port, wait_until
from core.extractors import browser as browser_module
from core.extractors.base import Extractor, ExtractorOutput
from core.extractors.browser import CHROMIUM_FLAGS, close_shared_browser, shared_browser
from core.extractors.dom import DomExtractor
from core.extractors.errors import Outcome
from core.extractors.pdf import PdfExtractor
from core.extractors.screenshot import ScreenshotExtractor
from core.extractors.singlefile import (
    BUNDLE_CACHE_DIR,
    STALE_PARTIAL_SECONDS,
    SingleFileExtractor,
    singlefile_bundle,
)
from core.tests.site import BACKGROUND_PNG, RETRY_AFTER_SECONDS, LiveSite

pytestmark = pytest.mark.browser

RENDERING = (ScreenshotExtractor, PdfExtractor, DomExtractor, SingleFileExtractor)
STYLE_BLUE = (30, 30, 200)  # the colour of the test site's background image, static/bg.png


@pytest.fixture(autouse=True)
def _no_chromium_left(request):
    """Each test starts without a browser and must leave no Chromium process behind."""
    close_shared_browser()
    yield
    close_shared_browser()
    assert wait_until(lambda: not ours()), [process_cmdline(pid)[:2] for pid in ours()]


def ours() -> set[int]:
    """This test session's Chromium processes (other test runs may have theirs)."""
    return chromium_pids(django_settings.DATA_DIR)


def run(extractor: Extractor, url: str, out_dir: Path) -> ExtractorOutput:
    out_dir.mkdir(parents=True, exist_ok=True)
    return extractor.run(SimpleNamespace(url=url), out_dir)


def test_the_flags_keep_chromium_quiet() -> None:
    for flag in (
        "--headless",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-component-update",
        "--disable-quic",
    ):
        assert flag in CHROMIUM_FLAGS


def test_screenshot_is_a_png_of_the_whole_page(live_site: LiveSite, tmp_path: Path) -> None:
    output = run(ScreenshotExtractor(), live_site.url("/"), tmp_path)

    assert (output.outcome, output.output, output.error) == (
        Outcome.SUCCEEDED,
        "screenshot.png",
        "",
    )
    assert output.cmd_version.startswith("Chromium ")
    assert output.cmd[0].endswith("chromium") and output.cmd[-1] == live_site.url("/")
    with Image.open(tmp_path / "screenshot.png") as image:
        assert image.format == "PNG"
        assert image.width == 1280 and image.height >= 800
        colours = image.convert("RGB").getcolors(maxcolors=image.width * image.height)
    by_count = sorted(colours, reverse=True)
    # The stylesheet's tiled background fills the page; the heading and text are drawn on it.
    assert by_count[0][1] == STYLE_BLUE
    assert len(by_count) > 10  # text antialiasing: far more than one flat colour
    assert BACKGROUND_PNG  # the colour above comes from this image, served by the site


def test_a_screenshot_encoded_for_speed_has_the_same_pixels_in_more_bytes(
    live_site: LiveSite, tmp_path: Path, settings
) -> None:
    shots = {}
    for fast in (False, True):
        settings.SCREENSHOT_OPTIMIZE_FOR_SPEED = fast
        output = run(ScreenshotExtractor(), live_site.url("/"), tmp_path / str(fast))
        assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
        shots[fast] = tmp_path / str(fast) / output.output

    with Image.open(shots[True]) as fast, Image.open(shots[False]) as small:
        assert fast.format == "PNG" and fast.size == small.size
        assert ImageChops.difference(fast.convert("RGB"), small.convert("RGB")).getbbox() is None
    assert shots[True].stat().st_size > shots[False].stat().st_size  # Chromium did as told


def test_pdf_opens_and_holds_the_page_text(live_site: LiveSite, tmp_path: Path) -> None:
    output = run(PdfExtractor(), live_site.url("/"), tmp_path)

    assert (output.outcome, output.output) == (Outcome.SUCCEEDED, "output.pdf")
    info = subprocess.run(["pdfinfo", str(tmp_path / "output.pdf")], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    assert re.search(r"^Pages:\s+1$", info.stdout, re.MULTILINE)
    assert re.search(r"^Page size:.*\(A4\)$", info.stdout, re.MULTILINE)
    text = subprocess.run(
        ["pdftotext", str(tmp_path / "output.pdf"), "-"], capture_output=True, text=True
    ).stdout
    assert "Welcome to the Vellum test site" in text


def test_dom_holds_what_scripts_added_and_fetched(live_site: LiveSite, tmp_path: Path) -> None:
    output = run(DomExtractor(), live_site.url("/rendered.html"), tmp_path)

    assert (output.outcome, output.output) == (Outcome.SUCCEEDED, "output.html")
    dom = BeautifulSoup((tmp_path / "output.html").read_text(encoding="utf-8"), "lxml")
    assert dom.find(id="added-by-script").get_text() == "Written by JavaScript"
    # Added 300 ms after load, once a fetch answered: the capture waited for the network.
    assert dom.find(id="fetched-by-script").get_text() == "Fetched: world"


def test_dom_of_a_latin1_page_is_utf8_with_a_byte_order_mark(
    live_site: LiveSite, tmp_path: Path
) -> None:
    output = run(DomExtractor(), live_site.url("/latin1.html"), tmp_path)

    data = (tmp_path / output.output).read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")  # wins over the page's own <meta charset>
    assert "A na\u00efve caf\u00e9 page." in data.decode("utf-8-sig")


def test_singlefile_output_is_self_contained(live_site: LiveSite, tmp_path: Path) -> None:
    output = run(SingleFileExtractor(), live_site.url("/"), tmp_path)

    assert (output.outcome, output.output, output.error) == (
        Outcome.SUCCEEDED,
        "singlefile.html",
        "",
    )
    assert output.cmd_version == "2.0.83"  # package.json pins it
    assert not any(
        part.startswith(("--browser-server", "--remote-debugging-port")) for part in output.cmd
    )
    html = (tmp_path / "singlefile.html").read_text(encoding="utf-8")
    page = BeautifulSoup(html, "lxml")
    assert page.h1.get_text() == "Welcome to the Vellum test site"
    references = [tag.get("src") for tag in page.find_all(src=True)]
    references += [
        tag["href"] for tag in page.find_all("link", href=True) if tag.get("rel") != ["canonical"]
    ]
    assert references, "the page's image and icon are in the file"
    assert all(reference.startswith("data:") for reference in references), references
    assert "static/bg.png" not in html and "style.css" not in html  # the stylesheet is inlined
    assert "url(data:image/png;base64," in html
    assert not list(tmp_path.glob(".singlefile*"))  # the JSON it came in is gone


def test_singlefile_sees_what_scripts_added(live_site: LiveSite, tmp_path: Path) -> None:
    output = run(SingleFileExtractor(), live_site.url("/rendered.html"), tmp_path)

    page = BeautifulSoup((tmp_path / output.output).read_text(encoding="utf-8"), "lxml")
    assert page.find(id="added-by-script").get_text() == "Written by JavaScript"


@pytest.mark.parametrize("extractor_class", RENDERING)
def test_404_is_fatal(extractor_class, live_site: LiveSite, tmp_path: Path) -> None:
    output = run(extractor_class(), live_site.url("/missing.html"), tmp_path)

    assert output.outcome is Outcome.FATAL
    assert output.error == f"HTTP 404 from {live_site.url('/missing.html')}"


@pytest.mark.parametrize("extractor_class", (ScreenshotExtractor, PdfExtractor, DomExtractor))
def test_503_is_temporary_with_retry_after(extractor_class, live_site, tmp_path: Path) -> None:
    output = run(extractor_class(), live_site.url("/server-error"), tmp_path)

    assert output.outcome is Outcome.TEMPORARY
    assert (output.http_status, output.retry_after) == (503, RETRY_AFTER_SECONDS)


@pytest.mark.parametrize("extractor_class", RENDERING)
def test_refused_connection_is_temporary(extractor_class, tmp_path: Path) -> None:
    output = run(extractor_class(), f"http://127.0.0.1:{unused_port()}/", tmp_path)

    # Chromium asks the egress proxy, which could not connect: the error says what it met.
    assert output.outcome is Outcome.TEMPORARY
    assert output.error.startswith("network error: ")
    assert "Connection refused" in output.error


def test_a_pdf_url_is_skipped_as_a_download(live_site: LiveSite, tmp_path: Path) -> None:
    output = run(ScreenshotExtractor(), live_site.url("/document.pdf"), tmp_path)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "not a page Chromium renders (application/pdf)"
    assert not list(tmp_path.iterdir())


def test_singlefile_retries_a_page_whose_document_went_away(
    live_site: LiveSite, tmp_path: Path
) -> None:
    # Under load SingleFile has said "no document" of an HTML page (CI, 50 pages at once): the
    # probe finds a page Chromium renders, so the result is retried instead of skipped for good.
    outcome, error = SingleFileExtractor()._no_document(live_site.url("/"), tmp_path)

    assert outcome is Outcome.TEMPORARY
    assert "no document" in error
    assert not list(tmp_path.iterdir())


def test_an_image_url_is_rendered(live_site: LiveSite, tmp_path: Path) -> None:
    output = run(ScreenshotExtractor(), live_site.url("/static/pixel.png"), tmp_path)

    assert output.outcome is Outcome.SUCCEEDED
    with Image.open(tmp_path / "screenshot.png") as image:
        assert image.format == "PNG"


def test_a_page_past_its_deadline_times_out_and_the_next_page_works(
    live_site: LiveSite, tmp_path: Path, settings
) -> None:
    settings.EXTRACTOR_OPTIONS = {"dom": {"timeout": 3}}

    started = time.monotonic()
    output = run(DomExtractor(), live_site.url("/hung.html"), tmp_path / "hung")
    took = time.monotonic() - started

    assert (output.outcome, output.error) == (Outcome.TEMPORARY, "chromium timed out after 3 s")
    assert took < 3 + 10
    after = run(DomExtractor(), live_site.url("/page2.html"), tmp_path / "next")
    assert after.outcome is Outcome.SUCCEEDED


def test_one_browser_serves_every_page_of_an_actor(live_site: LiveSite, tmp_path: Path) -> None:
    first = shared_browser()
    for index, extractor_class in enumerate((ScreenshotExtractor, PdfExtractor, DomExtractor)):
        output = run(extractor_class(), live_site.url("/"), tmp_path / str(index))
        assert output.outcome is Outcome.SUCCEEDED

    assert shared_browser() is first
    assert first.pages == 1  # one load: the pdf and the dom captured the screenshot's page
    assert first.pid in ours()


def test_the_browser_restarts_after_its_page_quota(
    live_site: LiveSite, tmp_path: Path, settings
) -> None:
    settings.CHROMIUM_RESTART_PAGES = 2
    first = shared_browser()
    first_pid = first.pid
    run(DomExtractor(), live_site.url("/"), tmp_path / "a")
    run(DomExtractor(), live_site.url("/page2.html"), tmp_path / "b")

    output = run(DomExtractor(), live_site.url("/page3.html"), tmp_path / "c")

    assert output.outcome is Outcome.SUCCEEDED
    assert shared_browser() is not first
    assert wait_until(lambda: first_pid not in ours())
    assert not first.user_data_dir.exists()  # its profile folder went with it


def test_a_crashed_browser_is_replaced(live_site: LiveSite, tmp_path: Path) -> None:
    first = shared_browser()
    os.killpg(first.pid, signal.SIGKILL)
    assert wait_until(lambda: not first.alive)

    output = run(ScreenshotExtractor(), live_site.url("/"), tmp_path)

    assert output.outcome is Outcome.SUCCEEDED
    assert shared_browser() is not first


def test_a_browser_killed_at_a_deadline_is_replaced_by_the_next_capture(
    live_site: LiveSite, tmp_path: Path
) -> None:
    # No wait between the kill and the next capture, as in an actor: for a moment after SIGKILL
    # Chromium's process still runs and Playwright's connection still reads as connected.
    first = shared_browser()
    first.kill()
    assert not first.alive  # at once

    output = run(DomExtractor(), live_site.url("/"), tmp_path)

    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert shared_browser() is not first


def test_chromium_missing_is_skipped(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("core.extractors.process.PROJECT_BIN_DIRS", ())

    for extractor_class in RENDERING:
        extractor = extractor_class()
        assert extractor.should_run(SimpleNamespace(url="http://127.0.0.1/")) == (
            False,
            f"{extractor.binaries[0]} not found",
        )
    with pytest.raises(LookupError, match="chromium not found"):
        shared_browser()


KILLED_ACTOR = """
import os, sys, time
import django
django.setup()
from core.extractors.browser import shared_browser
browser = shared_browser()
print(browser.pid, flush=True)
time.sleep(60)
"""


def test_a_killed_actor_leaves_no_chromium_behind() -> None:
    """SIGKILL gives the actor no chance to close its browser: the kernel's parent-death
    signal (setpriv --pdeathsig) stops Chromium, and its helpers follow it."""
    actor = subprocess.Popen(
        [sys.executable, "-c", KILLED_ACTOR],
        cwd=django_settings.BASE_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        browser_pid = int(actor.stdout.readline())
        assert wait_until(lambda: len(ours()) >= 2)  # the browser and its helpers
        assert browser_pid in ours()
    finally:
        actor.kill()
        actor.wait()

    assert wait_until(lambda: not ours()), [process_cmdline(pid)[:2] for pid in ours()]


def test_binaries_report_lists_the_browser_extractors() -> None:
    from core.extractors.binaries import binaries_report

    report = {entry.name: entry for entry in binaries_report()}

    for name in ("screenshot", "pdf", "dom"):
        (chromium,) = report[name].binaries
        assert chromium.name == "chromium" and chromium.path and "Chromium" in chromium.version
    single_file, chromium = report["singlefile"].binaries
    assert single_file.path.endswith("node_modules/.bin/single-file")
    assert (
        single_file.version
        == json.loads((Path(django_settings.BASE_DIR) / "package.json").read_text())[
            "dependencies"
        ]["single-file-cli"]
    )


@pytest.mark.django_db
def test_the_database_works_in_a_process_with_a_browser(
    live_site: LiveSite, tmp_path: Path
) -> None:
    """Playwright's loop lives in the browser's own thread: Django refuses database calls in a
    thread that runs an asyncio loop (SynchronousOnlyOperation), and an actor makes both."""
    from crawls.models import Crawl

    output = run(DomExtractor(), live_site.url("/"), tmp_path)

    assert output.outcome is Outcome.SUCCEEDED
    assert Crawl.objects.count() == 0


def test_each_page_sends_the_extractors_user_agent(
    live_site: LiveSite, tmp_path: Path, settings
) -> None:
    settings.EXTRACTOR_OPTIONS = {"dom": {"user_agent": "VellumDom/1"}}

    dom = run(DomExtractor(), live_site.url("/echo-headers"), tmp_path / "dom")
    singlefile = run(SingleFileExtractor(), live_site.url("/echo-headers"), tmp_path / "sf")

    assert "<title>VellumDom/1</title>" in (tmp_path / "dom" / dom.output).read_text()
    page = (tmp_path / "sf" / singlefile.output).read_text()
    assert f"<li>User-Agent: {settings.USER_AGENT}<" in page  # the others keep USER_AGENT


def test_profiles_left_by_dead_actors_are_removed() -> None:
    tmp = Path(django_settings.DATA_DIR) / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    stale = tmp / "chromium-999999999-abc"  # no such process
    (stale / "Default").mkdir(parents=True)
    mine = tmp / f"chromium-{os.getpid()}-keep"  # a live process's, not this browser's
    mine.mkdir()

    browser = shared_browser()

    assert not stale.exists()
    assert mine.exists()
    assert browser.user_data_dir.parent == tmp
    mine.rmdir()


def visit_of(dom_file: Path) -> str:
    page = BeautifulSoup(dom_file.read_text(encoding="utf-8"), "lxml")
    return page.find(id="added-by-script")["data-visit"]


def test_captures_of_one_url_in_a_row_share_one_visit(
    live_site: LiveSite, tmp_path: Path, settings, monkeypatch
) -> None:
    url = live_site.url("/rendered.html")
    first = run(DomExtractor(), url, tmp_path / "1")
    assert run(ScreenshotExtractor(), url, tmp_path / "shot").outcome is Outcome.SUCCEEDED
    second = run(DomExtractor(), url, tmp_path / "2")
    settings.EXTRACTOR_OPTIONS = {"dom": {"user_agent": "Another/1"}}
    other_agent = run(DomExtractor(), url, tmp_path / "3")
    monkeypatch.setattr(browser_module, "VISIT_REUSE_SECONDS", -1)
    expired = run(DomExtractor(), url, tmp_path / "4")

    visits = [
        visit_of(tmp_path / n / o.output)
        for n, o in zip("1234", (first, second, other_agent, expired), strict=True)
    ]
    assert visits[0] == visits[1]  # the page was loaded once for both, the screenshot between
    assert len(set(visits)) == 3  # another user agent, or too late: a fresh visit each
    assert shared_browser().pages == 3  # loads counted, not captures


def test_a_failed_capture_does_not_leave_its_visit_for_the_next(
    live_site: LiveSite, tmp_path: Path
) -> None:
    url = live_site.url("/rendered.html")
    run(DomExtractor(), url, tmp_path / "1")
    browser = shared_browser()

    class Broken(DomExtractor):
        def capture(self, page, out_dir: Path) -> str:
            raise browser_module.BrowserUnavailable("capture failed on purpose")

    with pytest.raises(browser_module.BrowserUnavailable):
        run(Broken(), url, tmp_path / "broken")
    again = run(DomExtractor(), url, tmp_path / "2")

    assert visit_of(tmp_path / "1" / "output.html") != visit_of(tmp_path / "2" / again.output)
    assert shared_browser() is browser


def listening_inodes() -> set[str]:
    """The socket inodes of every TCP socket in LISTEN state (state 0A), IPv4 and IPv6."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                inodes.add(fields[9])
    return inodes


def socket_inodes(pid: int) -> set[str]:
    """The socket inodes ``pid`` holds open (its /proc/<pid>/fd links "socket:[inode]")."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def test_the_browser_listens_on_no_tcp_port(live_site: LiveSite, tmp_path: Path) -> None:
    """DevTools goes over Playwright's pipe: no process of the machine can drive the browser."""
    output = run(DomExtractor(), live_site.url("/"), tmp_path)
    browser = shared_browser()

    assert output.outcome is Outcome.SUCCEEDED
    cmdline = process_cmdline(browser.pid)
    assert "--remote-debugging-pipe" in cmdline
    assert not [arg for arg in cmdline if arg.startswith("--remote-debugging-port")]
    assert not (browser.user_data_dir / "DevToolsActivePort").exists()
    assert len(ours()) >= 2  # the browser and its helpers, all checked below
    listening = listening_inodes()
    assert listening  # the live site listens: the check can see a listening socket
    for pid in ours():
        assert not socket_inodes(pid) & listening, process_cmdline(pid)[:2]


@pytest.mark.parametrize(("euid", "flagged"), [(0, True), (1000, False)])
def test_the_sandbox_is_off_only_for_root(monkeypatch, euid: int, flagged: bool) -> None:
    monkeypatch.setattr(browser_module.os, "geteuid", lambda: euid)

    command = browser_module.chromium_command("/usr/bin/chromium", Path("/tmp/profile"))

    assert browser_module.sandboxed() is not flagged
    assert ("--no-sandbox" in command) is flagged


def test_the_running_browser_has_its_sandbox_unless_root() -> None:
    browser = shared_browser()

    assert ("--no-sandbox" in process_cmdline(browser.pid)) is (os.geteuid() == 0)


def test_singlefile_keeps_what_shows_only_after_the_reader_acts(
    live_site: LiveSite, tmp_path: Path
) -> None:
    output = run(SingleFileExtractor(), live_site.url("/interactive.html"), tmp_path)

    html = (tmp_path / output.output).read_text(encoding="utf-8")
    page = BeautifulSoup(html, "lxml")
    assert page.select_one("nav .menu li").get_text() == "Shown on hover"  # hidden at load
    assert ".opened" in html  # a rule no element matches at load
    assert '"Opened Font"' in html  # the font only that rule uses, inlined
    assert "/static/opened.woff2" not in html and "data:font/woff2;base64," in html
    assert '<ul class="menu">' in html  # the markup as written (compressed, it loses quotes)


def test_singlefile_bundle_is_exported_once_and_kept(tmp_path: Path, settings, request) -> None:
    settings.DATA_DIR = str(tmp_path)
    single_file = SingleFileExtractor().binary_path("single-file")
    singlefile_bundle.cache_clear()
    request.addfinalizer(singlefile_bundle.cache_clear)  # later tests ask node or their cache
    exported = singlefile_bundle(single_file)
    (kept,) = (tmp_path / BUNDLE_CACHE_DIR).iterdir()
    assert json.loads(kept.read_text()) == exported
    assert exported["options"]["removeHiddenElements"] is False  # CLI_OPTIONS were applied

    # A later process reads what was kept, without node: what it finds there is what it uses.
    kept.write_text(json.dumps({**exported, "options": {"marker": 1}}))
    singlefile_bundle.cache_clear()
    assert singlefile_bundle(single_file)["options"] == {"marker": 1}

    # A kept file that cannot be read (cut short, or of another shape) is exported again; what
    # another package's export or a killed writer left beside it is removed, not a partial file
    # another process may still be writing.
    left = {name: kept.parent / name for name in ("0" * 32 + ".json", ".tmp-old", ".tmp-new")}
    for path in left.values():
        path.write_text("{}")
    long_ago = time.time() - STALE_PARTIAL_SECONDS - 1
    os.utime(left[".tmp-old"], (long_ago, long_ago))
    for broken in ('{"options": {', '{"options": null, "script": ""}'):
        kept.write_text(broken)
        singlefile_bundle.cache_clear()
        assert singlefile_bundle(single_file) == exported
        assert json.loads(kept.read_text()) == exported
    assert sorted(path.name for path in kept.parent.iterdir()) == [".tmp-new", kept.name]
