"""A web server that misbehaves on purpose, on 127.0.0.1, for the hostile input suite.

Each path is one way a server goes wrong (issue 3, item 7): it never answers, trickles a byte a
second, redirects in a loop, sends 1 GiB, promises more than it sends, sends a gzip bomb, invalid
HTML, a Content-Type that lies, a 500 before a 200, or resets the connection (issue 19). Large
bodies are generated as they are sent, never held in memory, and stop as soon as the client goes
away; the server counts the bytes it sent per path so that a test can check the client stopped
early.

A route answers for its path and for any path below it, with or without ``.git``: the git
extractor asks for ``<url>/info/refs`` and drops the query, so ``/huge/html/case-3.git`` gets
the same answer as ``/huge?html`` (a route's variant is read from anywhere in the path).

Tests start one ``HostileSite`` with a fixture (core/tests/test_hostile_servers.py) and stop it
afterwards; ``stop()`` releases every handler that is still waiting.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import zlib
from collections import Counter
from functools import cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from archive.testing import LocalServer
from core.tests.site import tiny_png

# Seconds a handler that never answers (or trickles) holds its connection at most: longer than
# any test's extractor timeout, short enough that a forgotten connection cannot hold a run.
HOLD_SECONDS = 30
HUGE_BYTES = 1024**3  # what /huge offers: 1 GiB
CHUNK = bytes(range(256)) * 256  # 64 KiB, sent again and again
GZIP_BOMB_BYTES = 64 * 1024**2  # what /gzip-bomb inflates to: 64 MiB of zeros
SHORT_PROMISED = 100_000  # the Content-Length /short announces ...
SHORT_BODY = b"<!doctype html><title>Cut short</title><p>" + b"x" * 900  # ... and what it sends

HTML_PAGE = (
    b"<!doctype html><html><head><title>A lying page</title></head><body>"
    b'<p>Real HTML, whatever the header says.</p><a href="/elsewhere">a link</a></body></html>'
)
PNG_BYTES = tiny_png((10, 20, 30))

# Markup every parser has to survive: unclosed and misnested tags, markup inside <title>, NUL
# and invalid UTF-8 bytes (under a charset nobody knows), hrefs that are not URLs, a <base> that
# is not one either, a huge attribute and an unterminated comment.
INVALID_HTML = (
    b"<html><head><base href='http://[::1'><title>Broken <b>title</title>"
    b"<body><p><div><span>Survivor</p></div></i><table><tr><td>cell<td>\x00nul\xff\xfe bytes"
    b'<a href="http://[invalid">bad ipv6</a><a href="http://exa mple.com/">space</a>'
    b'<a href="javascript:alert(1)">js</a><a href="/ok">ok link</a>'
    b'<a href="http://127.0.0.1:99999/">bad port</a><img src=">'
    b"<p " + b'x="' + b"y" * 100_000 + b'">' + b"<!-- never closed <p>after"
)
# Nesting deep enough to break a parser that recurses once per element.
DEEP_HTML = b"<!doctype html><title>Deep</title><body>" + b"<div>" * 5_000 + b"deep text"


@cache
def gzip_bomb() -> bytes:
    """Return GZIP_BOMB_BYTES of zeros, gzip-compressed (about 64 KiB; made once)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip container
    zeros = bytes(1024**2)
    parts = [compressor.compress(zeros) for _ in range(GZIP_BOMB_BYTES // len(zeros))]
    return b"".join([*parts, compressor.flush()])


class HostileHandler(BaseHTTPRequestHandler):
    """Answer each path in ``ROUTES`` badly; anything else is a 404."""

    # HTTP/1.0: a body without Content-Length ends when the connection closes.
    protocol_version = "HTTP/1.0"
    site: HostileSite

    def do_GET(self) -> None:
        first_segment = self.path.split("?")[0].split("/")[1]
        self.site.record(self.path)
        route = self.ROUTES.get("/" + first_segment.removesuffix(".git"))
        if route is None:
            self.send_html(HTTPStatus.NOT_FOUND, b"<title>Not here</title>")
        else:
            route(self)

    # --- helpers ---------------------------------------------------------------------------------

    def send_response(self, code: int, message: str | None = None) -> None:
        """Start a response that says it closes the connection (as this server always does).

        Without it wget may try to reuse the connection for a redirect and find it closed.
        """
        super().send_response(code, message)
        self.send_header("Connection", "close")

    def send_html(self, status: int, body: bytes, content_type: str = "text/html") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.write(body)

    def write(self, data: bytes) -> bool:
        """Send ``data``, counting it for the path; return False once the client has gone."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            return False
        self.site.count_sent(self.path, len(data))
        return True

    def hold(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the site stops first; return False if it did."""
        return not self.site.release.wait(seconds)

    # --- the routes ------------------------------------------------------------------------------

    def never(self) -> None:
        """Read the request, then say nothing until the client or the site gives up."""
        self.hold(HOLD_SECONDS)
        self.close_connection = True

    def trickle(self) -> None:
        """Start a page, then send one byte a second."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        if not self.write(b"<!doctype html><title>Trickle</title><p>"):
            return
        deadline = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < deadline and self.hold(1):
            if not self.write(b"."):
                return

    def loop(self) -> None:
        """Redirect to itself (query included), forever."""
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def huge(self) -> None:
        """Send 1 GiB (no Content-Length unless ?announced), generated as it goes."""
        content_type = "text/html" if "html" in self.path else "application/octet-stream"
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        if "announced" in self.path:
            self.send_header("Content-Length", str(HUGE_BYTES))
        self.end_headers()
        if content_type == "text/html" and not self.write(b"<!doctype html><title>Huge</title>"):
            return
        for _ in range(HUGE_BYTES // len(CHUNK)):
            if self.site.release.is_set() or not self.write(CHUNK):
                return

    def short(self) -> None:
        """Promise SHORT_PROMISED bytes, send far fewer, and close the connection."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(SHORT_PROMISED))
        self.end_headers()
        self.write(SHORT_BODY)
        self.close_connection = True

    def bomb(self) -> None:
        """Send a small gzip body that inflates to GZIP_BOMB_BYTES of zeros."""
        body = gzip_bomb()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.write(body)

    def invalid_html(self) -> None:
        self.send_html(HTTPStatus.OK, INVALID_HTML, "text/html; charset=no-such-charset")

    def deep_html(self) -> None:
        self.send_html(HTTPStatus.OK, DEEP_HTML)

    def html_as_png(self) -> None:
        self.send_html(HTTPStatus.OK, HTML_PAGE, "image/png")

    def png_as_html(self) -> None:
        self.send_html(HTTPStatus.OK, PNG_BYTES, "text/html")

    def flaky(self) -> None:
        """Fail with a 500 the first time a URL (path and query) is asked for, then serve it."""
        if self.site.requests[self.path] == 1:
            self.send_html(HTTPStatus.INTERNAL_SERVER_ERROR, b"<title>Oops</title>")
        else:
            self.send_html(HTTPStatus.OK, b"<title>Second time lucky</title><p>Served.</p>")

    def empty_reply(self) -> None:
        """Close the connection without a word."""
        self.close_connection = True

    def reset(self) -> None:
        """Read the request, then reset the connection: an RST (a zero linger time on close),
        not the orderly close of /empty-reply."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    ROUTES = {
        "/never": never,
        "/trickle": trickle,
        "/loop": loop,
        "/huge": huge,
        "/short": short,
        "/gzip-bomb": bomb,
        "/invalid-html": invalid_html,
        "/deep-html": deep_html,
        "/html-as-png": html_as_png,
        "/png-as-html": png_as_html,
        "/flaky": flaky,
        "/empty-reply": empty_reply,
        "/reset": reset,
    }

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class HostileSite(LocalServer):
    """The running server: ``url(path)`` gives an absolute URL; ``sent(path)`` the bytes sent."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()  # requests per path with query
        self._sent: Counter[str] = Counter()  # body bytes sent per path with query
        self._lock = threading.Lock()
        super().__init__()

    def handler(self):
        return type("BoundHostileHandler", (HostileHandler,), {"site": self})

    def record(self, path: str) -> None:
        with self._lock:
            self.requests[path] += 1

    def count_sent(self, path: str, size: int) -> None:
        with self._lock:
            self._sent[path] += size

    def sent(self, path: str) -> int:
        """Bytes written to the sockets of every request for ``path`` (with its query)."""
        with self._lock:
            return self._sent[path]

    def sent_containing(self, marker: str) -> int:
        """Bytes written for every request whose path (with its query) contains ``marker``."""
        with self._lock:
            return sum(size for path, size in self._sent.items() if marker in path)

    def requests_containing(self, marker: str) -> int:
        """Requests whose path (with its query) contains ``marker``."""
        with self._lock:
            return sum(count for path, count in self.requests.items() if marker in path)

    def start(self) -> HostileSite:
        gzip_bomb()  # made now, so that no request waits for it (and times out on a busy machine)
        return super().start()
