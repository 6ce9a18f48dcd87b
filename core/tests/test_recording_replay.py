"""Pages that build themselves with scripts replay from their WACZ (issue 18): each page of
core/tests/difficult_site.py is archived through the real pipeline (a crawl ticked in this
process: wget, title, htmltotext, screenshot and the browser's recording, then finalizing and
its WACZ), the site is stopped so that nothing can come from the live web, and each snapshot is
opened in Chromium through the app and ReplayWeb.page, where its markers must show.

The replayed SPA and @import page are saved as test-artifacts/replay/recording-spa.png and
recording-import.png to look at (and a page that does not replay as recording-<page>-failed.png).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from archive.testing import artifact_path
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.browser import close_shared_browser
from core.folder.wacz import WACZ_NAME
from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_create, crawl_tick
from core.services.results import result_tick
from core.services.snapshots import snapshot_tick
from core.tests.difficult_site import FONT_FAMILY, PAGES, DifficultSite
from core.tests.test_isolation import staff_browser
from core.tests.test_replay_theft import open_replay, replayed
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EXTRACTORS = ["wget", "title", "htmltotext", "screenshot", "recording"]
REPLAYED = ("spa", "post", "infinite", "import", "observer", "lazy", "frames")
REPLAY_TIMEOUT_MS = 60_000  # ReplayWeb.page's first start (service worker, WACZ index)


@pytest.fixture
def own_data_dir(settings, tmp_path: Path) -> Iterator[None]:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.EXTRACTORS = EXTRACTORS
    close_shared_browser()  # one of this DATA_DIR's own
    yield
    close_shared_browser()


def archive_crawl(crawl: Crawl) -> Crawl:
    """Tick ``crawl``, its snapshots and their results in this process until it is sealed."""
    for _ in range(40):
        crawl = Crawl.objects.get(pk=crawl.pk)
        if crawl.status == CrawlStatus.SEALED:
            return crawl
        crawl_tick(crawl=crawl)
        for snapshot in Snapshot.objects.for_crawl(crawl).active():
            snapshot_tick(snapshot=snapshot)
        for result in ArchiveResult.objects.filter(snapshot__crawl=crawl).active():
            result_tick(result=result)
    raise AssertionError(f"crawl {crawl.pk} did not finish: {crawl.status}")


def archived(site: DifficultSite, key: str) -> Snapshot:
    """Archive the page ``key`` of PAGES in a crawl of its own; return its sealed snapshot."""
    url = site.url(PAGES[key].path)
    crawl = archive_crawl(crawl_create(data=url.encode(), source_name="urls.txt"))
    snapshot = Snapshot.objects.for_crawl(crawl).get()
    results = {result.extractor: result for result in snapshot.results.all()}
    assert snapshot.status == SnapshotStatus.SEALED
    assert {name: r.status for name, r in results.items()} == dict.fromkeys(
        EXTRACTORS, ResultStatus.SUCCEEDED
    ), {name: r.error for name, r in results.items()}
    assert (snapshot.output_dir / WACZ_NAME).is_file()
    return snapshot


def font_and_background(frame) -> dict:
    """In the replayed frame: the marker font's status, and the HTTP status of each fetch of
    the hero's background image (Resource Timing's responseStatus)."""
    return frame.locator("#hero").evaluate(
        """(hero) => ({
            fonts: [...document.fonts].filter((face) => face.family.includes(FAMILY))
                                      .map((face) => face.status),
            background: getComputedStyle(hero).backgroundImage,
            fetched: performance.getEntriesByType("resource")
                .filter((entry) => entry.name.includes("/img/hero.png"))
                .map((entry) => entry.responseStatus),
        })""".replace("FAMILY", repr(FONT_FAMILY))
    )


def test_scripted_pages_replay_from_the_browsers_recording(own_data_dir, live_server) -> None:
    from playwright.sync_api import expect

    site = DifficultSite().start()
    try:
        snapshots = {key: archived(site, key) for key in REPLAYED}
    finally:
        site.stop()  # replay must not reach it: everything comes from the WACZ

    seen: dict[str, list[str]] = {}
    with staff_browser(live_server) as (context, _session):
        for key in REPLAYED:
            tab, _link = open_replay(context, live_server, snapshots[key])
            frame = replayed(tab)
            try:
                frame.locator("h1, main").first.wait_for(timeout=REPLAY_TIMEOUT_MS)
            except Exception:
                tab.screenshot(path=artifact_path(f"replay/recording-{key}-failed.png"))
                raise
            if key in ("observer", "lazy"):
                frame.locator("img").last.scroll_into_view_if_needed()
            if key == "infinite":
                frame.locator(".item").last.scroll_into_view_if_needed()
            for marker in PAGES[key].markers:
                if key == "frames":
                    inner = "#same" if marker.startswith("SAME") else "#cross"
                    found = frame.frame_locator(inner).get_by_text(marker)
                else:
                    found = frame.get_by_text(marker)
                expect(found).to_be_visible(timeout=REPLAY_TIMEOUT_MS)
                seen.setdefault(key, []).append(marker)
            if key == "import":
                styled = font_and_background(frame)
                assert styled["fonts"] == ["loaded"], styled
                assert "/img/hero.png" in styled["background"], styled
                assert styled["fetched"] and set(styled["fetched"]) == {200}, styled
            if key in ("spa", "import"):
                tab.screenshot(path=artifact_path(f"replay/recording-{key}.png"))
            tab.close()

    assert seen == {key: list(PAGES[key].markers) for key in REPLAYED}
