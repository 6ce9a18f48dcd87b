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
fields aside). Each request head is taken from the socket whole and alone (``_take_head``) and
read by ``parse_request_head``, which takes the plain shape tools send and refuses the rest: the
head passed on is built from what it read, so nothing it did not understand reaches an origin.
It replaced http.server's handler: with a thread per connection and the policy's checks of
the same address on every connection, those cost 14.4 ms of CPU a page of wget's requisites,
against 10.3 now (the Python docs' pages, bench/egress.py's commands).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import select
import socket
import threading
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit, urlunsplit

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
MAX_REQUEST_FIELDS = 100  # as http.client reads at most
END_OF_HEAD = b"\r\n\r\n"
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 §5.6.2
HTTP_VERSION = re.compile(r"HTTP/[0-9]\.[0-9]")  # RFC 9112 §2.3
DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() takes "²", which int() refuses
MAX_PORT = 65535
# The methods passed on to an origin (what http.server's handlers took before); CONNECT opens
# a tunnel, and any other method is answered 501.
FORWARDED_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
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
        self._relays: _RelayThreads | None = None

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
        self._relays = _RelayThreads(self)
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
        self._relays.stop()
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
        listener, relays = self._listener, self._relays
        while True:
            try:
                client, _address = listener.accept()
            except OSError:
                return  # stop() shut the listener down
            relays.serve(client)


class _RelayThreads:
    """The daemon threads that serve a proxy's connections, each reused once its connection
    ends: a tool such as wget opens one connection after the other (some 15 a page with its
    requisites), and starting a thread for each cost more than reading its request. A
    connection that arrives while every thread is busy gets a new one, so a long tunnel never
    holds up another connection. Daemon threads: a tunnel that never ends never keeps the
    process from exiting."""

    def __init__(self, proxy: EgressProxy) -> None:
        self.proxy = proxy
        self._waiting: queue.SimpleQueue[socket.socket | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a connection (or about to)
        self._stopped = False

    def serve(self, client: socket.socket) -> None:
        """Have ``client`` served by an idle thread, or a new one."""
        with self._lock:
            reuse = self._idle > 0
            self._idle -= reuse
        if reuse:
            self._waiting.put(client)
        else:
            thread = threading.Thread(target=self._run, args=(client,), name="egress-relay")
            thread.daemon = True
            thread.start()

    def stop(self) -> None:
        """Let the idle threads end; the busy ones end with their connection."""
        with self._lock:
            self._stopped, idle, self._idle = True, self._idle, 0
        for _ in range(idle):
            self._waiting.put(None)

    def _run(self, client: socket.socket | None) -> None:
        while client is not None:
            _serve(client, self.proxy)
            with self._lock:
                if self._stopped:
                    return
                self._idle += 1
            client = self._waiting.get()


def _serve(client: socket.socket, proxy: EgressProxy) -> None:
    with client:
        client.settimeout(CLIENT_TIMEOUT)
        try:
            _Connection(client, proxy).serve()
        except OSError as error:
            logger.debug("egress relay ended: %s", error)


class BadRequest(Exception):
    """A request head the proxy will not pass on: ``status`` and ``reason`` are its answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class RequestHead:
    """A request head as the proxy reads it (RFC 9112 §3 and §5): the request line's three
    parts and the header fields in order, each ``(name as sent, value without the whitespace
    around it)``."""

    method: str
    target: str
    version: str
    fields: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        """The values of every field called ``name`` (in any case), in order."""
        wanted = name.lower()
        return [value for field, value in self.fields if field.lower() == wanted]

    def get(self, name: str, default: str = "") -> str:
        """The value of the first field called ``name``, else ``default``."""
        found = self.values(name)
        return found[0] if found else default


def parse_request_head(head: bytes) -> RequestHead:
    """Read a request head, ``head`` up to and with the empty line that ends it (``_take_head``).

    The proxy builds the head it sends on from what this returns, so it reads the plain shape
    tools send and refuses the rest rather than guess: a request line of three parts with an
    HTTP/1.x version, then fields ``name: value``, every line ending in CRLF. Raises BadRequest
    (400) for anything else: a bare CR or LF, a line folded onto the one before it (obsolete
    since RFC 7230, refused by RFC 9112 §5.2), a field without a colon or with space before it
    (§5.1), a name that is not a token; 505 for a version other than HTTP/1.x; 431 for more
    than MAX_REQUEST_FIELDS fields (RFC 6585 §5).
    """
    lines = head.removesuffix(END_OF_HEAD).decode("latin-1").split("\r\n")
    if any("\r" in line or "\n" in line for line in lines):
        raise BadRequest(400, "Bad request: a line ends otherwise than with CRLF")
    method, target, version = _request_line(lines[0])
    if len(lines) - 1 > MAX_REQUEST_FIELDS:
        raise BadRequest(431, f"More than {MAX_REQUEST_FIELDS} header fields")
    fields = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not TOKEN.fullmatch(name):
            raise BadRequest(400, f"Bad header field line {line[:40]!r}")
        fields.append((name, value.strip(" \t")))
    return RequestHead(method, target, version, tuple(fields))


def _request_line(line: str) -> tuple[str, str, str]:
    """The method, target and version of a request line (RFC 9112 §3), or BadRequest."""
    parts = line.split(" ")
    if len(parts) != 3 or not TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise BadRequest(400, f"Bad request line {line[:60]!r}")
    version = parts[2]
    if not HTTP_VERSION.fullmatch(version):
        raise BadRequest(400, f"Bad request version {version[:20]!r}")
    if version[5] != "1":
        raise BadRequest(505, f"HTTP version {version[5:]} is not supported")
    return parts[0], parts[1], version


class _Connection:
    """One client connection: a CONNECT tunnel, or one plain-HTTP request passed on."""

    def __init__(self, client: socket.socket, proxy: EgressProxy) -> None:
        self.client = client
        self.proxy = proxy
        self.method = ""

    def serve(self) -> None:
        """Read the request head and answer it; a client that sent nothing is let go."""
        head, complete = _take_head(self.client)
        if not head:
            return
        self.method = head.split(b" ", 1)[0].decode("latin-1")
        if not complete:
            limit = MAX_REQUEST_HEAD_BYTES
            self._answer(431, f"Request head longer than {limit} bytes, or cut short")
            return
        try:
            request = parse_request_head(head)
        except BadRequest as bad:
            self._answer(bad.status, bad.reason)
            return
        if request.method == "CONNECT":
            self.tunnel(request)
        elif request.method in FORWARDED_METHODS:
            self.forward(request)
        else:
            self._answer(501, f"Unsupported method {request.method[:20]!r}")

    def tunnel(self, request: RequestHead) -> None:
        """Open a tunnel to ``host:port`` if the policy allows one of its addresses."""
        host, _, port = request.target.rpartition(":")
        if not host or not DIGITS.fullmatch(port) or int(port) > MAX_PORT:
            self._answer(400, "CONNECT needs host:port, the port in 0-65535")
            return
        upstream = self._open(host, int(port), request.target)
        if upstream is None:
            return
        with upstream:
            self.client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _relay(self.client, upstream)

    def forward(self, request: RequestHead) -> None:
        """Pass one plain-HTTP request (absolute-form, RFC 9112 §3.2.2) to its origin, then its
        answer back, and close the connection.

        One request a connection: a client that kept the connection open would otherwise send
        its next request, for any host, to the origin this one was checked for. The request's
        body (Content-Length bytes; a chunked body is refused with 411) is passed on and nothing
        more is read from the client; the answer's head says ``Connection: close``.
        """
        try:
            parts = urlsplit(request.target)
            port = parts.port or 80
        except ValueError:
            self._answer(400, "the URL or its port (0-65535) is not valid")
            return
        if parts.scheme != "http" or not parts.hostname:
            self._answer(400, "only http:// URLs, or CONNECT for https, go through this proxy")
            return
        lengths = set(request.values("Content-Length")) or {"0"}
        if request.values("Transfer-Encoding") or len(lengths) > 1:
            self._answer(411, "this proxy passes on request bodies with a Content-Length only")
            return
        length = lengths.pop()
        if not DIGITS.fullmatch(length):
            self._answer(400, "the Content-Length is not a number")
            return
        upstream = self._open(parts.hostname, port, request.target)
        if upstream is None:
            return
        with upstream:
            if request.get("Expect").lower() == "100-continue":
                self.client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # we take the body
            upstream.sendall(_origin_head(request, parts))
            _copy(self.client, upstream, int(length))
            _pass_answer(upstream, self.client)

    def _open(self, host: str, port: int, target: str) -> socket.socket | None:
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
        for family, address in addresses:
            try:
                return _connect(family, address, port)
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
        head = (
            f"HTTP/1.1 {status} {phrase}\r\n"
            f"Proxy-Status: {PROXY_NAME}; error={error_type}\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        answer = head.encode("latin-1", "replace")
        self.client.sendall(answer if self.method == "HEAD" else answer + body)


def _connect(family: int, address: str, port: int) -> socket.socket:
    """A TCP connection to ``address``, which the policy checked: not ``create_connection``,
    which would resolve the address again. Raises OSError (TimeoutError after
    CONNECT_TIMEOUT_SECONDS)."""
    upstream = socket.socket(family, socket.SOCK_STREAM)
    try:
        upstream.settimeout(settings.CONNECT_TIMEOUT_SECONDS)
        upstream.connect((address, port))
    except BaseException:
        upstream.close()
        raise
    return upstream


def _origin_head(request: RequestHead, parts: SplitResult) -> bytes:
    """The request head in origin-form, its Host from the URL that was checked, without the
    hop-by-hop fields and those the request's Connection field names (RFC 9110 §7.6.1)."""
    target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    named = {option.strip().lower() for value in request.values("Connection")
             for option in value.split(",")}  # fmt: skip
    dropped = HOP_BY_HOP | named | {"host", "expect"}
    lines = [f"{request.method} {target} {request.version}"]
    lines.append(f"Host: {host}:{parts.port}" if parts.port else f"Host: {host}")
    lines += [f"{name}: {value}" for name, value in request.fields if name.lower() not in dropped]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


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
    poller = _poller(upstream, client)
    client_fd = client.fileno()
    while events := poller.poll(IDLE_TIMEOUT * 1000):
        if any(fd == client_fd for fd, _ in events):
            return
        data = upstream.recv(RELAY_CHUNK)
        if not data:
            return
        client.sendall(data)


def _poller(*sockets: socket.socket) -> select.poll:
    """A poll object watching ``sockets`` for input (or their end): poll(2) itself, set up in
    two calls, where a ``selectors`` object costs a connection some 40 µs of Python."""
    poller = select.poll()
    for sock in sockets:
        poller.register(sock, select.POLLIN)
    return poller


def _closing(head: bytes) -> bytes:
    """``head`` (a response head, without its blank line) saying ``Connection: close``."""
    status, *fields = head.split(b"\r\n")
    kept = [line for line in fields if line.split(b":")[0].strip().lower() not in HOP_BY_HOP_B]
    return b"\r\n".join([status, *kept, b"Connection: close"])


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until both sides have closed, or nothing moves for IDLE_TIMEOUT."""
    peers = {client.fileno(): (client, upstream), upstream.fileno(): (upstream, client)}
    for sock in (client, upstream):
        sock.settimeout(IDLE_TIMEOUT)
    poller = _poller(client, upstream)
    while peers:
        events = poller.poll(IDLE_TIMEOUT * 1000)
        if not events:
            return
        for fd, _ in events:
            source, target = peers[fd]
            try:
                data = source.recv(RELAY_CHUNK)
            except OSError:
                data = b""
            if not data:
                poller.unregister(fd)
                del peers[fd]
                with contextlib.suppress(OSError):
                    target.shutdown(socket.SHUT_WR)  # pass the end of stream on
                continue
            try:
                target.sendall(data)
            except OSError:
                return
