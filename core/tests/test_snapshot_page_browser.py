"""The snapshot page in Chromium (issue 20): a page of core/tests/counted_site.py archived by the
real pipeline (wget, the browser's captures, SingleFile, readability, media, headers, then
finalizing and its WACZ), opened on Vellum by a signed-in reader.

Each tab shows its output (a screenshot of each is saved as
test-artifacts/snapshot-page/<tab>.png, or under $VELLUM_TEST_ARTIFACTS), and while every output
is looked at, the archived site's servers count the requests they get: none. The page's own
requisites still load from the archive (the photo in wget's copy has its width).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from archive.testing import artifact_path
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.browser import close_shared_browser
from core.folder.wacz import WACZ_NAME
from core.models import Snapshot
from core.services.crawls import crawl_create
from core.tests.counted_site import (
    HEADING,
    PHOTO_SIZE,
    WORDS,
    CountingServer,
    counted_site,
    elsewhere_server,
    put_back,
)
from core.tests.pipeline import archive_crawl
from core.tests.test_isolation import staff_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EXTRACTORS = [
    "headers", "wget", "title", "htmltotext", "screenshot", "pdf", "dom", "singlefile",
    "recording", "readability", "media",
]  # fmt: skip
REPLAY_TIMEOUT_MS = 60_000  # ReplayWeb.page's first start on a loaded machine


@pytest.fixture
def servers() -> Iterator[tuple[CountingServer, CountingServer]]:
    """The archived site and the server of the image no capture saved, both counting."""
    elsewhere = elsewhere_server().start()
    site = counted_site(elsewhere.url("").rstrip("/")).start()
    yield site, elsewhere
    site.stop()
    elsewhere.stop()


@pytest.fixture
def archived(settings, tmp_path: Path, servers) -> Iterator[Snapshot]:
    """``/page.html`` of the counted site, archived and sealed in a DATA_DIR of its own."""
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.EXTRACTORS = EXTRACTORS
    close_shared_browser()  # one of this DATA_DIR's own
    site, _elsewhere = servers
    crawl = archive_crawl(crawl_create(data=site.url("/page.html").encode(), source_name="u.txt"))
    close_shared_browser()
    snapshot = Snapshot.objects.for_crawl(crawl).get()
    results = {result.extractor: result for result in snapshot.results.all()}
    assert snapshot.status == SnapshotStatus.SEALED
    assert {name: r.status for name, r in results.items()} == dict.fromkeys(
        EXTRACTORS, ResultStatus.SUCCEEDED
    ), {name: r.error for name, r in results.items()}
    assert (snapshot.output_dir / WACZ_NAME).is_file()
    yield snapshot


# An image's natural width once it has loaded or failed (0: it did not load).
LOADED_WIDTH = """(img) => img.complete ? img.naturalWidth : new Promise((done) => {
    img.addEventListener("load", () => done(img.naturalWidth));
    img.addEventListener("error", () => done(0));
})"""


# A video's readyState once it has its metadata, -1 if it failed, 0 if nothing came in 10 s.
METADATA = """(video) => video.readyState > 0 ? video.readyState : new Promise((done) => {
    video.addEventListener("loadedmetadata", () => done(video.readyState));
    video.addEventListener("error", () => done(-1));
    setTimeout(() => done(video.readyState), 10000);
})"""


def open_tab(page, label: str, view: str):
    """Click the tab ``label``, wait for the page of ``?view=<view>``; return the locator of
    its viewer's frame (FrameLocator)."""
    page.get_by_role("link", name=label, exact=True).click()
    page.wait_for_url(f"**?view={view}")
    return page.frame_locator("iframe.page")


def test_every_tab_shows_its_output_and_nothing_reaches_the_live_site(
    live_server, archived: Snapshot, servers
) -> None:
    """Every output is looked at in Chromium, the replay too (in its own tab), while the
    archived site and the server of the image no capture saved count requests: none."""
    from playwright.sync_api import expect

    site, elsewhere = servers
    put_back(elsewhere)  # the live web now has what the capture lacks: asking for it would count
    site.forget()
    elsewhere.forget()
    page_url = f"{live_server.url}/snapshot/{archived.pk}/"
    shot = lambda page, name: page.screenshot(path=artifact_path(f"snapshot-page/{name}.png"))  # noqa: E731
    seen: dict[str, object] = {}
    with staff_browser(live_server) as (context, _session):
        page = context.new_page()
        page.set_viewport_size({"width": 1280, "height": 860})

        page.goto(page_url)  # the page opens on SingleFile's copy of the page
        expect(page.locator(".tabs [aria-current=page]")).to_have_text("SingleFile")
        frame = page.frame_locator("iframe.page")
        expect(frame.locator("h1")).to_have_text(HEADING)
        seen["singlefile photo"] = frame.locator("#photo").evaluate(LOADED_WIDTH)
        shot(page, "singlefile")

        frame = open_tab(page, "wget", "wget")
        expect(frame.locator("h1")).to_have_text(HEADING)
        seen["wget video"] = frame.locator("#clip").evaluate(METADATA)
        seen["wget photo"] = frame.locator("#photo").evaluate(LOADED_WIDTH)
        seen["wget style"] = frame.locator("h1").evaluate("(h1) => getComputedStyle(h1).color")
        seen["wget never saved"] = frame.locator("#elsewhere").evaluate(LOADED_WIDTH)
        shot(page, "wget")

        open_tab(page, "Screenshot", "screenshot")
        shown = page.locator("#view img.page")
        expect(shown).to_be_visible()
        seen["screenshot"] = shown.evaluate(LOADED_WIDTH)
        shot(page, "screenshot")

        with page.expect_response(lambda r: "/pdf/output.pdf" in r.url) as pdf:
            open_tab(page, "PDF", "pdf")
        seen["pdf"] = (pdf.value.status, pdf.value.headers["content-type"])
        page.wait_for_timeout(1500)  # Chromium's PDF viewer starts in the frame and draws
        seen["pdf viewer"] = any(f.url.startswith("chrome-extension://") for f in page.frames)
        shot(page, "pdf")

        frame = open_tab(page, "Article", "article")
        expect(frame.locator("body")).to_contain_text(WORDS)
        shot(page, "article")

        frame = open_tab(page, "Text", "text")
        expect(frame.locator("body")).to_contain_text(WORDS)
        shot(page, "text")

        open_tab(page, "Media", "media")
        video = page.locator("#view video")
        seen["media"] = (video.evaluate(METADATA), video.evaluate("(video) => video.duration"))
        shot(page, "media")

        open_tab(page, "Headers", "headers")
        expect(page.locator("table.headers")).to_contain_text("text/html; charset=utf-8")
        shot(page, "headers")

        open_tab(page, "Files", "files")
        for extractor in EXTRACTORS:
            expect(page.locator(f"section.output#{extractor} .mark.succeeded")).to_be_visible()
        seen["files missing"] = page.locator("section.output#wget details.missing").inner_text()
        shot(page, "files")

        open_tab(page, "Replay", "replay")
        expect(page.locator("#view img.page")).to_be_visible()  # the screenshot, meanwhile
        shot(page, "replay-tab")
        with context.expect_page() as opened:
            page.get_by_role("link", name="Open the replay").click()
        replay = opened.value
        replayed = replay.frame_locator("replay-web-page iframe").frame_locator("iframe")
        expect(replayed.locator("h1")).to_have_text(HEADING, timeout=REPLAY_TIMEOUT_MS)
        expect(replayed.locator("#late")).to_be_attached()  # its script ran, on the replay host
        replay.wait_for_timeout(1500)  # whatever the replayed page still asks for
        shot(replay, "replay")

    width = PHOTO_SIZE[0]
    assert seen["singlefile photo"] == width
    assert seen["wget photo"] == width  # wget's own requisites load from the archive
    assert seen["wget style"] == "rgb(128, 32, 32)"
    assert seen["wget video"] > 0
    assert seen["wget never saved"] == 0  # what it lacks is not fetched from the live web
    assert seen["screenshot"] == 1280
    assert seen["pdf"] == (200, "application/pdf") and seen["pdf viewer"]
    ready, duration = seen["media"]
    assert ready > 0 and duration > 0
    assert "/img/absent.png: HTTP 404" in seen["files missing"]
    assert site.requests == []
    assert elsewhere.requests == []
