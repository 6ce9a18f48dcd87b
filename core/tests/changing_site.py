"""A one-page test site whose page a test rewrites between captures, served on 127.0.0.1: the
same URL archived again and again, changed or not (the timeline's end-to-end tests)."""

from __future__ import annotations

import threading
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from archive.testing import LocalServer


def notice_page(price: str) -> str:
    """An HTML page of a few paragraphs in which only ``price`` (a word) differs."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Opening hours</title>
<style>body {{ font: 18px/1.5 sans-serif; margin: 40px; }} .price {{ color: #1d4ed8; }}</style>
</head><body>
<h1>Opening hours of the reading room</h1>
<p>The reading room opens at nine in the morning and closes at six in the evening.</p>
<p class="price">A day ticket costs {escape(price)} pounds for every visitor.</p>
<p>Manuscripts are brought to your desk within half an hour of asking.</p>
</body></html>
"""


class ChangingHandler(BaseHTTPRequestHandler):
    """Serve ``site.page`` at ``/`` and ``/page.html``; 404 for anything else."""

    site: ChangingSite

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        with self.site.lock:
            self.site.hits += 1
            body = self.site.page.encode()
        if path not in ("/", "/page.html"):
            body, status = b"<p>Not found</p>", HTTPStatus.NOT_FOUND
        else:
            status = HTTPStatus.OK
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class ChangingSite(LocalServer):
    """The running site; set ``page`` (HTML text) to change what it serves next."""

    def __init__(self, page: str) -> None:
        self.page = page
        self.hits = 0
        self.lock = threading.Lock()
        super().__init__()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (ChangingHandler,), {"site": self})
