"""Record what the browser fetched while it loaded a page, and write it as WARC.

A ``Recorder`` is attached to the browser context of each page the shared Chromium loads
(core/extractors/browser.py), before the page loads; a context that serves another page of the
same crawl gets a new recorder, and the old one hears nothing more. It only notes Playwright's
network events (``request``, ``requestfinished``, ``requestfailed``): nothing is asked of the
browser until a capture wants the record, so a profile without the recording extractor pays
nothing for it.
Playwright reports the requests of every frame (cross-site frames run in renderers of their
own), of dedicated workers and of redirects, with the headers Chromium really sent and received
(its ``*ExtraInfo`` events: cookies included). Service workers are blocked in the context
(browser.py), so no request can be made where the record does not see it.

``write_warc`` then turns each finished request into a WARC/1.1 ``request`` record and a
``response`` record (ISO 28500:2017 §6.2-6.3), linked by ``WARC-Concurrent-To``, with block and
payload digests (warcio computes them). A POST or PUT body goes into the request record, which
is what pywb and ReplayWeb.page read to make it replayable (they append the canonicalized body
to the URL key: pywb's ``post_query`` rules). Bodies are taken from Chromium's memory of the
page (``Network.getResponseBody``, 200 MB for all of a page's resources by default), so the
WARC is written while the page is still open.

Two things differ from the bytes on the wire, as in ArchiveWeb.page's recorder:
- Chromium hands over a body already decoded (gzip, br, zstd removed: RFC 9110 §8.4), so the
  response's ``Content-Encoding`` and ``Transfer-Encoding`` are dropped and ``Content-Length``
  names the decoded length; an HTTP/2 or HTTP/3 response is written with an HTTP/1.1 status
  line (a WARC response holds an HTTP/1.x message), its reason phrase from the status code;
- ``WARC-IP-Address`` is left out: every request goes through Vellum's egress proxy
  (core/extractors/egress.py), so the browser only knows the proxy's address.
"""

from __future__ import annotations

import contextlib
import io
import logging
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from core.extractors.egress import PROXY_NAME

logger = logging.getLogger(__name__)

RECORDED_SCHEMES = ("http", "https")
# Response headers that describe the message on the wire, not the decoded body recorded.
WIRE_HEADERS = frozenset({"content-encoding", "transfer-encoding", "content-length"})
# Why a request is in no record (ArchiveResult.missing's reasons).
STILL_LOADING = "still loading when the page was recorded"
BODY_GONE = "the browser no longer held its body"
TOO_LARGE = "larger than MAX_DOWNLOAD_BYTES"

# The recorder of each open browser context, found again from a page by ``recorder_of``.
_recorders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class Recording:
    """What ``write_warc`` wrote: ``responses`` recorded, ``bytes`` of payload in them, and
    what the record lacks as ``{"url": str, "reason": str}`` (a request that failed, was
    still loading, or whose body could not be kept)."""

    responses: int = 0
    bytes: int = 0
    missing: list[dict[str, str]] = field(default_factory=list)


class Recorder:
    """Notes every request a browser context makes, from the moment it is attached."""

    def __init__(self) -> None:
        self._handlers: dict = {}  # event name -> its handler on the context (attach)
        self.requests: list = []  # every http(s) request, in the order it was made
        self.finished: set = set()
        self.failed: dict = {}  # request -> Chromium's error (net::ERR_...)

    @classmethod
    def attach(cls, context) -> Recorder:
        """Start recording Playwright browser ``context``'s requests in a new recorder, in place
        of the one attached before (if any), and return it."""
        if (previous := _recorders.get(context)) is not None:
            previous.detach(context)
        recorder = cls()
        # Playwright keeps an attribute on each handler: plain functions and partials only.
        recorder._handlers = {
            "request": partial(_on_request, recorder),
            "requestfinished": partial(_on_finished, recorder),
            "requestfailed": partial(_on_failed, recorder),
        }
        for event, handler in recorder._handlers.items():
            context.on(event, handler)
        _recorders[context] = recorder
        return recorder

    def detach(self, context) -> None:
        """Stop noting ``context``'s requests (what was recorded stays readable)."""
        for event, handler in self._handlers.items():
            context.remove_listener(event, handler)
        if _recorders.get(context) is self:
            del _recorders[context]

    def write_warc(self, path: Path, *, software: str, max_bytes: int) -> Recording:
        """Write what was recorded so far as a gzipped WARC/1.1 file at ``path`` (in the
        browser's thread, while the page is open); return what it holds and lacks.

        Requests are written in the order they were made; a redirect's response is written
        with an empty body (Chromium keeps none). Payloads stop being added once they reach
        ``max_bytes`` in all: the rest are listed as missing. What a window the page opened
        fetched before it was closed (core/extractors/browser.py closes every one at once) is
        not the page's, and is left out. Raises OSError when the file cannot be written.
        """
        # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
        from playwright.sync_api import Error as PlaywrightError

        recording = Recording()
        with open(path, "wb") as out:
            writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
            info = {"software": software, "format": "WARC File Format 1.1"}
            writer.write_record(writer.create_warcinfo_record(path.name, info))
            for request in list(self.requests):
                try:
                    reason = self._write_exchange(writer, request, recording, max_bytes)
                except PlaywrightError:
                    if _of_a_closed_window(request):
                        continue
                    reason = BODY_GONE
                if reason:
                    recording.missing.append({"url": request.url, "reason": reason})
        return recording

    def _write_exchange(self, writer, request, recording: Recording, max_bytes: int) -> str:
        """Write ``request`` and its response; return why it is not recorded, or ""."""
        if request in self.failed:
            return self.failed[request]
        if request not in self.finished:
            return STILL_LOADING
        response = request.response()
        if response is None:  # finished without a response: served from Chromium's memory
            return ""
        if proxy_error := _proxy_error(response):
            # The egress proxy's own answer, not the site's: what it refused is listed among
            # the result's refusals; what it could not reach is missing.
            return "" if proxy_error == "destination_ip_prohibited" else response.status_text
        body = b""
        if not 300 <= response.status < 400:
            if _declared_length(response) > max_bytes - recording.bytes:
                return TOO_LARGE
            try:
                body = response.body()
            except Exception:  # evicted from Chromium's buffer, or the page went away
                return BODY_GONE
            if len(body) > max_bytes - recording.bytes:
                return TOO_LARGE
        date = _request_date(request)
        response_record = _response_record(writer, response, body, date)
        request_record = _request_record(writer, request, date)
        request_record.rec_headers.add_header(
            "WARC-Concurrent-To", response_record.rec_headers.get_header("WARC-Record-ID")
        )
        writer.write_record(response_record)
        writer.write_record(request_record)
        recording.responses += 1
        recording.bytes += len(body)
        return ""


def recorder_of(page) -> Recorder | None:
    """Return the recorder attached to ``page``'s browser context, or None."""
    return _recorders.get(page.context)


def _on_request(recorder: Recorder, request) -> None:
    if urlsplit(request.url).scheme in RECORDED_SCHEMES:
        recorder.requests.append(request)


def _on_finished(recorder: Recorder, request) -> None:
    recorder.finished.add(request)


def _on_failed(recorder: Recorder, request) -> None:
    recorder.failed[request] = f"chromium: {request.failure or 'failed'}"


def _of_a_closed_window(request) -> bool:
    """True when ``request`` was made by a window that is closed now (one the page opened,
    which browser.py closed), or by no window that can still be asked."""
    # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
    from playwright.sync_api import Error as PlaywrightError

    try:
        return request.frame.page.is_closed()
    except PlaywrightError:
        return True


def _declared_length(response) -> int:
    """The response's Content-Length, or 0 when it named none (or a wrong one)."""
    with contextlib.suppress(ValueError, TypeError):
        return int(response.headers.get("content-length") or 0)
    return 0


def _proxy_error(response) -> str:
    """The error type of an answer the egress proxy made itself (its Proxy-Status field,
    RFC 9209), or "" for an answer the site sent."""
    status = response.headers.get("proxy-status", "")
    name, _, params = status.partition(";")
    if name.strip() != PROXY_NAME:
        return ""
    return params.strip().removeprefix("error=") or "proxy_error"


def _request_date(request) -> datetime:
    """When the request started (Playwright's ``timing``, milliseconds since the epoch)."""
    started = request.timing.get("startTime") if request.timing else None
    if started and started > 0:
        return datetime.fromtimestamp(started / 1000, tz=UTC)
    return datetime.now(tz=UTC)


def _warc_headers(date: datetime) -> dict[str, str]:
    """WARC-Date to the microsecond (WARC/1.1 §5.4); warcio formats a naive UTC datetime."""
    naive_utc = date.astimezone(UTC).replace(tzinfo=None)
    return {"WARC-Date": datetime_to_iso_date(naive_utc, use_micros=True)}


def _response_record(writer: WARCWriter, response, body: bytes, date: datetime):
    """The WARC ``response`` record of ``response`` carrying the decoded ``body``."""
    headers = [
        (name, value)
        for name, value in _http1_headers(response.headers_array())
        if name.lower() not in WIRE_HEADERS
    ]
    headers.append(("Content-Length", str(len(body))))
    reason = response.status_text or _reason_phrase(response.status)
    http_headers = StatusAndHeaders(
        f"{response.status} {reason}".strip(), headers, protocol="HTTP/1.1"
    )
    return writer.create_warc_record(
        response.url,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=http_headers,
        warc_headers_dict=_warc_headers(date),
    )


def _request_record(writer: WARCWriter, request, date: datetime):
    """The WARC ``request`` record of ``request``, with its body (POST, PUT) if it had one."""
    parts = urlsplit(request.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = _http1_headers(request.headers_array())
    if not any(name.lower() == "host" for name, _ in headers):
        headers.insert(0, ("Host", parts.netloc))
    body = request.post_data_buffer or b""
    http_headers = StatusAndHeaders(
        f"{request.method} {target} HTTP/1.1", headers, is_http_request=True
    )
    return writer.create_warc_record(
        request.url,
        "request",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=http_headers,
        warc_headers_dict=_warc_headers(date),
    )


def _http1_headers(headers: list[dict[str, str]]) -> list[tuple[str, str]]:
    """Playwright's ``headers_array`` as (name, value) pairs, HTTP/2's pseudo-headers
    (``:authority``, ``:status``, ...: RFC 9113 §8.3) left out."""
    return [(h["name"], h["value"]) for h in headers if not h["name"].startswith(":")]


def _reason_phrase(status: int) -> str:
    with contextlib.suppress(ValueError):
        return HTTPStatus(status).phrase
    return ""
