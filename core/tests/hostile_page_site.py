"""The hostile page site: pages that fight their capture (issue 18, part 5), on 127.0.0.1.

``PAGES`` maps a path to a page that is hostile in one way, and the handler adds the routes that
misbehave: ``/trickle`` (a document, stylesheet, image or script that never finishes arriving,
``?html``, ``?css``, ``?png``, ``?js``), ``/trickling.html?<kind>`` (a page that waits for one),
``/never`` (no answer until the site stops), ``/video.html?announced|slow`` with ``/video`` (1 GiB
of zeros as video/mp4), ``/attachment`` (a 1 GiB download, ``?html`` as text/html), and
``/redirect/<name>`` (a 302 to each of ``REDIRECT_TARGETS``, URLs that are not http(s)). Anything
else is a 404. Large bodies are generated as they are sent and stop when the client goes away or
the site stops; the site counts the requests and body bytes per path (``asked``, ``sent_under``).

core/tests/test_hostile_pages.py runs each extractor against one page at a time;
orchestrator/tests/test_full_profile.py crawls ten of them among 40 calm pages. Start a
``HostilePageSite`` with a fixture and stop it afterwards: ``stop()`` releases every handler
that is still waiting.
"""

from __future__ import annotations

import os
import time
from http import HTTPStatus

from core.tests.hostile_site import HOLD_SECONDS, HostileHandler, HostileSite

GIB = 1024**3
CHUNK = bytes(64 * 1024)  # 64 KiB of zeros, sent again and again


def spelled(marker: str) -> str:
    """A JavaScript expression for ``marker`` that does not spell it out."""
    half = len(marker) // 2
    return f"'{marker[:half]}' + '{marker[half:]}'"


CALM_HTML = "<!doctype html><title>Calm</title><p>CALM-PAGE</p>"
# A page whose stylesheet, image or script never finishes arriving: it never fires ``load``.
TRICKLING_HTML = """<!doctype html><title>Trickling {kind}</title><p>WAITING-PAGE</p>
{tag}
"""
TRICKLING_TAGS = {
    "css": '<link rel="stylesheet" href="/trickle?css">',
    "png": '<img src="/trickle?png">',
    "js": '<script src="/trickle?js"></script>',
}
TRICKLE_STARTS = {
    "html": ("text/html", b"<!doctype html><title>Trickle</title><p>TRICKLE-PAGE</p><p>"),
    "css": ("text/css", b"p { color: red } /*"),
    # A PNG's signature and the start of its header: the decoder waits for the rest.
    "png": ("image/png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"),
    "js": ("text/javascript", b"//"),
}
# A frame a script adds once the page has loaded, from a server that never answers.
LATE_FRAME_HTML = f"""<!doctype html><title>Late frame</title><p>LATE-FRAME-PAGE</p>
<script>
addEventListener("load", () => document.body.insertAdjacentHTML(
  "beforeend", '<iframe src="/never"></iframe>' + {spelled("FRAME-ADDED")}));
</script>
"""
# Adds an 8000 px chunk at the first scroll event 1500 px or more below the one that added the
# last, forever: a feed that loads well ahead. At a step of 720 px (0.9 of the 800 px viewport)
# that is a growth every third step, so that a busy machine still reaches the page limit within
# the behaviours' budget; two growths already make it taller than a screenshot's MAX_HEIGHT.
ENDLESS_SCROLL_HTML = """<!doctype html><title>Endless</title>
<style>body { margin: 0 }</style>
<div style="height: 1000px">top</div>
<script>
let next = 0;
addEventListener("scroll", () => {
  if (scrollY < next) return;
  next = scrollY + 1500;
  document.body.insertAdjacentHTML(
    "beforeend", '<div class=' + '"chunk" style="height: 8000px">more</div>');
});
</script>
"""
VIDEO_HTML = """<!doctype html><title>Video</title><p>VIDEO-PAGE</p>
<video src="/video?{variant}" autoplay muted preload="auto" controls width="320"></video>
"""
# Windows opened in a loop as the page loads, on timers, by clicks of a script, on scroll.
POPUPS_HTML = """<!doctype html><title>Popups</title><p>POPUPS-PAGE</p>
<a id="blank" href="/popup?link" target="_blank">a new window</a>
<script>
for (let i = 0; i < 200; i++) window.open("/popup?loop-" + i);
setInterval(() => window.open("/popup?timer"), 20);
setInterval(() => document.getElementById("blank").click(), 20);
addEventListener("scroll", () => window.open("/popup?scroll"));
</script>
"""
POPUP_HTML = "<!doctype html><title>Popup</title><script>window.open('/popup?child')</script>"
OPENER_HTML = """<!doctype html><title>Opener</title>
<button id="open" onclick="window.open('/popup?click')">open a window</button>
"""
# A link to an attachment clicked by a script, then the page sent to another one.
DOWNLOADS_HTML = f"""<!doctype html><title>Downloads</title><p>DOWNLOADS-PAGE</p>
<a id="get" href="/attachment?link" download>the file</a>
<script>
document.body.insertAdjacentHTML("beforeend", {spelled("SCRIPT-RAN")});
document.getElementById("get").click();
location.href = "/attachment?navigation";
</script>
"""
# With the id of the process that serves it: a site in the other pytest-xdist worker (the full
# profile's crawl of /downloads.html) sends another, and its downloads never count as ours.
ATTACHMENT_MARKER = f"ATTACHMENT-BODY-{os.getpid()}-".encode()
REDIRECT_TARGETS = {
    "javascript": "javascript:document.write('REDIRECTED-TO-JAVASCRIPT')",
    "file": "file:///etc/passwd",
    "data": "data:text/html,<p>REDIRECTED-TO-DATA</p>",
    "ftp": "ftp://127.0.0.1/pub/file.txt",
    "custom": "vellum-custom://open?thing=1",
}
# Each redirect as an image, a script, a stylesheet, a frame and a fetch; and the local file
# named directly, as every kind of reference SingleFile might inline.
SUBRESOURCES_HTML = """<!doctype html><title>Subresources</title><p>SUBRESOURCES-PAGE</p>
{redirects}
<img src="file:///etc/passwd"><link rel="stylesheet" href="file:///etc/passwd">
<link rel="icon" href="file:///etc/passwd"><iframe src="file:///etc/passwd"></iframe>
<script src="file:///etc/passwd"></script><object data="file:///etc/passwd"></object>
<div style="background: url(file:///etc/passwd)">styled</div>
<style>@import url(file:///etc/passwd);
@font-face {{ font-family: local-file; src: url(file:///etc/passwd) }}
p {{ font-family: local-file }}</style>
<pre id="fetched"></pre>
<script>
for (const name of {names}) {{
  fetch("/redirect/" + name).then(response => response.text()).then(
    text => document.getElementById("fetched").append(name + " read " + text + "\\n"),
    error => document.getElementById("fetched").append(name + " refused\\n"));
}}
</script>
"""
ALERTS_HTML = f"""<!doctype html><title>Alerts</title>
<script>
addEventListener("beforeunload", event => {{ event.preventDefault(); event.returnValue = ""; }});
for (let i = 0; i < 100; i++) alert("loading " + i);
setInterval(() => {{ alert("again"); confirm("sure?"); }}, 50);
addEventListener("DOMContentLoaded", () => document.body.insertAdjacentHTML(
  "beforeend", {spelled("ALERTS-DISMISSED")}));
</script>
<p>A page that will not stop asking.</p>
"""
ALERTS_FOREVER_HTML = """<!doctype html><title>Alerts forever</title><p>ASKING</p>
<script>while (true) alert("forever");</script>
"""
BUSY_HTML = """<!doctype html><title>Busy</title><p>BUSY-PAGE</p>
<script>while (true) {}</script>
"""
BUSY_AFTER_LOAD_HTML = """<!doctype html><title>Busy later</title><p>BUSY-PAGE</p>
<script>addEventListener("load", () => setTimeout(() => { while (true) {} }, 0));</script>
"""


def subresources_html() -> str:
    redirects = "\n".join(
        f'<img src="/redirect/{name}?img"><script src="/redirect/{name}?script"></script>'
        f'<link rel="stylesheet" href="/redirect/{name}?css">'
        f'<iframe src="/redirect/{name}?frame"></iframe>'
        for name in REDIRECT_TARGETS
    )
    names = "[" + ", ".join(f'"{name}"' for name in REDIRECT_TARGETS) + "]"
    return SUBRESOURCES_HTML.format(redirects=redirects, names=names)


PAGES = {
    "/calm.html": CALM_HTML,
    "/endless-scroll.html": ENDLESS_SCROLL_HTML,
    "/late-frame.html": LATE_FRAME_HTML,
    "/popups.html": POPUPS_HTML,
    "/popup": POPUP_HTML,
    "/opener.html": OPENER_HTML,
    "/downloads.html": DOWNLOADS_HTML,
    "/subresources.html": subresources_html(),
    "/alerts.html": ALERTS_HTML,
    "/alerts-forever.html": ALERTS_FOREVER_HTML,
    "/busy.html": BUSY_HTML,
    "/busy-after-load.html": BUSY_AFTER_LOAD_HTML,
}


class HostilePageHandler(HostileHandler):
    """Serve PAGES, and the routes below that misbehave; anything else is a 404. The hostile
    site's handler gives it ``send_response`` (the connection closes), ``write`` (counted)."""

    site: HostilePageSite

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        self.site.record(self.path)
        if path in PAGES:
            self.send_body(PAGES[path].encode())
        elif path == "/trickling.html":
            self.send_body(TRICKLING_HTML.format(kind=query, tag=TRICKLING_TAGS[query]).encode())
        elif path == "/video.html":
            self.send_body(VIDEO_HTML.format(variant=query).encode())
        elif path.startswith("/redirect/"):
            self.redirect(REDIRECT_TARGETS[path.removeprefix("/redirect/")])
        elif path == "/never":
            self.site.release.wait(HOLD_SECONDS)  # not a word, until the site stops
        elif path == "/trickle":
            self.trickle(*TRICKLE_STARTS[query or "html"])
        elif path == "/video":
            self.video(announced="announced" in query, slow="slow" in query)
        elif path == "/attachment":
            self.attachment("text/html" if "html" in query else "application/zip")
        else:
            self.send_body(b"<title>Not here</title>", status=HTTPStatus.NOT_FOUND)

    def send_body(self, body: bytes, *, status: int = HTTPStatus.OK) -> None:
        self.send_html(status, body)

    def redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def trickle(self, content_type: str, start: bytes) -> None:
        """Start a body, then send a byte every 0.2 s, never ending it."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        self.end_headers()
        if not self.write(start):
            return
        deadline = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < deadline and not self.site.release.wait(0.2):
            if not self.write(b" " if content_type != "image/png" else b"\x00"):
                return

    def video(self, *, announced: bool, slow: bool) -> None:
        """Send 1 GiB of zeros as video/mp4, with its Content-Length or without, fast or
        slowly (a chunk every 50 ms)."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "video/mp4")
        if announced:
            self.send_header("Content-Length", str(GIB))
        self.end_headers()
        for _ in range(GIB // len(CHUNK)):
            if self.site.release.is_set() or not self.write(CHUNK):
                return
            if slow:
                self.site.release.wait(0.05)

    def attachment(self, content_type: str) -> None:
        """Send a 1 GiB attachment (Content-Disposition): a marker, then zeros."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Disposition", 'attachment; filename="hostile.zip"')
        self.send_header("Content-Length", str(GIB))
        self.end_headers()
        if not self.write(ATTACHMENT_MARKER * 64):
            return
        for _ in range(GIB // len(CHUNK)):
            if self.site.release.is_set() or not self.write(CHUNK):
                return


class HostilePageSite(HostileSite):
    """The running site: ``url(path)``; how often each path (with its query) was asked for
    (``requests``), and how many body bytes were sent for it (``sent_under``)."""

    def handler(self):
        return type("BoundHostilePageHandler", (HostilePageHandler,), {"site": self})

    def sent_under(self, prefix: str) -> int:
        """Body bytes sent for every request whose path (with query) starts with ``prefix``."""
        with self._lock:
            return sum(size for path, size in self._sent.items() if path.startswith(prefix))

    def asked(self, prefix: str) -> int:
        """Requests whose path (with query) starts with ``prefix``."""
        with self._lock:
            return sum(count for path, count in self.requests.items() if path.startswith(prefix))

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self._sent.clear()
