"""Archived pages are untrusted code: a page that tries to steal a signed-in staff user's session
or act with it through the API, opened in the system Chromium from Vellum itself, gets nowhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from model_bakery import baker

from core.choices import SnapshotStatus
from core.models import Snapshot
from crawls.models import Crawl
from orchestrator.models import queue_held

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
# What a hostile page would do with the visitor's session: read the cookie, hold the queue
# through the API (with the cookie the browser holds for this origin), and report what it got.
# The script is a file of its own, as on real pages: an inline one would already be stopped by
# the policy's default-src, which proves less.
THIEF_HTML = """<!doctype html><html><head><title>archived page</title></head><body>
<pre id="report">scripts did not run</pre>
<script src="thief.js"></script></body></html>"""
THIEF_JS = """
const report = [];
try { report.push('cookie=' + document.cookie); } catch (e) { report.push('cookie blocked'); }
fetch('/api/v1/queue/hold', {method: 'POST', credentials: 'include',
       headers: {'Content-Type': 'application/json'}, body: '{"reason": "stolen"}'})
  .then(r => report.push('api ' + r.status)).catch(e => report.push('api refused'))
  .finally(() => { document.getElementById('report').textContent = report.join('; '); });
"""


@contextmanager
def staff_browser(live_server) -> Iterator[tuple[BrowserContext, str]]:
    """Yield a Chromium browser context holding a signed-in superuser's session cookie for
    ``live_server``, and that cookie's value; skip the test without the system Chromium."""
    if not Path(CHROMIUM).exists():
        pytest.skip("needs the system Chromium (apt install chromium)")
    from playwright.sync_api import sync_playwright

    staff = get_user_model().objects.create_user("keeper", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    session = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            context = browser.new_context(viewport={"width": 1100, "height": 700})
            context.add_cookies(
                [{"name": django_settings.SESSION_COOKIE_NAME, "value": session,
                  "url": live_server.url, "httpOnly": True}]
            )  # fmt: skip
            yield context, session
        finally:
            browser.close()


@pytest.fixture
def thief_page(settings, tmp_path: Path) -> str:
    """A sealed snapshot whose archived page tries to steal; return its path on Vellum."""
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    crawl = baker.make(Crawl, seeds="https://evil.example/")
    snapshot = baker.make(
        Snapshot, crawl=crawl, url="https://evil.example/", status=SnapshotStatus.SEALED
    )
    page = snapshot.output_dir / "wget" / "evil.example" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(THIEF_HTML)
    (page.parent / "thief.js").write_text(THIEF_JS)
    return f"/archive/{snapshot.pk}/wget/evil.example/index.html"


def test_an_archived_page_cannot_read_the_session_or_use_the_api(live_server, thief_page) -> None:
    with staff_browser(live_server) as (context, _session):
        page = context.new_page()
        signed_in = page.goto(f"{live_server.url}/admin/")
        admin_title = page.title()
        response = page.goto(f"{live_server.url}{thief_page}")
        page.wait_for_timeout(1500)  # time for any script, image handler or fetch to finish
        report = page.inner_text("#report")
        csp = response.headers.get("content-security-policy", "")

    assert signed_in.ok and "Vellum" in admin_title  # the browser does hold a staff session
    assert response.ok  # the archived page itself is served
    assert csp.startswith("sandbox")
    assert report == "scripts did not run"
    assert not queue_held()


# Replay runs the archived page's scripts (that is what replay is for): here they try to read
# the session and to hold the queue through the API, relatively and at the app's own address.
REPLAYED_HEADING = "Parchment and vellum, replayed"
REPLAYED_HTML = """<!doctype html><html><head><title>replayed page</title></head><body>
<h1>HEADING</h1><pre id="report">scripts did not run</pre>
<script>
const report = ['ran', 'cookie=' + document.cookie];
const hold = url => fetch(url, {method: 'POST', credentials: 'include',
    headers: {'Content-Type': 'application/json'}, body: '{"reason": "stolen"}'})
  .then(r => 'api ' + r.status, e => 'api refused');
Promise.all([hold('/api/v1/queue/hold'), hold('APP/api/v1/queue/hold')])
  .then(answers => { document.getElementById('report').textContent =
                     report.concat(answers).join('; '); });
</script></body></html>""".replace("HEADING", REPLAYED_HEADING)


@pytest.fixture
def replayed_snapshot(settings, tmp_path: Path, live_server) -> Snapshot:
    """A sealed snapshot whose WACZ (made by py-wacz) holds REPLAYED_HTML."""
    from core.folder.wacz import build_wacz
    from core.tests.warc_folders import WARC_PATH, write_warc

    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    crawl = baker.make(Crawl, seeds="https://evil.example/")
    snapshot = baker.make(
        Snapshot, crawl=crawl, url="https://evil.example/", status=SnapshotStatus.SEALED
    )
    html = REPLAYED_HTML.replace("APP", live_server.url).encode()
    write_warc(snapshot.output_dir / WARC_PATH, snapshot.url, html)
    build_wacz(
        snapshot.output_dir,
        url=snapshot.url,
        title="replayed page",
        archived_at=snapshot.created_at,
        timeout=120,
    )
    return snapshot


def test_a_replayed_page_runs_on_the_replay_host_without_the_session(
    live_server, replayed_snapshot: Snapshot
) -> None:
    """The snapshot page links to ReplayWeb.page on replay.localhost (the default replay host
    for an archive opened on localhost); the page replays, its scripts run, and they neither
    see the staff session nor get the API to act."""
    from playwright.sync_api import expect

    from archive.testing import artifact_path

    with staff_browser(live_server) as (context, session):
        page = context.new_page()
        page.goto(f"{live_server.url}/snapshot/{replayed_snapshot.pk}/")
        replay_link = page.get_by_role("link", name="Replay this page")
        replay_url = replay_link.get_attribute("href")
        with context.expect_page() as opened:
            replay_link.click()
        replay = opened.value
        archived = replay.frame_locator("replay-web-page iframe").frame_locator("iframe")
        expect(archived.locator("h1")).to_have_text(REPLAYED_HEADING, timeout=60_000)
        report = archived.locator("#report")
        report.filter(has_text="api").wait_for(timeout=30_000)
        report_text = report.inner_text()
        replay.screenshot(path=artifact_path("replay/replayed-page.png"))
        # Whatever the service worker does with the page's requests, the browser itself sends
        # the replay host no cookie of the app: the session is not in that host's jar.
        replay_host_cookies = context.cookies(replay_url)
        app_cookie_names = {cookie["name"] for cookie in context.cookies(live_server.url)}

    own_host = f"{replayed_snapshot.pk.hex}.replay.localhost"  # the snapshot's own origin
    assert replay_url.startswith(live_server.url.replace("localhost", own_host) + "/replay/")
    assert report_text.startswith("ran; cookie=")  # replay does run the page's scripts
    assert session not in report_text and "sessionid" not in report_text
    assert "api 200" not in report_text
    assert "sessionid" in app_cookie_names  # the staff member is signed in on the app's host
    assert replay_host_cookies == []
    assert not queue_held()
