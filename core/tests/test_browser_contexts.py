"""One browser context serves page after page (core/extractors/browser.py), and each page still
loads as a first-time visitor's would: what the page before it left (cookies set by the server
and by scripts, local storage, IndexedDB, the HTTP cache) is gone before it loads.

The pages are served on 127.0.0.1 by a server of this module that notes the Cookie header of
every request and counts the fetches of a stylesheet it allows browsers to cache for an hour.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from archive.testing import LocalServer
from core.extractors.browser import close_shared_browser, shared_browser
from core.extractors.recorder import recorder_of

pytestmark = pytest.mark.browser

STYLESHEET = b"body { color: rgb(20, 60, 90); }"
# Leaves every kind of state a site can keep in a browser, then says so in the page.
LEAVING_HTML = """<!doctype html><title>leaves state</title>
<link rel="stylesheet" href="/shared.css">
<script>
document.cookie = 'by_script=1; max-age=3600; path=/';
localStorage.setItem('kept', 'yes');
const opened = indexedDB.open('vellum-left', 1);
opened.onupgradeneeded = () => opened.result.createObjectStore('things');
opened.onsuccess = () => { opened.result.close(); document.body.dataset.done = '1'; };
</script><body>left</body>"""
# Reports what it finds of that state.
FINDING_HTML = """<!doctype html><title>finds state</title>
<link rel="stylesheet" href="/shared.css">
<script>
indexedDB.databases().then((found) => {
  document.body.dataset.report = [
    'cookie=' + document.cookie,
    'local=' + localStorage.getItem('kept'),
    'idb=' + found.map((db) => db.name).join(','),
  ].join(';');
});
</script><body>finds</body>"""


class StatefulSite(LocalServer):
    """Serves LEAVING_HTML at /leaving (with a cookie of its own), FINDING_HTML at /finding
    and a cacheable /shared.css; ``cookies`` holds (path, Cookie header) of every request."""

    def __init__(self) -> None:
        self.cookies: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        super().__init__()

    def stylesheet_fetches(self) -> int:
        with self.lock:
            return sum(1 for path, _ in self.cookies if path == "/shared.css")

    def handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with site.lock:
                    site.cookies.append((self.path, self.headers.get("Cookie", "")))
                if self.path == "/shared.css":
                    self.answer(STYLESHEET, "text/css", ("Cache-Control", "max-age=3600"))
                elif self.path == "/leaving":
                    cookie = ("Set-Cookie", "by_server=1; Max-Age=3600; Path=/")
                    self.answer(LEAVING_HTML.encode(), "text/html", cookie)
                elif self.path == "/finding":
                    self.answer(FINDING_HTML.encode(), "text/html")
                else:
                    self.send_error(404)

            def answer(self, body: bytes, kind: str, *headers: tuple[str, str]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args) -> None:
                """Keep test output quiet."""

        return Handler


@pytest.fixture
def site() -> Iterator[StatefulSite]:
    site = StatefulSite().start()
    close_shared_browser()
    yield site
    close_shared_browser()
    site.stop()


def visit(url: str, ready: str, tmp_path: Path, *, user_agent: str = "Vellum test") -> tuple:
    """Load ``url`` in the shared browser until ``ready`` (a JavaScript expression) holds;
    return the page's browser context, its ``data-report``, the responses its recording holds
    as {url: payload} and the names of the cookies its context holds."""

    def load(page) -> None:
        page.goto(url)
        page.wait_for_function(ready)

    def capture(page) -> tuple:
        warc = tmp_path / f"{len(list(tmp_path.iterdir()))}.warc.gz"
        recorder_of(page).write_warc(warc, software="test", max_bytes=10**7)
        report = page.evaluate("document.body.dataset.report || ''")
        cookies = sorted(cookie["name"] for cookie in page.context.cookies())
        return page.context, report, recorded_payloads(warc), cookies

    return shared_browser().visit(
        url, load=load, capture=capture, user_agent=user_agent, timeout=30
    )


def recorded_payloads(warc: Path) -> dict[str, bytes]:
    with warc.open("rb") as stream:
        return {
            record.rec_headers.get_header("WARC-Target-URI"): record.content_stream().read()
            for record in ArchiveIterator(stream)
            if record.rec_type == "response"
        }


def test_the_next_page_reuses_the_context_and_finds_nothing_the_last_one_left(
    site: StatefulSite, tmp_path: Path
) -> None:
    left_in, _, left_recorded, left_cookies = visit(
        site.url("/leaving"), "document.body.dataset.done", tmp_path
    )
    assert left_recorded[site.url("/shared.css")] == STYLESHEET
    assert left_cookies == ["by_script", "by_server"]  # the wipe has something to clear
    before = len(site.cookies)

    found_in, report, found_recorded, found_cookies = visit(
        site.url("/finding"), "document.body.dataset.report", tmp_path
    )

    assert found_in is left_in  # the same context served both pages
    assert report == "cookie=;local=null;idb="
    assert found_cookies == []
    sent = site.cookies[before:]
    assert ("/finding", "") in sent
    assert [cookie for _, cookie in sent if cookie] == []
    # Not served from the cache the first page filled: fetched again, and in this page's record.
    assert site.stylesheet_fetches() == 2
    assert found_recorded[site.url("/shared.css")] == STYLESHEET


def test_a_page_with_another_user_agent_gets_a_new_context(
    site: StatefulSite, tmp_path: Path
) -> None:
    first, _, _, _ = visit(site.url("/leaving"), "document.body.dataset.done", tmp_path)
    second, report, _, _ = visit(
        site.url("/finding"), "document.body.dataset.report", tmp_path, user_agent="Other"
    )
    assert second is not first
    assert report == "cookie=;local=null;idb="
