"""A test site of pages with audio and video, served on 127.0.0.1, for the media extractor.

The media are small real files made here: a WAV tone (stdlib ``wave``) and a WebM-labelled
file (yt-dlp does not decode what it downloads, so an EBML header and filler bytes do). Every
request's path and headers are recorded in ``MediaSite.requests``.
"""

from __future__ import annotations

import contextlib
import io
import math
import struct
import threading
import wave
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from archive.testing import LocalServer

# Seconds /hang.html (and /hang.webm) waits before answering: longer than any test timeout.
HANG_SECONDS = 30
LARGE_MEDIA_BYTES = 1024 * 1024


def tone_wav(seconds: float = 0.5, rate: int = 8000) -> bytes:
    """Return a mono 16-bit WAV of a 440 Hz tone."""
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(int(seconds * rate))
    )
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(frames)
    return buffer.getvalue()


def fake_webm(size: int) -> bytes:
    """Return ``size`` bytes starting with the EBML magic number, as a WebM file does."""
    filler = bytes(range(256)) * (size // 256 + 1)
    return (b"\x1a\x45\xdf\xa3" + filler)[:size]


TONE_WAV = tone_wav()
CLIP_WEBM = fake_webm(20 * 1024)
LARGE_WEBM = fake_webm(LARGE_MEDIA_BYTES)


def page(title: str, body: str) -> str:
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
        f"<body>{body}</body></html>\n"
    )


PAGES = {
    "/audio.html": page("A tone", '<p>Listen.</p><audio controls src="/tone.wav"></audio>'),
    "/video.html": page(
        "A clip", '<video controls><source src="/clip.webm" type="video/webm"></video>'
    ),
    "/two.html": page(
        "Two media", '<audio src="/tone.wav"></audio><video src="/clip.webm"></video>'
    ),
    "/plain.html": page("Plain", "<p>Words only, no audio or video.</p>"),
    "/large.html": page("Large", '<video src="/large.webm"></video>'),
    "/streamed.html": page("Streamed", '<video src="/streamed.webm"></video>'),
    "/gone.html": page("Gone", '<video src="/nothing.webm"></video>'),
    # No media element: only an Open Graph property names the clip.
    "/og.html": page("Shared clip", "<p>A clip.</p>").replace(
        "</head>", '<meta property="og:video" content="/clip.webm"></head>'
    ),
}
MEDIA = {
    "/tone.wav": ("audio/wav", TONE_WAV),
    "/clip.webm": ("video/webm", CLIP_WEBM),
    "/large.webm": ("video/webm", LARGE_WEBM),
    # Not media: what yt-dlp's generic extractor would otherwise download as a "direct link".
    "/doc.pdf": ("application/pdf", b"%PDF-1.4\n" + bytes(range(256)) * 64),
    # Audio at a URL whose name does not say so: only its Content-Type does.
    "/listen": ("audio/wav", TONE_WAV),
}


class MediaHandler(BaseHTTPRequestHandler):
    """Serve ``PAGES`` and ``MEDIA``, plus a few special paths; 404 for anything else."""

    site: MediaSite

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        with self.site.lock:
            self.site.requests.append((path, self.headers))
        if path in PAGES:
            self.send_body(HTTPStatus.OK, "text/html; charset=utf-8", PAGES[path].encode())
        elif path in MEDIA:
            self.send_body(HTTPStatus.OK, *MEDIA[path])
        elif path == "/streamed.webm":
            self.stream(LARGE_WEBM)
        elif path in ("/hang.html", "/hang.webm"):
            self.site.release.wait(HANG_SECONDS)
            with contextlib.suppress(OSError):  # the client gave up long ago
                self.send_body(HTTPStatus.OK, "text/html", PAGES["/plain.html"].encode())
        elif path == "/busy.html":
            self.send_body(HTTPStatus.SERVICE_UNAVAILABLE, "text/html", b"<p>Busy</p>")
        else:
            self.send_body(HTTPStatus.NOT_FOUND, "text/html", b"<p>Not found</p>")

    def send_body(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def stream(self, data: bytes) -> None:
        """Send ``data`` without a Content-Length (HTTP/1.0: the body ends when the connection
        closes), so the client cannot know its size in advance."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "video/webm")
        self.send_header("Connection", "close")
        self.end_headers()
        with contextlib.suppress(OSError):  # the client may stop reading
            for start in range(0, len(data), 16 * 1024):
                self.wfile.write(data[start : start + 16 * 1024])

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class MediaSite(LocalServer):
    """The running media site; ``requests`` lists (path, headers) of every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Message]] = []
        self.lock = threading.Lock()
        super().__init__()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return type("BoundMediaHandler", (MediaHandler,), {"site": self})

    def headers(self, path: str, name: str) -> list[str]:
        """Return header ``name`` ("" if absent) of every request for ``path`` so far."""
        with self.lock:
            return [headers.get(name, "") for seen, headers in self.requests if seen == path]
