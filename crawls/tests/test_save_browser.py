"""Save in one click, in the system Chromium (issue 21, item 3): a user who is not staff signs
in on Vellum's sign-in page, takes the bookmarklet from the add page, runs it on a page of a
local site, and lands on the new crawl's live page; running it again lands on the same crawl.
A screenshot of that page is saved in the test's tmp dir (save.png)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from django.contrib.auth import get_user_model

from core.tests.users import permissions
from crawls.models import Crawl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
PASSWORD = "a long enough passphrase"
CRAWL_PAGE = re.compile(r"/crawl/(\d+)/$")


def run_bookmarklet(page, href: str) -> None:
    """Run a ``javascript:`` link in ``page`` as the browser runs a bookmark: its code, once
    URL-decoded, in the page's own context."""
    code = unquote(href.removeprefix("javascript:"))
    page.evaluate(f"() => {{ setTimeout(() => {{ {code}; }}, 0); }}")
    page.wait_for_url(CRAWL_PAGE)


def test_the_bookmarklet_saves_the_page_and_a_repeat_lands_on_the_first(
    live_server, live_site, settings, tmp_path: Path
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("needs the system Chromium (apt install chromium)")
    from playwright.sync_api import sync_playwright

    settings.DATA_DIR = tmp_path
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.SAVE_DEDUP_MINUTES = 10
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    user.user_permissions.set(permissions("crawls.add_crawl"))
    saved_url = live_site.url("/page2.html")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 600})
            page.goto(f"{live_server.url}/add/")  # not signed in: the sign-in page first
            signed_in_at = page.url
            page.fill("input[name=username]", "ada")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/add/")
            href = page.get_attribute("#bookmarklet", "href")

            page.goto(saved_url)
            run_bookmarklet(page, href)
            first = page.url
            heading = page.inner_text("h1")
            saving = page.inner_text("main p")
            page.screenshot(path=str(tmp_path / "save.png"), full_page=True)

            page.goto(saved_url)
            run_bookmarklet(page, href)
            second = page.url
        finally:
            browser.close()

    crawl = Crawl.objects.get()
    assert "/login/?next=/add/" in signed_in_at
    assert href.startswith(f"javascript:void(location.href='{live_server.url}/save/'")
    assert first == f"{live_server.url}/crawl/{crawl.pk}/"
    assert heading == f"Crawl {crawl.pk}" and saving == f"Saving {saved_url}"
    assert second == first
    assert crawl.seed_list() == [saved_url] and crawl.created_by == user
    assert (tmp_path / "save.png").stat().st_size > 0
