"""A small test web site served on 127.0.0.1 by a real threaded HTTP server (STYLE.md, Tests).

Pages cover what the extractors meet in the wild: HTML with images, a stylesheet and a declared
icon, a redirect, a 404, a 503 with Retry-After, a slow page, a large file, JSON and a feed, a
page rendered by JavaScript, a page whose script never ends, a PDF and images.
The conftest's ``live_site`` fixture starts one ``LiveSite`` per test session.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import zlib
from functools import partial
from html import escape
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from archive.testing import LocalServer

# Seconds /slow waits before answering: longer than any test timeout, short enough that a
# forgotten connection cannot hold a test run for long.
SLOW_SECONDS = 30
RETRY_AFTER_SECONDS = 7
LARGE_FILE_BYTES = 3 * 1024 * 1024


def tiny_png(rgb: tuple[int, int, int]) -> bytes:
    """Return a valid 1x1 PNG of one colour (PNG spec: signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00" + bytes(rgb))  # filter byte 0, then one pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def tiny_ico(png: bytes) -> bytes:
    """Return an ICO file holding ``png`` as its one 1x1 image (ICONDIR + ICONDIRENTRY + PNG)."""
    icondir = struct.pack("<HHH", 0, 1, 1)
    entry = struct.pack("<BBBBHHII", 1, 1, 0, 0, 1, 32, len(png), 6 + 16)
    return icondir + entry + png


ICON_PNG = tiny_png((200, 30, 30))
PIXEL_PNG = tiny_png((30, 200, 30))
BACKGROUND_PNG = tiny_png((30, 30, 200))
FAVICON_ICO = tiny_ico(tiny_png((0, 0, 0)))

INDEX_HTML = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>
    Vellum   Test
    Home
  </title>
  <link rel="icon" href="/static/icon.png">
  <link rel="stylesheet" href="/static/style.css">
</head>
<body id="top">
  <h1>Welcome to the Vellum test site</h1>
  <p>This paragraph is archived by every extractor.</p>
  <img src="/static/pixel.png" alt="a pixel">
  <ul>
    <li><a href="page2.html">Page two</a></li>
    <li><a href="/page3.html">Page three</a></li>
    <li><a href="/missing.html">A missing page</a></li>
    <li><a href="http://example.invalid/x">Elsewhere</a></li>
    <li><a href="mailto:someone@example.invalid">Write to us</a></li>
    <li><a href="#top">Back to top</a></li>
    <li><a href="/page2.html#section">Page two again, with a fragment</a></li>
  </ul>
</body>
</html>
"""

PAGE2_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Page Two</title></head>
<body>
  <p>The second page of the test site.</p>
  <a href="/">Home</a> <a href="page3.html">Page three</a>
</body></html>
"""

PAGE3_HTML = """<!doctype html>
<html><head><meta charset="utf-8"></head>
<body><p>A page without a title, but with words in it.</p></body></html>
"""

# Declares its charset only in a <meta>; "café" and "naïve" are Latin-1 bytes on the wire.
LATIN1_HTML = """<!doctype html>
<html><head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">
<title>Caf\u00e9</title></head>
<body><p>A na\u00efve caf\u00e9 page.</p></body></html>
"""

BASE_HTML = """<!doctype html>
<html><head><title>Based</title><base href="http://127.0.0.1:{port}/docs/"></head>
<body>
  <a href=" guide.html ">Guide</a>
  <a href="../top.html">Top</a>
  <map name="m"><area href="area.html" alt="An area"></map>
  <a href="javascript:void(0)">Script</a>
  <a>No href</a>
  <a href="guide.html">Guide again</a>
</body></html>
"""

NO_LINKS_HTML = """<!doctype html>
<html><head><title>Lonely</title></head><body><p>No links here.</p></body></html>
"""

BROKEN_REQUISITE_HTML = """<!doctype html>
<html><head><title>Broken image</title></head>
<body><p>The image below is gone.</p><img src="/static/gone.png" alt="gone"></body></html>
"""

STYLE_CSS = """body { background: url(bg.png); font-family: serif; }
"""

FEED_XML = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel>
  <title>Vellum test feed</title>
  <link>http://127.0.0.1/</link>
  <description>Two items</description>
  <item><title>Home</title><link>http://127.0.0.1/</link></item>
  <item><title>Page two</title><link>http://127.0.0.1/page2.html</link></item>
</channel></rss>
"""

SLOW_HTML = """<!doctype html>
<html><head><title>Finally</title></head><body>Too late.</body></html>
"""

BROKEN_ICON_HTML = """<!doctype html>
<html><head><title>Broken icon</title><link rel="shortcut icon" href="static/nope.png">
<link rel="icon" href="data:image/png;base64,iVBORw0KGgo="></head>
<body><p>The declared icon is gone.</p></body></html>
"""

# What shows only after the reader acts (a menu opened by hovering, a class a click would add,
# with the font it uses) is part of the page: an archived copy keeps it.
INTERACTIVE_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Menus</title>
<style>
@font-face { font-family: "Opened Font"; src: url(/static/opened.woff2) format("woff2"); }
.menu { display: none; }
nav:hover .menu { display: block; }
.opened { font-family: "Opened Font"; outline: 3px dashed rgb(1, 2, 3); }
</style></head>
<body><nav>Menu<ul class="menu"><li>Shown on hover</li></ul></nav>
<p>Hover over the menu to open it.</p></body></html>
"""

# Rendered by its script: the heading and list exist only after it runs, and one item only once
# a fetch of /data.json has answered (a capture must wait for the network to go quiet).
RENDERED_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Rendered by script</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body>
<noscript>This page needs JavaScript.</noscript>
<script>
  const heading = document.createElement("h1");
  heading.id = "added-by-script";
  heading.dataset.visit = String(Math.random());  // tells one page load from another
  heading.textContent = "Written by JavaScript";
  document.body.appendChild(heading);
  setTimeout(() => {
    fetch("/data.json").then((response) => response.json()).then((data) => {
      const item = document.createElement("p");
      item.id = "fetched-by-script";
      item.textContent = "Fetched: " + data.hello;
      document.body.appendChild(item);
    });
  }, 300);
</script>
</body></html>
"""

# Never fires its load event in time: the script keeps the renderer busy for good.
HUNG_HTML = """<!doctype html>
<html><head><title>Hung</title></head>
<body><p>Busy.</p><script>while (true) {}</script></body></html>
"""


def tiny_pdf(text: str) -> bytes:
    """Return a one-page PDF showing ``text`` (PDF 1.4: catalog, pages, page, font, content,
    and a cross-reference table with each object's byte offset)."""
    stream = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
        b" /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


NOT_FOUND_HTML = """<!doctype html>
<html><head><title>Not Found</title></head><body>No such page.</body></html>
"""


def build_site(root: Path, port: int, *, favicon: bool = True) -> None:
    """Write the site's static files under ``root`` (pages that name their own port need it).

    Without ``favicon`` there is no /favicon.ico, so a page without a working declared icon has
    no icon at all.
    """
    files: dict[str, str | bytes] = {
        "index.html": INDEX_HTML,
        "page2.html": PAGE2_HTML,
        "page3.html": PAGE3_HTML,
        "latin1.html": LATIN1_HTML.encode("iso-8859-1"),
        "base.html": BASE_HTML.format(port=port),
        "no-links.html": NO_LINKS_HTML,
        "broken-requisite.html": BROKEN_REQUISITE_HTML,
        "broken-icon.html": BROKEN_ICON_HTML,
        "static/style.css": STYLE_CSS,
        "static/icon.png": ICON_PNG,
        "static/pixel.png": PIXEL_PNG,
        "static/bg.png": BACKGROUND_PNG,
        "data.json": '{"hello": "world"}\n',
        "rendered.html": RENDERED_HTML,
        "interactive.html": INTERACTIVE_HTML,
        "static/opened.woff2": b"wOF2" + bytes(range(64)),
        "hung.html": HUNG_HTML,
        "document.pdf": tiny_pdf("A PDF served by the test site"),
        "feed.xml": FEED_XML,
        # Deterministic but incompressible enough that nobody mistakes it for text.
        "large.bin": bytes(range(256)) * (LARGE_FILE_BYTES // 256),
    }
    if favicon:
        files["favicon.ico"] = FAVICON_ICO
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)


class SiteHandler(SimpleHTTPRequestHandler):
    """Serve the static files, plus the special paths in ``ROUTES``."""

    extensions_map = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".ico": "image/x-icon",
        ".json": "application/json",
        ".xml": "application/rss+xml",
        ".bin": "application/octet-stream",
        ".pdf": "application/pdf",
    }
    release: threading.Event  # set by LiveSite.stop() so /slow gives up at teardown
    requests: list[tuple[str, dict[str, str]]]  # LiveSite.requests: (path, headers) of each GET

    def end_headers(self) -> None:
        # HTTP/1.0 closes after each response; saying so keeps wget from reusing the connection
        # for a page's requisites and failing on the closed socket.
        self.send_header("Connection", "close")
        super().end_headers()

    def do_GET(self) -> None:
        self.requests.append((self.path, dict(self.headers.items())))
        route = self.ROUTES.get(self.path.split("?")[0])
        if route is None:
            super().do_GET()
        else:
            route(self)

    def send_page(self, status: int, body: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        """Send ``body`` as UTF-8 HTML with ``status`` and any extra headers."""
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def redirect(self) -> None:
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", "/page2.html")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def redirect_to(self) -> None:
        """Redirect to the ``url`` query parameter: a hop to wherever a page points."""
        target = parse_qs(urlsplit(self.path).query).get("url", ["/"])[0]
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def missing(self) -> None:
        self.send_page(HTTPStatus.NOT_FOUND, NOT_FOUND_HTML)

    def server_error(self) -> None:
        self.send_page(
            HTTPStatus.SERVICE_UNAVAILABLE,
            "<title>Busy</title>Try again later.",
            (("Retry-After", str(RETRY_AFTER_SECONDS)),),
        )

    def slow(self) -> None:
        self.release.wait(SLOW_SECONDS)
        # The client gave up long ago (that is the point of this page): ignore a broken pipe.
        with contextlib.suppress(OSError):
            self.send_page(HTTPStatus.OK, SLOW_HTML)

    def multi_header(self) -> None:
        self.send_page(HTTPStatus.OK, PAGE2_HTML, (("X-Vellum", "one"), ("X-Vellum", "two")))

    def echo_headers(self) -> None:
        """A page titled with the request's User-Agent, listing every header it came with."""
        items = "".join(
            f"<li>{escape(name)}: {escape(value)}</li>" for name, value in self.headers.items()
        )
        title = escape(self.headers.get("User-Agent", ""))
        self.send_page(HTTPStatus.OK, f"<title>{title}</title><ul>{items}</ul>")

    ROUTES = {
        "/echo-headers": echo_headers,
        "/redirect": redirect,
        "/redirect-to": redirect_to,
        "/missing.html": missing,
        "/server-error": server_error,
        "/slow": slow,
        "/multi-header": multi_header,
    }

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class LiveSite(LocalServer):
    """The running test site: ``url(path)`` gives an absolute URL on it."""

    def __init__(self, root: Path, *, favicon: bool = True) -> None:
        self.root = root
        self.requests: list[tuple[str, dict[str, str]]] = []  # what each GET came with
        super().__init__()
        build_site(root, self.port, favicon=favicon)

    def handler(self):
        bound = type(
            "BoundSiteHandler",
            (SiteHandler,),
            {"release": self.release, "requests": self.requests},
        )
        return partial(bound, directory=str(self.root))
