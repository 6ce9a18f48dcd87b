"""Pages that build themselves with scripts, archived through the pipeline and replayed from
their WACZ (issue 18): each page of core/tests/difficult_site.py is archived by the real
pipeline (a crawl ticked in this process: wget, title, htmltotext, screenshot, dom and the
browser's recording, then finalizing and its WACZ), the site is stopped so that nothing can
come from the live web, and each snapshot is opened in Chromium through the app and
ReplayWeb.page.

For every page the test asks, of each output, whether it holds the page's markers:

- WARC: the recording has a successful answer to every request the markers need, holding the
  marker text (or, for a marker a script writes once an image, font or video loaded, holding
  what the site served);
- WACZ: the same, of the WARCs inside snapshot.wacz;
- DOM: the marker text is in dom/output.html;
- screenshot: Tesseract reads the marker in screenshot/screenshot.png (core/tests/ocr.py);
- replay: Tesseract reads the marker in a screenshot of the replayed page's frame. The frame's
  markup is only used to know when to take it (once the marker shows) and where (scrolled to
  it); a marker that never shows is still looked for in the pixels.

``pytest -s`` prints the page-by-output table. EXPECTED_GAPS names the cells that are "no" by
design, and why; every other cell must be "yes", and every gap must still be one. The replays
are saved as test-artifacts/replay/recording-<page>.png to look at.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from archive.testing import artifact_path
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.browser import close_shared_browser
from core.folder.wacz import WACZ_NAME, validate_wacz
from core.models import Snapshot
from core.services.crawls import crawl_create
from core.tests.difficult_site import FONT_FAMILY, PAGES, DifficultSite, Page
from core.tests.ocr import tesseract_available, text_in_image
from core.tests.pipeline import archive_crawl
from core.tests.test_isolation import staff_browser
from core.tests.test_recording import RECORDING_WARC, Record, answers, read_warc
from core.tests.test_replay_theft import open_replay, replayed

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EXTRACTORS = ["wget", "title", "htmltotext", "screenshot", "dom", "recording"]
OUTPUTS = ("WARC", "WACZ", "DOM", "screenshot", "replay")
# ReplayWeb.page's first start (service worker, WACZ index) on a loaded machine; waited for as
# events (the marker showing), not slept.
REPLAY_TIMEOUT_MS = 60_000
# Cells that are "no" by design: (page, output) -> why.
EXPECTED_GAPS: dict[tuple[str, str], str] = {}
# Pages whose markers show only once the replayed page is scrolled down to what loads on sight.
SCROLLED_TO = {"observer": "img", "lazy": "img", "infinite": ".item"}


@pytest.fixture
def own_data_dir(settings, tmp_path: Path) -> Iterator[None]:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.EXTRACTORS = EXTRACTORS
    close_shared_browser()  # one of this DATA_DIR's own
    yield
    close_shared_browser()


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


# --- what each output holds ----------------------------------------------------------------------


def warc_holds(records: list[Record], site: DifficultSite, page: Page) -> bool:
    """True if ``records`` answer every request ``page``'s markers need (2xx, asked with its
    method and body) and hold the markers: spelled out in those answers, or, for markers a
    script writes (``page.in_answers`` False), as the bytes the site served for each."""
    found = [answers(records, site.resource_url(r), r) for r in page.resources]
    if not all(found):
        return False
    payloads = [exchange.response.payload for exchanges in found for exchange in exchanges]
    if page.in_answers:
        return all(any(m.encode() in payload for payload in payloads) for m in page.markers)
    return all(
        any(e.response.payload == site.static_content(r.path) for e in exchanges)
        for r, exchanges in zip(page.resources, found, strict=True)
    )


def wacz_records(snapshot: Snapshot, folder: Path) -> list[Record]:
    """The records of every WARC inside ``snapshot``'s WACZ (extracted into ``folder``)."""
    records = []
    with zipfile.ZipFile(snapshot.output_dir / WACZ_NAME) as wacz:
        names = [name for name in wacz.namelist() if name.startswith("archive/")]
        for name in names:
            path = folder / name.replace("/", "-")
            path.write_bytes(wacz.read(name))
            records += read_warc(path)
    return records


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


def replay_text(context, live_server, key: str, snapshot: Snapshot) -> str:
    """Open ``snapshot`` in ReplayWeb.page, wait for each marker of page ``key`` to show
    (scrolled into view; one that does not show within REPLAY_TIMEOUT_MS is left), screenshot
    the replayed page's frame as test-artifacts/replay/recording-<key>.png and return the text
    Tesseract reads in it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    tab, _link = open_replay(context, live_server, snapshot)
    frame = replayed(tab)
    shot = artifact_path(f"replay/recording-{key}.png")
    try:
        frame.locator("h1, main").first.wait_for(timeout=REPLAY_TIMEOUT_MS)
        if key in SCROLLED_TO:
            frame.locator(SCROLLED_TO[key]).last.scroll_into_view_if_needed()
        for marker in PAGES[key].markers:
            found = frame.get_by_text(marker)
            if key == "frames":
                inner = "#same" if marker.startswith("SAME") else "#cross"
                found = frame.frame_locator(inner).get_by_text(marker)
            try:
                expect(found).to_be_visible(timeout=REPLAY_TIMEOUT_MS)
            except AssertionError:
                continue  # not in the markup: the screenshot will not show it either
            found.scroll_into_view_if_needed()
        if key == "import":
            styled = font_and_background(frame)
            assert styled["fonts"] == ["loaded"], styled
            assert "/img/hero.png" in styled["background"], styled
            assert styled["fetched"] and set(styled["fetched"]) == {200}, styled
        # The archived page's own frame, inside ReplayWeb.page's.
        tab.frame_locator("replay-web-page iframe").locator("iframe").screenshot(path=shot)
    except PlaywrightTimeout:
        tab.screenshot(path=shot)  # ReplayWeb.page did not show the page: its own message
    finally:
        tab.close()
    return text_in_image(shot)


def test_every_pages_markers_are_in_every_output(own_data_dir, live_server, tmp_path) -> None:
    if not tesseract_available():
        pytest.skip("needs Tesseract (apt install tesseract-ocr)")
    site = DifficultSite().start()
    try:
        snapshots = {key: archived(site, key) for key in PAGES}
    finally:
        site.stop()  # replay must not reach it: everything comes from the WACZ
    # Every snapshot's manifest, signature and outputs check out, and py-wacz accepts its WACZ.
    call_command("verify", "--all", "--local-only", stdout=StringIO())
    for snapshot in snapshots.values():
        assert validate_wacz(snapshot.output_dir / WACZ_NAME, timeout=120) == []

    table: dict[str, dict[str, bool]] = {}
    for key, snapshot in snapshots.items():
        page = PAGES[key]
        folder = snapshot.output_dir
        unzipped = tmp_path / "from-wacz" / key
        unzipped.mkdir(parents=True)
        dom = (folder / "dom" / "output.html").read_text(encoding="utf-8")
        screenshot = text_in_image(folder / "screenshot" / "screenshot.png")
        table[key] = {
            "WARC": warc_holds(read_warc(folder / RECORDING_WARC), site, page),
            "WACZ": warc_holds(wacz_records(snapshot, unzipped), site, page),
            "DOM": all(marker in dom for marker in page.markers),
            "screenshot": all(marker in screenshot for marker in page.markers),
        }
    with staff_browser(live_server) as (context, _session):
        for key, snapshot in snapshots.items():
            text = replay_text(context, live_server, key, snapshot)
            table[key]["replay"] = all(marker in text for marker in PAGES[key].markers)

    print_table(table)
    gaps = [(key, out) for key, cells in table.items() for out, held in cells.items() if not held]
    assert gaps == list(EXPECTED_GAPS)


def print_table(table: dict[str, dict[str, bool]]) -> None:
    """Print the page-by-output table (``pytest -s``), the expected gaps marked and explained."""
    width = max(len(key) for key in table)
    lines = [f"{'page':<{width}}  " + "  ".join(f"{out:<10}" for out in OUTPUTS)]
    for key, cells in table.items():
        marks = [
            ("yes" if cells[out] else "no") + ("*" if (key, out) in EXPECTED_GAPS else "")
            for out in OUTPUTS
        ]
        lines.append(f"{key:<{width}}  " + "  ".join(f"{mark:<10}" for mark in marks))
    lines += [f"* {key}, {out}: {why}" for (key, out), why in EXPECTED_GAPS.items()]
    print("\neach page's markers, in each output:\n" + "\n".join(lines))
