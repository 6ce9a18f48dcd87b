"""A site for politeness and scope (issue 21, item 2), served on 127.0.0.1: a robots.txt that
disallows ``/private/``, an index linking to PAGES pages, two private pages, a page under
``/other/`` and a link off the site; every request is counted, and so are the requests in
flight at once (the most ever seen is ``most_at_once``)."""

from __future__ import annotations

import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from archive.testing import LocalServer

PAGES = 30
ROBOTS_TXT = b"User-agent: *\nDisallow: /private/\n"
PRIVATE = ("/private/a.html", "/private/b.html")
PAGE_SECONDS = 0.1  # each page answers this late, so that fetches of one host overlap if allowed


def page(title: str, links: list[str]) -> bytes:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body><h1>{title}</h1><ul>{anchors}</ul></body></html>"
    ).encode()


class PoliteSite(LocalServer):
    """The server; ``requests`` lists the paths asked for, in order."""

    def __init__(self, *, robots: bytes = ROBOTS_TXT, too_many: bool = False) -> None:
        links = [f"/p/{n}.html" for n in range(1, PAGES + 1)]
        links += [*PRIVATE, "/other/x.html", "http://example.invalid/away"]
        self.files = {"/index.html": page("Index", links), "/robots.txt": robots}
        for n in range(1, PAGES + 1):
            self.files[f"/p/{n}.html"] = page(f"Page {n}", ["/index.html"])
        for path in (*PRIVATE, "/other/x.html"):
            self.files[path] = page(path, [])
        self.too_many = too_many
        self.requests: list[str] = []
        self.in_flight = 0
        self.most_at_once = 0
        self.lock = threading.Lock()
        super().__init__()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                with server.lock:
                    server.requests.append(path)
                    server.in_flight += 1
                    server.most_at_once = max(server.most_at_once, server.in_flight)
                try:
                    self._answer(path)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self, path: str) -> None:
                if path.endswith(".html"):
                    time.sleep(PAGE_SECONDS)
                if server.too_many and path != "/robots.txt":
                    self.send_response(HTTPStatus.TOO_MANY_REQUESTS)
                    self.send_header("Retry-After", "120")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = server.files.get(path)
                self.send_response(HTTPStatus.OK if body is not None else HTTPStatus.NOT_FOUND)
                self.send_header(
                    "Content-Type", "text/plain" if path.endswith("txt") else "text/html"
                )
                self.send_header("Content-Length", str(len(body or b"")))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, format: str, *args: object) -> None:
                """Keep test output quiet."""

        return Handler

    def asked(self, path: str) -> int:
        """How many times ``path`` was requested."""
        with self.lock:
            return self.requests.count(path)
