"""A generated web site of many small pages on 127.0.0.1, for fault-injection and load tests.

``/page/<n>.html`` for ``n`` in ``0..pages-1``: a title, a paragraph, an image (``/img/<k>.png``,
one of a few), a declared icon and links to three other pages. Every ``slow_every``-th page
answers after ``slow_seconds`` (so that a killed actor is often caught in the middle of an
extractor). ``/favicon.ico`` exists; anything else is a 404. Pages are built on request, so a
site of thousands costs nothing to set up.
"""

from __future__ import annotations

import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from archive.testing import LocalServer
from core.tests.site import FAVICON_ICO, tiny_png

IMAGES = [tiny_png((40 * k, 255 - 40 * k, 90)) for k in range(5)]
PAGE_PATH = re.compile(r"/page/(\d+)\.html")
IMAGE_PATH = re.compile(r"/img/(\d+)\.png")

PAGE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Generated page {n}</title>
<link rel="icon" href="/favicon.ico"></head>
<body>
<h1>Page {n} of {pages}</h1>
<p>This is generated page number {n}. {words}</p>
<img src="/img/{image}.png" alt="picture {image}">
<ul>{links}</ul>
</body></html>
"""


def page_html(n: int, pages: int) -> str:
    """Return the HTML of page ``n`` of a site of ``pages`` pages."""
    targets = [(n + 1) % pages, (n * 7 + 3) % pages, (n + pages // 2) % pages]
    others = [m for m in dict.fromkeys(targets) if m != n]
    links = "".join(f'<li><a href="/page/{m}.html">Page {m}</a></li>' for m in others)
    words = " ".join(f"word{(n * 31 + i) % 97}" for i in range(12))
    return PAGE_HTML.format(n=n, pages=pages, words=words, image=n % len(IMAGES), links=links)


class ManyPagesSite(LocalServer):
    """The running site: ``urls()`` lists every page; ``stop()`` ends it (and any slow wait)."""

    def __init__(self, pages: int, *, slow_every: int | None = None, slow_seconds: float = 1.5):
        self.pages = pages
        self.slow_every = slow_every
        self.slow_seconds = slow_seconds
        self.requests = 0
        self._lock = threading.Lock()
        super().__init__()  # its ``release`` is set at stop(): slow pages answer at once

    def handler(self):
        return type("BoundHandler", (_Handler,), {"site": self})

    def page_url(self, n: int) -> str:
        return self.url(f"/page/{n}.html")

    def urls(self) -> list[str]:
        return [self.page_url(n) for n in range(self.pages)]

    def is_slow(self, n: int) -> bool:
        return bool(self.slow_every) and n % self.slow_every == 0

    def count_request(self) -> None:
        with self._lock:
            self.requests += 1


class _Handler(BaseHTTPRequestHandler):
    site: ManyPagesSite

    def do_GET(self) -> None:
        self.site.count_request()
        path = self.path.split("?")[0]
        page = PAGE_PATH.fullmatch(path)
        image = IMAGE_PATH.fullmatch(path)
        if page and int(page.group(1)) < self.site.pages:
            n = int(page.group(1))
            if self.site.is_slow(n):
                self.site.release.wait(self.site.slow_seconds)
            self._send(HTTPStatus.OK, "text/html; charset=utf-8", page_html(n, self.site.pages))
        elif image and int(image.group(1)) < len(IMAGES):
            self._send(HTTPStatus.OK, "image/png", IMAGES[int(image.group(1))])
        elif path == "/favicon.ico":
            self._send(HTTPStatus.OK, "image/x-icon", FAVICON_ICO)
        else:
            self._send(HTTPStatus.NOT_FOUND, "text/html", "<title>Not Found</title>")

    def _send(self, status: int, content_type: str, body: bytes | str) -> None:
        if isinstance(body, str):
            body = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client (an extractor whose actor was killed) went away

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""
