"""The egress proxy: every fetch a tool makes passes the address policy on its way out.

wget, curl, git and yt-dlp resolve host names themselves and follow redirects and page requisites
to any host, and none of them can be told which addresses to refuse. So each run of a tool gets
a forward proxy of its own on 127.0.0.1 (``http_proxy``/``https_proxy`` in its environment), and
the shared Chromium gets one with ``--proxy-server``. The proxy resolves every host itself,
checks each address with core/extractors/addresses.py and connects to the address it checked,
so a redirect hop, a requisite on another host or a name that resolves to 127.0.0.1 is refused
like a seed. A refusal answers ``403`` with the reason as its reason phrase (tools log it) and
is kept in ``refusals``, which the caller records on the archive result: never silent.

HTTPS goes through ``CONNECT`` tunnels, so the proxy never sees or changes what TLS carries; a
plain-HTTP request is passed on with ``Connection: close`` and the bytes of both directions are
relayed unchanged, so wget's WARC records hold what the server sent (RFC 9110 §7.6.1 hop-by-hop
fields aside). Request heads are read with the standard library's HTTP parser (http.server),
each taken from the socket whole and alone (``_take_head``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import selectors
import socket
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from core.extractors.addresses import (
    AddressRefused,
    Networks,
    Refusal,
    refused_message,
    resolve_allowed,
)

logger = logging.getLogger(__name__)

# How the proxy names itself in the Proxy-Status field of its own answers (RFC 9209 §2).
PROXY_NAME = "vellum-egress"
# Seconds a tool on 127.0.0.1 may take to send its request (and each later write to it); the
# connection to the origin server must open within settings.CONNECT_TIMEOUT_SECONDS.
CLIENT_TIMEOUT = 30
IDLE_TIMEOUT = 300  # seconds a relay may see no byte before both sides are closed
RELAY_CHUNK = 64 * 1024  # bytes read at once
# Hop-by-hop fields (RFC 9110 §7.6.1) and the proxy's own: never passed to the origin.
HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "proxy-authorization", "te"}
HOP_BY_HOP_B = {name.encode() for name in HOP_BY_HOP}
MAX_HEAD_BYTES = 64 * 1024  # a response head longer than this is passed on unchanged
# Bytes of a request head at most (32 KiB is nginx's default); a longer one is answered 431
# (RFC 6585 §5), as is one its client cut short.
MAX_REQUEST_HEAD_BYTES = 64 * 1024
# Variables that point each tool at the proxy; ``no_proxy`` is emptied so that no host (not
# even localhost, which some tools skip by default) goes around it.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy")
BYPASS_VARIABLES = ("no_proxy", "NO_PROXY")


class EgressProxy:
    """A forward proxy on 127.0.0.1 that refuses what the address policy refuses.

    Use it as a context manager or with ``start()``/``stop()``. ``url`` is
    ``http://127.0.0.1:<port>``; ``refusals`` lists what it refused, oldest first, and
    ``unreachable`` the hosts it could not resolve or reach.
    """

    def __init__(self, *, also: Networks = ()) -> None:
        self.also = also  # networks opened for this proxy alone (addresses.refusal_reason)
        self.refusals: list[Refusal] = []
        # Hosts it could not resolve or connect to: a tool sees the proxy's 502 or 504, so the
        # caller reads the real network error here.
        self.unreachable: list[Refusal] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._listener is not None, "the proxy is not running"
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def start(self) -> EgressProxy:
        """Listen on a free port of 127.0.0.1 and serve in a daemon thread."""
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._thread = threading.Thread(target=self._accept, name="egress-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting; connections still open end with their clients (or IDLE_TIMEOUT)."""
        if self._listener is None:
            return
        # shutdown() wakes the thread blocked in accept() at once (close() alone may not).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)
        self._listener = None

    def environment(self) -> dict[str, str]:
        """Return the variables that send a tool's every fetch through this proxy."""
        variables = {name: self.url for name in PROXY_VARIABLES}
        variables |= {name.upper(): self.url for name in PROXY_VARIABLES}
        return variables | dict.fromkeys(BYPASS_VARIABLES, "")

    def take(self) -> tuple[list[Refusal], list[Refusal]]:
        """Return ``(refusals, unreachable)`` so far and forget them: one browser's proxy
        serves page after page, and each page's result lists its own."""
        with self._lock:
            taken = self.refusals, self.unreachable
            self.refusals, self.unreachable = [], []
        return taken

    def refuse(self, target: str, reason: str) -> None:
        """Record that ``target`` was refused, and why."""
        logger.info("egress refused %s: %s", target, reason)
        with self._lock:
            self.refusals.append(Refusal(target=target, reason=reason))

    def note_unreachable(self, target: str, problem: str) -> None:
        """Record that ``target``'s host did not resolve or answer, and why."""
        with self._lock:
            self.unreachable.append(Refusal(target=target, reason=problem))

    def _accept(self) -> None:
        listener = self._listener
        while True:
            try:
                client, address = listener.accept()
            except OSError:
                return  # stop() shut the listener down
            threading.Thread(
                target=_serve, args=(client, address, self), name="egress-relay", daemon=True
            ).start()


def _serve(client: socket.socket, address, proxy: EgressProxy) -> None:
    with client:
        client.settimeout(CLIENT_TIMEOUT)
        try:
            _ProxyHandler(client, address, proxy)
        except OSError as error:
            logger.debug("egress relay for %s ended: %s", address, error)


class _ProxyHandler(BaseHTTPRequestHandler):
    """One client connection: a CONNECT tunnel, or one plain-HTTP request passed on."""

    protocol_version = "HTTP/1.1"

    def __init__(self, client, address, proxy: EgressProxy) -> None:
        self.proxy = proxy
        self.head_complete = False
        super().__init__(client, address, server=None)

    def setup(self) -> None:
        """Give http.server's parser the request head alone: every byte after it (a body, the
        first bytes through a tunnel) stays in the socket for the relay.

        The head is found by peeking (``_take_head``); http.server's unbuffered reader, which
        leaves the rest in the socket too, takes a head one byte a ``recv`` (some 500 system
        calls a request: most of the proxy's CPU time).
        """
        super().setup()
        self.rfile.close()  # the socket's reader: the head is read here instead
        head, self.head_complete = _take_head(self.connection)
        self.rfile = io.BytesIO(head)

    def parse_request(self) -> bool:
        """http.server's parse, then the head's own check: one that did not end within
        MAX_REQUEST_HEAD_BYTES is answered 431 (RFC 6585 §5) and never passed on, whatever its
        method."""
        if not super().parse_request():
            return False
        if not self.head_complete:
            limit = MAX_REQUEST_HEAD_BYTES
            self._answer(431, f"Request head longer than {limit} bytes, or cut short")
            return False
        return True

    def log_message(self, format, *args) -> None:
        logger.debug("egress %s " + format, self.address_string(), *args)

    def do_CONNECT(self) -> None:
        """Open a tunnel to ``host:port`` if the policy allows one of its addresses."""
        host, _, port = self.path.rpartition(":")
        if not host or not port.isdigit():
            self._answer(400, "CONNECT needs host:port")
            return
        upstream = self._open(host, int(port), target=self.path)
        if upstream is None:
            return
        with upstream:
            self.send_response(200, "Connection established")
            self.end_headers()
            _relay(self.connection, upstream)
        self.close_connection = True

    def forward(self) -> None:
        """Pass one plain-HTTP request (absolute-form, RFC 9112 §3.2.2) to its origin, then its
        answer back, and close the connection.

        One request a connection: a client that kept the connection open would otherwise send
        its next request, for any host, to the origin this one was checked for. The request's
        body (Content-Length bytes; a chunked body is refused with 411) is passed on and nothing
        more is read from the client; the answer's head says ``Connection: close``.
        """
        parts = urlsplit(self.path)
        if parts.scheme != "http" or not parts.hostname:
            self._answer(400, "only http:// URLs, or CONNECT for https, go through this proxy")
            return
        try:
            port = parts.port or 80
        except ValueError:
            self._answer(400, "the URL's port is not a number in 0-65535")
            return
        length = self.headers.get("Content-Length", "0").strip()
        if "Transfer-Encoding" in self.headers or not length.isdigit():
            self._answer(411, "this proxy passes on request bodies with a Content-Length only")
            return
        upstream = self._open(parts.hostname, port, target=self.path)
        if upstream is None:
            return
        with upstream:
            if self.headers.get("Expect", "").lower() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # we take the body
            upstream.sendall(self._origin_head(parts))
            _copy(self.connection, upstream, int(length))
            _pass_answer(upstream, self.connection)
        self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = forward

    def _origin_head(self, parts) -> bytes:
        """The request head in origin-form, its Host from the URL that was checked."""
        target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        lines = [f"{self.command} {target} {self.request_version}"]
        lines.append(f"Host: {host}:{parts.port}" if parts.port else f"Host: {host}")
        lines += [
            f"{name}: {value}"
            for name, value in self.headers.items()
            if name.lower() not in HOP_BY_HOP | {"host", "expect"}
        ]
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _open(self, host: str, port: int, *, target: str) -> socket.socket | None:
        """Connect to the first allowed address of ``host``; answer the client and return None
        when the policy refuses it or no connection can be made."""
        try:
            addresses = resolve_allowed(host, port, also=self.proxy.also)
        except AddressRefused as refused:
            self.proxy.refuse(target, str(refused))
            message = refused_message(refused)
            self._answer(403, message[0].upper() + message[1:], "destination_ip_prohibited")
            return None
        except OSError as error:
            problem = f"could not resolve host {host}: {error}"
            return self._unreachable(target, 502, problem, "dns_error")
        problem, error_type = "", "destination_unavailable"
        for _family, address in addresses:
            try:
                return socket.create_connection(
                    (address, port), timeout=settings.CONNECT_TIMEOUT_SECONDS
                )
            except TimeoutError:
                status, problem = 504, f"timed out connecting to {host}:{port}"
                error_type = "connection_timeout"
            except OSError as error:
                status = 502
                problem = f"could not connect to {host}:{port}: {error.strerror or error}"
                error_type = "connection_refused"
        return self._unreachable(target, status, problem, error_type)

    def _unreachable(self, target: str, status: int, problem: str, error_type: str) -> None:
        self.proxy.note_unreachable(target, problem)
        self._answer(status, problem[0].upper() + problem[1:], error_type)

    def _answer(self, status: int, reason: str, error_type: str = "http_request_error") -> None:
        """Send the client an error of our own; ``reason`` is also the reason phrase.

        The answer carries a ``Proxy-Status`` field (RFC 9209) naming PROXY_NAME and the
        error type, so that a recorder can tell it from an answer of the site's.
        """
        phrase = " ".join(reason.split())[:300]
        body = (phrase + "\n").encode("utf-8", "replace")
        self.send_response_only(status, phrase)
        self.send_header("Proxy-Status", f"{PROXY_NAME}; error={error_type}")
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.close_connection = True


def _take_head(client: socket.socket) -> tuple[bytes, bool]:
    """Take from ``client`` the request head, up to and with the blank line that ends it, and
    not a byte more; return it and whether it ended (False: not within MAX_REQUEST_HEAD_BYTES,
    or the client stopped sending first).

    What has arrived is peeked at (``MSG_PEEK``) for the end of the head, and only the bytes
    up to it are taken out of the socket.
    """
    head = b""
    while len(head) < MAX_REQUEST_HEAD_BYTES:
        arrived = client.recv(MAX_REQUEST_HEAD_BYTES - len(head), socket.MSG_PEEK)
        if not arrived:
            return head, False
        tail = head[-3:]  # the blank line may have begun in what was taken before
        end = (tail + arrived).find(b"\r\n\r\n")
        wanted = len(arrived) if end < 0 else end + 4 - len(tail)
        head += _receive_exactly(client, wanted)
        if end >= 0:
            return head, True
    return head, False


def _receive_exactly(source: socket.socket, length: int) -> bytes:
    """``length`` bytes of ``source``, which has them waiting (they were peeked at)."""
    parts = []
    while length > 0:
        data = source.recv(length)
        if not data:
            break
        parts.append(data)
        length -= len(data)
    return b"".join(parts)


def _copy(source: socket.socket, target: socket.socket, length: int) -> None:
    """Copy exactly ``length`` bytes (fewer if ``source`` closes first)."""
    while length > 0:
        data = source.recv(min(RELAY_CHUNK, length))
        if not data:
            return
        target.sendall(data)
        length -= len(data)


def _pass_answer(upstream: socket.socket, client: socket.socket) -> None:
    """Copy the origin's answer to the client until the origin closes, with ``Connection:
    close`` in its final head (interim 1xx heads pass as they are)."""
    upstream.settimeout(IDLE_TIMEOUT)
    buffered = b""
    while True:
        head, separator, rest = buffered.partition(b"\r\n\r\n")
        if not separator:
            if len(buffered) > MAX_HEAD_BYTES:
                break  # not an HTTP head we can read: pass it on unchanged
            data = upstream.recv(RELAY_CHUNK)
            if not data:
                break
            buffered += data
            continue
        if head[9:10] == b"1":  # "HTTP/1.1 1xx": another head follows
            client.sendall(head + separator)
            buffered = rest
            continue
        buffered = _closing(head) + separator + rest
        break
    client.sendall(buffered)
    _copy_until_closed(upstream, client)


def _copy_until_closed(upstream: socket.socket, client: socket.socket) -> None:
    """Copy the rest of the answer until the origin closes, or nothing moves for IDLE_TIMEOUT,
    or the client goes away or sends anything more (it was told the connection closes: a next
    request on it is never passed on)."""
    with selectors.DefaultSelector() as selector:
        selector.register(upstream, selectors.EVENT_READ)
        selector.register(client, selectors.EVENT_READ)
        while events := selector.select(IDLE_TIMEOUT):
            for key, _ in events:
                if key.fileobj is client:
                    return
                data = upstream.recv(RELAY_CHUNK)
                if not data:
                    return
                client.sendall(data)


def _closing(head: bytes) -> bytes:
    """``head`` (a response head, without its blank line) saying ``Connection: close``."""
    status, *fields = head.split(b"\r\n")
    kept = [line for line in fields if line.split(b":")[0].strip().lower() not in HOP_BY_HOP_B]
    return b"\r\n".join([status, *kept, b"Connection: close"])


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until both sides have closed, or nothing moves for IDLE_TIMEOUT."""
    peers = {client: upstream, upstream: client}
    with selectors.DefaultSelector() as selector:
        for sock in peers:
            sock.setblocking(True)
            sock.settimeout(IDLE_TIMEOUT)
            selector.register(sock, selectors.EVENT_READ)
        while selector.get_map():
            events = selector.select(IDLE_TIMEOUT)
            if not events:
                return
            for key, _ in events:
                source = key.fileobj
                try:
                    data = source.recv(RELAY_CHUNK)
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(source)
                    with contextlib.suppress(OSError):
                        peers[source].shutdown(socket.SHUT_WR)  # pass the end of stream on
                    continue
                try:
                    peers[source].sendall(data)
                except OSError:
                    return
