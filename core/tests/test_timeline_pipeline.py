"""Issue 20's acceptance for a URL's timeline, archived for real: one page of a test site on
127.0.0.1 (core/tests/changing_site.py) archived three times by the pipeline (wget, title,
htmltotext, screenshot, then finalizing), its price changed between the second capture and
the third. Its timeline shows three captures, "unchanged" on the second; the diff of the third
names the changed words and sees the screenshot change; the TimeMap parses with a Link-header
parser and lists all three; ``/at/`` picks the nearest; the API and ``list --url`` agree. Then
Chromium opens the timeline and the diff (screenshots in test-artifacts/timeline/ and
/tmp/shots/tl/ to look at)."""

from __future__ import annotations

import io
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from requests.utils import parse_header_links

from archive.testing import artifact_path
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.browser import close_shared_browser
from core.models import Snapshot
from core.services.captures import capture_timestamp
from core.services.crawls import crawl_create
from core.services.tokens import token_create
from core.tests.changing_site import ChangingSite, notice_page
from core.tests.pipeline import archive_crawl
from core.tests.test_isolation import staff_browser
from core.tests.users import keeper

pytestmark = pytest.mark.django_db(transaction=True)

EXTRACTORS = ["wget", "title", "htmltotext", "screenshot"]
SHOTS = Path("/tmp/shots/tl")


@pytest.fixture
def site() -> Iterator[ChangingSite]:
    server = ChangingSite(notice_page("forty")).start()
    yield server
    server.stop()


@pytest.fixture
def own_data_dir(settings, tmp_path: Path) -> Iterator[None]:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.EXTRACTORS = EXTRACTORS
    settings.PUBLIC_ARCHIVE = False
    close_shared_browser()  # one of this DATA_DIR's own
    yield
    close_shared_browser()


def archive_three_times(site: ChangingSite, *, new_browser: bool = True) -> tuple[str, list]:
    """Archive the site's page in three crawls, its price "forty", "forty", then "fifty";
    return its URL and the three sealed snapshots, oldest first.

    ``new_browser``: each crawl renders in a browser of its own, as it would in an actor of
    its own. Within VISIT_REUSE_SECONDS one browser captures the page it loaded for the
    previous snapshot of the same URL again (test_a_capture_soon_after_another_renders_the_page
    _anew shows it).
    """
    url = site.url("/page.html")
    captures = []
    for price in ("forty", "forty", "fifty"):
        if captures:
            next_second(captures[-1].captured_at)
        site.page = notice_page(price)
        if new_browser:
            close_shared_browser()
        crawl = archive_crawl(crawl_create(data=url.encode(), source_name="urls.txt"))
        snapshot = Snapshot.objects.for_crawl(crawl).get()
        results = {r.extractor: (r.status, r.error) for r in snapshot.results.all()}
        assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
        assert {name: status for name, (status, _e) in results.items()} == dict.fromkeys(
            EXTRACTORS, ResultStatus.SUCCEEDED
        ), results
        captures.append(Snapshot.objects.captures_of(url).get(pk=snapshot.pk))
    return url, captures


def next_second(moment) -> None:
    """Wait until the clock is past the second of ``moment``. A Wayback timestamp names a
    second, and a capture now takes less than one: two in the same second share a timestamp,
    and ``/at/`` gives the earlier (test_captures covers that rule); these tests want each
    capture to have a timestamp of its own."""
    while timezone.now().replace(microsecond=0) <= moment.replace(microsecond=0):
        time.sleep(0.05)


def test_a_url_archived_three_times_shows_its_captures_and_what_changed(own_data_dir, site) -> None:
    url, (first, second, third) = archive_three_times(site)
    client = Client()
    client.force_login(keeper())

    # The timeline: three captures, newest first; the second unchanged since the first.
    page = BeautifulSoup(client.get(f"/url/{url}").content, "html.parser")
    rows = page.select("tr.capture")
    assert [row["id"] for row in rows] == [f"capture-{s.pk}" for s in (third, second, first)]
    newest, middle, oldest = (" ".join(row.get_text(" ").split()) for row in rows)
    assert "unchanged since" in middle and "unchanged" not in newest and "unchanged" not in oldest
    assert "text changed" in newest and "first capture" in oldest
    assert first.content_digest == second.content_digest != third.content_digest != ""
    for row, snapshot in zip(rows, (third, second, first), strict=True):
        thumbnail = row.select_one("img.thumb")["src"]
        assert thumbnail == reverse(
            "core:snapshot_file", args=[snapshot.pk, "screenshot/screenshot.png"]
        )
        assert client.get(thumbnail)["Content-Type"] == "image/png"

    # The diff of the third names the changed words, and sees the screenshot change.
    diff = BeautifulSoup(client.get(rows[0].select_one("a.diff")["href"]).content, "html.parser")
    assert [e.string for e in diff.select(".diff-text del")] == ["forty"]
    assert [e.string for e in diff.select(".diff-text ins")] == ["fifty"]
    assert diff.find(id="shot-summary").get_text().startswith("The screenshot changed")
    unchanged = BeautifulSoup(
        client.get(rows[1].select_one("a.diff")["href"]).content, "html.parser"
    )
    assert unchanged.find(id="text-summary").get_text() == (
        "The readable text is the same in both captures."
    )

    # The TimeMap parses with a Link-header parser and lists all three.
    timemap = client.get(f"/timemap/link/{url}")
    assert timemap["Content-Type"] == "application/link-format"
    links = parse_header_links(timemap.content.decode().replace("\n", " "))
    mementos = [link for link in links if link["rel"] == "memento"]
    assert [link["url"] for link in mementos] == [
        f"http://testserver/snapshot/{s.pk}/" for s in (first, second, third)
    ]
    assert [link for link in links if link["rel"] == "original"] == [
        {"url": url, "rel": "original"}
    ]

    # /at/ picks the nearest capture: each one's own timestamp, and the last after them all.
    for snapshot in (first, second, third):
        found = client.get(f"/at/{capture_timestamp(snapshot.captured_at)}/{url}")
        assert found.status_code == 302
        assert found["Location"] == f"http://testserver/snapshot/{snapshot.pk}/"
    assert client.get(f"/at/2999/{url}")["Location"].endswith(f"/snapshot/{third.pk}/")
    assert client.get(f"/at/1999/{url}")["Location"].endswith(f"/snapshot/{first.pk}/")

    # The API and the command line list the same three.
    _token, key = token_create(username="keeper")
    api = Client(headers={"Authorization": f"Bearer {key}"})
    items = api.get(f"/api/v1/urls/{url}/captures").json()["items"]
    assert [item["id"] for item in items] == [str(s.pk) for s in (third, second, first)]
    assert [item["unchanged_since"] is not None for item in items] == [False, True, False]
    out = io.StringIO()
    call_command("list", "--url", url, "--json", stdout=out)
    assert json.loads(out.getvalue())[1]["previous"] == str(first.pk)


def test_a_capture_soon_after_another_renders_the_page_anew(own_data_dir, site) -> None:
    """The same actor's browser captures the same URL for each snapshot, not from the visit
    it left open for the one before (core/extractors/browser.py reuses a visit within a
    snapshot only)."""
    _url, (_first, second, third) = archive_three_times(site, new_browser=False)

    assert (second.output_dir / "htmltotext" / "output.txt").read_text() != (
        third.output_dir / "htmltotext" / "output.txt"
    ).read_text()
    assert (second.output_dir / "screenshot" / "screenshot.png").read_bytes() != (
        third.output_dir / "screenshot" / "screenshot.png"
    ).read_bytes()


@pytest.mark.browser
def test_the_timeline_and_a_diff_in_chromium(own_data_dir, site, live_server) -> None:
    from playwright.sync_api import expect

    url, (_first, _second, third) = archive_three_times(site)
    month = f"{timezone.localtime(third.captured_at):%b}3"
    close_shared_browser()  # Vellum's own, before this test's Playwright takes the thread
    with staff_browser(live_server) as (context, _session):
        tab = context.new_page()
        tab.set_viewport_size({"width": 1200, "height": 900})

        tab.goto(f"{live_server.url}/url/{url}")
        rows = tab.locator("tr.capture")
        expect(rows).to_have_count(3)
        expect(rows.nth(1)).to_contain_text("unchanged since")
        expect(tab.locator(".calendar td.some a")).to_have_text([month])
        for index in range(3):  # every thumbnail loaded, through the snapshot file view
            thumbnail = rows.nth(index).locator("img.thumb")
            thumbnail.scroll_into_view_if_needed()
            expect(thumbnail).to_have_js_property("complete", True)
            assert thumbnail.evaluate("(img) => img.naturalWidth") == 1280
        _keep(tab, "timeline.png")

        rows.nth(0).locator("a.diff").click()
        expect(tab.locator(".diff-text del")).to_have_text(["forty"])
        expect(tab.locator(".diff-text ins")).to_have_text(["fifty"])
        expect(tab.locator("#shot-summary")).to_contain_text("The screenshot changed")
        box = tab.locator(".shots .box")
        expect(box).to_be_visible()
        later = tab.locator(".shots img").nth(1).bounding_box()
        marked = box.bounding_box()
        assert later["x"] <= marked["x"]
        assert marked["x"] + marked["width"] <= later["x"] + later["width"]
        _keep(tab, "diff.png")


def _keep(tab, name: str) -> None:
    """Save a full-page screenshot as test-artifacts/timeline/<name> and /tmp/shots/tl/<name>."""
    path = artifact_path(f"timeline/{name}")
    tab.screenshot(path=str(path), full_page=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SHOTS / name)
