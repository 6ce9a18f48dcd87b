"""The pages of one crawl share a browser context (core/extractors/browser.py): cookies and
storage one page set are there for the next, as for a reader going from page to page; but the
HTTP cache is cleared before each page, so that every page fetches, and records, all it needs.
Another crawl, another user agent, a persona's visit or no crawl at all get a context of their
own; and what a page sends as it closes is never in the next page's record.

The pages are served on 127.0.0.1 by a server of this module that notes the Cookie header of
every request and counts the fetches of a stylesheet it allows browsers to cache for an hour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator

from archive.testing import LocalServer
from core.extractors.browser import close_shared_browser, shared_browser
from core.extractors.credentials import Credentials
from core.extractors.dom import DomExtractor
from core.extractors.errors import Outcome
from core.extractors.recorder import recorder_of

pytestmark = pytest.mark.browser

STYLESHEET = b"body { color: rgb(20, 60, 90); }"
# Leaves every kind of state a site can keep in a browser, then says so in the page; keeps
# fetching /poll until it closes, and sends a beacon as it does.
LEAVING_HTML = """<!doctype html><title>leaves state</title>
<link rel="stylesheet" href="/shared.css">
<script>
addEventListener('pagehide', () => navigator.sendBeacon('/beacon', 'closing'));
setInterval(() => fetch('/poll'), 50);
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
    and a cacheable /shared.css, and takes beacons (POST); ``cookies`` holds (path, Cookie
    header) of every request."""

    def __init__(self) -> None:
        self.cookies: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        super().__init__()

    def asked(self, path: str) -> int:
        """How many times ``path`` was requested."""
        with self.lock:
            return sum(1 for asked, _ in self.cookies if asked == path)

    def stylesheet_fetches(self) -> int:
        return self.asked("/shared.css")

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
                elif self.path == "/poll":  # a redirect: recorded without asking for a body
                    self.send_response(307)
                    self.send_header("Location", "/polled")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with site.lock:
                    site.cookies.append((self.path, self.headers.get("Cookie", "")))
                self.answer(b"", "text/plain")

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


@dataclass
class Visit:
    """What ``visit`` saw of a page: its browser context, its ``data-report``, the responses its
    record holds ({url: payload}), the names of the cookies its context holds, and how many
    contexts the browser had open (its own persistent one among them)."""

    context: object
    report: str
    recorded: dict[str, bytes]
    cookies: list[str]
    contexts: int


def visit(
    url: str,
    ready: str,
    tmp_path: Path,
    *,
    share: str | None = "crawl-1",
    user_agent: str = "Vellum test",
    credentials: Credentials | None = None,
    load_key: str | None = None,
    fail: bool = False,
) -> Visit:
    """Load ``url`` in the shared browser, as a page of crawl ``share``, until ``ready`` (a
    JavaScript expression) holds, and return what was seen; with ``fail``, the load raises
    instead, as a page that crashed would."""

    def load(page) -> None:
        page.goto(url)
        page.wait_for_function(ready)
        if fail:
            raise RuntimeError("the page crashed")

    def capture(page) -> Visit:
        warc = tmp_path / f"{len(list(tmp_path.iterdir()))}.warc.gz"
        recorder_of(page).write_warc(warc, software="test", max_bytes=10**7)
        report = page.evaluate("document.body.dataset.report || ''")
        cookies = sorted(cookie["name"] for cookie in page.context.cookies())
        contexts = len(page.context.browser.contexts)
        return Visit(page.context, report, recorded_payloads(warc), cookies, contexts)

    return shared_browser().visit(
        url,
        load=load,
        capture=capture,
        user_agent=user_agent,
        timeout=30,
        load_key=load_key,
        share=share,
        credentials=credentials,
    )


def recorded_payloads(warc: Path) -> dict[str, bytes]:
    with warc.open("rb") as stream:
        return {
            record.rec_headers.get_header("WARC-Target-URI"): record.content_stream().read()
            for record in ArchiveIterator(stream)
            if record.rec_type == "response"
        }


FOUND_NOTHING = "cookie=;local=null;idb="
FOUND_ALL = "cookie=by_server=1; by_script=1;local=yes;idb=vellum-left"
PERSONA = Credentials(headers={"X-Persona": "1"})


def leave(site: StatefulSite, tmp_path: Path, **options) -> Visit:
    """Visit /leaving (options as for ``visit``) and check it left its state."""
    left = visit(site.url("/leaving"), "document.body.dataset.done", tmp_path, **options)
    assert left.recorded[site.url("/shared.css")] == STYLESHEET
    assert left.cookies == ["by_script", "by_server"]
    return left


def find(site: StatefulSite, tmp_path: Path, **options) -> tuple[Visit, list[str]]:
    """Visit /finding (options as for ``visit``); return what ``visit`` saw and the Cookie
    headers the site received from then on for /finding and what it loads (left out: /leaving's
    polls, its beacon, sent as it closes, and the icon, which Chromium asks for when it gets to
    it: under load, /leaving's came once after this visit began)."""
    before = len(site.cookies)
    found = visit(site.url("/finding"), "document.body.dataset.report", tmp_path, **options)
    sent = [
        cookie
        for path, cookie in site.cookies[before:]
        if cookie and path not in ("/beacon", "/poll", "/polled", "/favicon.ico")
    ]
    return found, sent


def test_the_next_page_of_a_crawl_finds_its_state_but_fetches_and_records_all_again(
    site: StatefulSite, tmp_path: Path
) -> None:
    left = leave(site, tmp_path)

    found, sent = find(site, tmp_path)

    assert found.context is left.context
    assert found.contexts == 2  # the browser's own and the crawl's
    assert found.report == FOUND_ALL
    assert found.cookies == ["by_script", "by_server"]
    assert "by_server=1; by_script=1" in sent
    # Not served from the cache the first page filled: fetched again, and in this page's record.
    assert site.stylesheet_fetches() == 2
    assert found.recorded[site.url("/shared.css")] == STYLESHEET


def test_what_a_page_fetches_until_it_closes_is_not_in_the_next_pages_record(
    site: StatefulSite, tmp_path: Path
) -> None:
    """Two things keep it out: the next page's recorder is attached only once the page has
    closed, and write_warc leaves out the requests of a closed window whose answer it cannot
    read any more."""
    leave(site, tmp_path)

    found, _ = find(site, tmp_path)

    deadline = time.monotonic() + 10
    while site.asked("/beacon") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert site.asked("/beacon") == 1  # sent as /leaving closed
    assert site.asked("/poll") > 0
    assert site.url("/finding") in found.recorded
    assert [url for url in found.recorded if "/poll" in url or "beacon" in url] == []


@pytest.mark.parametrize(
    "options",
    [
        {"share": "crawl-2"},
        {"share": None},
        {"user_agent": "Vellum test, another"},
        {"credentials": PERSONA},
    ],
    ids=["another crawl", "no crawl", "another user agent", "a persona"],
)
def test_other_pages_get_a_context_of_their_own_and_find_nothing(
    site: StatefulSite, tmp_path: Path, options: dict
) -> None:
    left = leave(site, tmp_path)

    found, sent = find(site, tmp_path, **options)

    assert found.context is not left.context
    assert found.contexts == 2  # the crawl's was closed
    assert found.report == FOUND_NOTHING
    assert (found.cookies, sent) == ([], [])
    assert found.recorded[site.url("/shared.css")] == STYLESHEET


def test_the_context_of_a_persona_or_of_no_crawl_is_closed_with_its_page(
    site: StatefulSite, tmp_path: Path
) -> None:
    leave(site, tmp_path, share=None)
    found, _ = find(site, tmp_path, share=None)
    leave(site, tmp_path, credentials=PERSONA)
    again, _ = find(site, tmp_path)

    assert (found.contexts, again.contexts) == (2, 2)
    assert found.report == again.report == FOUND_NOTHING


def test_a_page_refused_in_the_crawl_leaves_its_context_to_the_next(
    site: StatefulSite, tmp_path: Path
) -> None:
    left = leave(site, tmp_path)

    refused = shared_browser().visit(
        site.url("/missing"),
        load=lambda page: ("refused", page.goto(site.url("/missing")).status),
        capture=lambda page: None,
        user_agent="Vellum test",
        timeout=30,
        share="crawl-1",
    )
    found, _ = find(site, tmp_path)

    assert refused == ("refused", 404)
    assert found.context is left.context
    assert found.report == FOUND_ALL


def test_after_a_page_that_failed_the_crawl_starts_afresh(
    site: StatefulSite, tmp_path: Path
) -> None:
    left = leave(site, tmp_path)
    with pytest.raises(RuntimeError, match="crashed"):
        leave(site, tmp_path, fail=True, load_key="snapshot-2")

    found, _ = find(site, tmp_path)

    assert found.context is not left.context
    assert found.contexts == 2
    assert found.report == FOUND_NOTHING


def test_a_page_captured_twice_then_the_next_page_share_the_context(
    site: StatefulSite, tmp_path: Path
) -> None:
    first = leave(site, tmp_path, load_key="snapshot-1")
    second = visit(site.url("/leaving"), "true", tmp_path, load_key="snapshot-1")

    found, _ = find(site, tmp_path)

    assert site.asked("/leaving") == 1  # the second capture took the page already loaded
    assert first.context is second.context is found.context
    assert found.report == FOUND_ALL


def test_the_rendering_extractors_share_a_context_per_crawl(
    site: StatefulSite, tmp_path: Path
) -> None:
    def dom_of(path: str, crawl_id: int, snapshot_id: int) -> str:
        out_dir = tmp_path / f"{snapshot_id}"
        out_dir.mkdir()
        snapshot = SimpleNamespace(url=site.url(path), crawl_id=crawl_id, pk=snapshot_id)
        output = DomExtractor().run(snapshot, out_dir)
        assert output.outcome is Outcome.SUCCEEDED, output.error
        return (out_dir / output.output).read_text()

    dom_of("/leaving", crawl_id=7, snapshot_id=1)

    assert f'data-report="{FOUND_ALL}"' in dom_of("/finding", crawl_id=7, snapshot_id=2)
    assert f'data-report="{FOUND_NOTHING}"' in dom_of("/finding", crawl_id=8, snapshot_id=3)
