"""A visitor's whole journey in the system Chromium, against a real installation (its own
DATA_DIR and SQLite database, ``runserver`` and the orchestrator as subprocesses): sign in, add
a URL of the test site, watch it progress to sealed, find it by a word of its text, open its
page, and replay it. Each step leaves a screenshot in test-artifacts/journey/ to look at."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from archive.testing import artifact_path, unused_port
from core.tests.site import LiveSite
from orchestrator.tests.test_orchestrator import Vellum, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
PASSWORD = "a long test passphrase"
SEAL_TIMEOUT = 120  # seconds; the test extractors seal a page in a few
WORD = "paragraph"  # in the test site's home page text, nowhere in its title or URL


@pytest.fixture
def running_vellum(tmp_path: Path) -> tuple[Vellum, str]:
    """An initialized installation with an admin user, served by runserver on 127.0.0.1 and
    archived by a running orchestrator; yields (the installation, its base URL)."""
    vellum = Vellum(tmp_path / "data")
    assert vellum.manage("init").returncode == 0
    created = vellum.manage(
        "createsuperuser", "--noinput", "--username", "admin", "--email", "admin@example.com",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    port = unused_port()
    base = f"http://127.0.0.1:{port}"
    server = vellum.start("runserver", f"127.0.0.1:{port}", "--noreload")
    orchestrator = vellum.start("orchestrator")
    try:
        wait_for(lambda: _answers(f"{base}/admin/login/"), timeout=30, what="runserver")
        yield vellum, base
    finally:
        stop(orchestrator)
        stop(server)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_sign_in_add_watch_search_open_and_replay(
    running_vellum: tuple[Vellum, str], live_site: LiveSite
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("needs the system Chromium (apt install chromium)")
    from playwright.sync_api import expect, sync_playwright

    _vellum, base = running_vellum
    seed = live_site.url("/")
    shot = lambda page, name: page.screenshot(path=artifact_path(f"journey/{name}.png"))  # noqa: E731

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.goto(f"{base}/add/")  # not signed in: the sign-in page, then back here
            page.fill("#id_username", "admin")
            page.fill("#id_password", PASSWORD)
            shot(page, "1-sign-in")
            page.get_by_role("button", name="Sign in").click()  # /login/, for every user
            expect(page.locator("h1")).to_have_text("Add to the archive")

            page.fill("#id_urls", seed)
            page.fill("#id_tags", "journey")
            shot(page, "2-add")
            page.get_by_role("button", name="Archive").click()
            progress = page.locator(".badge").first
            expect(progress).to_be_visible()
            shot(page, "3-progress")
            expect(progress).to_have_text("sealed", timeout=SEAL_TIMEOUT * 1000)
            shot(page, "4-sealed")

            page.goto(f"{base}/")
            page.fill("input[name=q]", WORD)
            page.keyboard.press("Enter")
            found = page.get_by_role("link", name="Vellum Test Home")
            expect(found).to_be_visible()
            shot(page, "5-search")

            found.click()
            expect(page.locator("h1")).to_have_text("Vellum Test Home")
            shot(page, "6-snapshot")
            with page.context.expect_page() as opened:
                page.get_by_role("link", name="Replay this page").click()
            replay = opened.value
            archived = replay.frame_locator("replay-web-page iframe").frame_locator("iframe")
            heading = archived.locator("h1")
            expect(heading).to_have_text("Welcome to the Vellum test site", timeout=60_000)
            shot(replay, "7-replay")
            replay_host = replay.url.split("/")[2]
        finally:
            browser.close()

    assert replay_host.endswith(f".replay.localhost:{base.rsplit(':', 1)[1]}")  # its own origin
