"""A page to archive and then look at, served on 127.0.0.1 by servers that count every request
(issue 20: viewing a snapshot never reaches the live web).

``/page.html`` has a stylesheet (with a background image of its own), a photo, a video, and a
script that, once the page has loaded, adds an image and fetches JSON: wget saves the first
ones and never runs the script. It also names an image on a second server, ``elsewhere``, by an
absolute URL: that server answers 404 until the page is archived (``put_back``), so no capture
holds the image, and a viewer that asked the live web for it would be counted there.
"""

from __future__ import annotations

import io
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from PIL import Image, ImageDraw

from archive.testing import LocalServer
from core.tests.tiny_media import webm_video

TITLE = "Parchment under glass"
HEADING = "Parchment under glass"
WORDS = "Every output of this page is opened while its server counts requests."
PHOTO_SIZE = (240, 160)


def photo_png() -> bytes:
    """Return a PHOTO_SIZE PNG with stripes and a disc, so that a view of it is easy to see."""
    image = Image.new("RGB", PHOTO_SIZE, (240, 228, 200))
    draw = ImageDraw.Draw(image)
    for x in range(0, PHOTO_SIZE[0], 30):
        draw.rectangle([x, 0, x + 14, PHOTO_SIZE[1]], fill=(65, 118, 144))
    draw.ellipse([70, 30, 170, 130], fill=(160, 40, 40))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def tile_png() -> bytes:
    """Return a small PNG for the stylesheet's background."""
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (250, 244, 230)).save(buffer, "PNG")
    return buffer.getvalue()


PAGE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="stylesheet" href="css/site.css"></head>
<body>
  <h1 id="heading">{heading}</h1>
  <p id="words">{words}</p>
  <img id="photo" src="img/photo.png" width="240" height="160" alt="a saved photo">
  <img id="elsewhere" src="{elsewhere}/img/absent.png" width="40" height="40" alt="never saved">
  <video id="clip" controls src="media/clip.webm" width="128" height="96"></video>
  <script src="js/late.js"></script>
</body></html>
"""
SITE_CSS = """body { background: url(../img/tile.png); font-family: Georgia, serif; margin: 24px; }
h1 { color: rgb(128, 32, 32); }
"""
# Runs in a browser only: neither wget nor a viewer without scripts ever asks for these.
LATE_JS = """window.addEventListener("load", () => {
  const late = new Image(); late.id = "late"; late.src = "/img/late.png";
  document.body.appendChild(late);
  fetch("/api/live.json").then((answer) => answer.json()).then((data) => {
    const note = document.createElement("p"); note.id = "live"; note.textContent = data.note;
    document.body.appendChild(note);
  }).catch(() => {});
});
"""


class CountingServer(LocalServer):
    """A server on 127.0.0.1 that answers ``files`` (path -> (Content-Type, bytes)), 404 for
    anything else, and records the path of every request in ``requests``."""

    def __init__(self, files: dict[str, tuple[str, bytes]]) -> None:
        self.files = files
        self.requests: list[str] = []
        self.lock = threading.Lock()
        super().__init__()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                with server.lock:
                    server.requests.append(self.path)
                content_type, body = server.files.get(path, ("text/plain", b"not found"))
                self.send_response(HTTPStatus.OK if path in server.files else HTTPStatus.NOT_FOUND)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            do_HEAD = do_POST = do_GET

            def log_message(self, format: str, *args: object) -> None:
                """Keep test output quiet."""

        return Handler

    def count(self) -> int:
        """Return how many requests arrived so far."""
        with self.lock:
            return len(self.requests)

    def forget(self) -> None:
        """Forget the requests counted so far."""
        with self.lock:
            self.requests.clear()


def counted_site(elsewhere: str) -> CountingServer:
    """Return (not started) the site of ``/page.html``, whose never-saved image is on
    ``elsewhere`` (``http://127.0.0.1:<port>``)."""
    html = PAGE_HTML.format(title=TITLE, heading=HEADING, words=WORDS, elsewhere=elsewhere)
    return CountingServer(
        {
            "/page.html": ("text/html; charset=utf-8", html.encode()),
            "/css/site.css": ("text/css", SITE_CSS.encode()),
            "/img/photo.png": ("image/png", photo_png()),
            "/img/tile.png": ("image/png", tile_png()),
            "/img/late.png": ("image/png", photo_png()),
            "/media/clip.webm": ("video/webm", webm_video((128, 96), (40, 120, 60))),
            "/js/late.js": ("text/javascript", LATE_JS.encode()),
            "/api/live.json": ("application/json", b'{"note": "fetched from the live site"}'),
        }
    )


def elsewhere_server() -> CountingServer:
    """Return (not started) the second server: it has nothing until ``put_back``."""
    return CountingServer({})


def put_back(elsewhere: CountingServer) -> None:
    """Serve the image that no capture saved from ``elsewhere``, as the live site would now."""
    elsewhere.files["/img/absent.png"] = ("image/png", tile_png())
