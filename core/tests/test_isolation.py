"""Archived pages are untrusted code: a page that tries to steal a signed-in staff user's session
or act with it through the API, opened in the system Chromium from Vellum itself, gets nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from model_bakery import baker

from core.choices import SnapshotStatus
from core.models import Snapshot
from crawls.models import Crawl
from orchestrator.models import queue_held

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
            context = browser.new_context()
            context.add_cookies(
                [{"name": django_settings.SESSION_COOKIE_NAME, "value": session,
                  "url": live_server.url, "httpOnly": True}]
            )  # fmt: skip
            page = context.new_page()
            signed_in = page.goto(f"{live_server.url}/admin/")
            admin_title = page.title()
            response = page.goto(f"{live_server.url}{thief_page}")
            page.wait_for_timeout(1500)  # time for any script, image handler or fetch to finish
            report = page.inner_text("#report")
            csp = response.headers.get("content-security-policy", "")
        finally:
            browser.close()

    assert signed_in.ok and "Vellum" in admin_title  # the browser does hold a staff session
    assert response.ok  # the archived page itself is served
    assert csp.startswith("sandbox")
    assert report == "scripts did not run"
    assert not queue_held()
