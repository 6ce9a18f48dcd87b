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


def frame_of(page):
    """The document of the viewer's frame (a Playwright Frame)."""
    return page.locator("iframe.page").element_handle().content_frame()


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
        frame = frame_of(page)
        expect(frame.locator("h1")).to_have_text(HEADING)
        seen["singlefile photo"] = frame.locator("#photo").evaluate("(img) => img.naturalWidth")
        shot(page, "singlefile")

        page.get_by_role("link", name="wget", exact=True).click()
        frame = frame_of(page)
        expect(frame.locator("h1")).to_have_text(HEADING)
        frame.locator("#clip").evaluate(
            "(video) => video.readyState > 0 || new Promise((ok) => video.onloadedmetadata = ok)"
        )
        seen["wget photo"] = frame.locator("#photo").evaluate("(img) => img.naturalWidth")
        seen["wget style"] = frame.locator("h1").evaluate("(h1) => getComputedStyle(h1).color")
        seen["wget never saved"] = frame.locator("#elsewhere").evaluate("(i) => i.naturalWidth")
        shot(page, "wget")

        page.get_by_role("link", name="Screenshot").click()
        shown = page.locator("#view img.page")
        expect(shown).to_be_visible()
        seen["screenshot"] = shown.evaluate("(img) => img.naturalWidth")
        shot(page, "screenshot")

        with page.expect_response(lambda r: "/pdf/output.pdf" in r.url) as pdf:
            page.get_by_role("link", name="PDF").click()
        seen["pdf"] = (pdf.value.status, pdf.value.headers["content-type"])
        page.wait_for_timeout(1500)  # Chromium's PDF viewer starts in the frame and draws
        seen["pdf viewer"] = any(f.url.startswith("chrome-extension://") for f in page.frames)
        shot(page, "pdf")

        page.get_by_role("link", name="Article").click()
        expect(frame_of(page).locator("body")).to_contain_text(WORDS)
        shot(page, "article")

        page.get_by_role("link", name="Text", exact=True).click()
        expect(frame_of(page).locator("body")).to_contain_text(WORDS)
        shot(page, "text")

        page.get_by_role("link", name="Media").click()
        video = page.locator("#view video")
        seen["media"] = video.evaluate(
            "(v) => new Promise((ok) => v.readyState > 0 ? ok(v.duration)"
            " : v.addEventListener('loadedmetadata', () => ok(v.duration)))"
        )
        shot(page, "media")

        page.get_by_role("link", name="Headers").click()
        expect(page.locator("table.headers")).to_contain_text("text/html; charset=utf-8")
        shot(page, "headers")

        page.get_by_role("link", name="Files").click()
        for extractor in EXTRACTORS:
            expect(page.locator(f"section.output#{extractor} .mark.succeeded")).to_be_visible()
        seen["files missing"] = page.locator("section.output#wget details.missing").inner_text()
        shot(page, "files")

        page.get_by_role("link", name="Replay", exact=True).click()
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
    assert seen["wget never saved"] == 0  # what it lacks is not fetched from the live web
    assert seen["screenshot"] == 1280
    assert seen["pdf"] == (200, "application/pdf") and seen["pdf viewer"]
    assert seen["media"] > 0
    assert "/img/absent.png: HTTP 404" in seen["files missing"]
    assert site.requests == []
    assert elsewhere.requests == []
