"""Pages that build themselves with scripts, served on 127.0.0.1 by a real threaded HTTP server,
for the tests of the browser's recording and its replay (issue 18).

Each page is one difficulty an archive of the page's first HTML alone misses: a single-page app
whose items come from ``fetch()``, data loaded by a POST (the answer depends on the body), images
an IntersectionObserver swaps in, ``loading=lazy`` images far below the fold, the second page of
an infinite scroll, a stylesheet ``@import``ed by another that pulls a web font and a background
image, frames (same-origin, and cross-site through the host name ``localhost``) whose content is
fetched by their scripts, content a timer fetches a second after the page loaded, the chosen
candidates of ``<picture>`` and ``srcset`` (not their fallback ``src``), and a video served with
range requests; a static page is the control, and a broken page makes a request that fails and
one the address policy refuses.

Every page shows a marker text (``PAGES[...].markers``) only once its difficulty was handled:
the markers are in no HTML or script the site serves, only in the answers scripts fetch, or
written (spelled in two halves) once an image, font or video has loaded; the static page, which
has no difficulty, has its marker in its HTML. ``PAGES[...].resources`` names the requests that
carry them, which a WARC must hold for the page to replay. Markers are drawn large (MARKER_CSS,
in every page) so that they can be read back from a screenshot by OCR.

The server logs every request (``requests``: method, path, host, body, Range header, and whether
the answer was gzip-encoded or chunked) so that a test can tell who fetched what, and how often.
"""

from __future__ import annotations

import gzip
import json
import re
import struct
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from archive.testing import LocalServer, unused_port
from core.tests.site import tiny_png
from core.tests.tiny_media import webm_video, webp_image

# Height of the empty space that puts what loads on sight far below the fold (CSS pixels):
# beyond the distance at which Chromium starts loading lazy images (some 3000 px on a fast
# connection) and well out of the 800 px viewport.
FAR_BELOW = 6000
OBSERVED_PNG = tiny_png((200, 120, 0))
LAZY_PNG = tiny_png((0, 160, 160))
HERO_PNG = tiny_png((120, 0, 160))  # the @import'ed stylesheet's background
STATIC_PNG = tiny_png((90, 90, 90))
NOSCRIPT_PNG = tiny_png((250, 250, 0))  # wget fetches it; a browser running scripts does not
PICTURE_WEBP = webp_image((80, 60), (0, 120, 200))  # <picture>'s <source type="image/webp">
PICTURE_FALLBACK_PNG = tiny_png((255, 0, 0))
SRCSET_1X_PNG = tiny_png((0, 200, 0))  # the candidate a device pixel ratio of 1 chooses
SRCSET_2X_PNG = tiny_png((0, 100, 0))
SRCSET_FALLBACK_PNG = tiny_png((255, 0, 255))
VIDEO_SIZE = (64, 48)
CLIP_WEBM = webm_video(VIDEO_SIZE)  # one second of VP8 that Chromium decodes
FONT_FAMILY = "VellumMarker"
CUT_SHORT_PROMISED = 10_000  # the Content-Length /api/cut-short announces; it sends far less
DELAY_MS = 1000  # the delayed page's timer (behaviours wait for timers due within 1 s)
# Markers in a large bold sans-serif (fonts-liberation, as .ci/install installs), black on
# white, for Tesseract to read them from a screenshot.
MARKER_CSS = (
    '.marker { font: bold 36px/1.5 "Liberation Sans", Arial, sans-serif;'
    " color: #000; background: #fff; }"
)


def spelled(marker: str) -> str:
    """Return a JavaScript expression for ``marker`` that does not spell it out, so that the
    marker is in the page only when a script wrote it."""
    half = len(marker) // 2
    return f"'{marker[:half]}' + '{marker[half:]}'"


def marker_font() -> bytes:
    """Return a TrueType font (family FONT_FAMILY) whose one glyph, a filled box, draws every
    printable ASCII character: the smallest font Chromium's sanitizer (OTS) accepts and loads.

    Tables as the OpenType spec 1.9 defines them: head, hhea, maxp (1.0), OS/2 (version 4),
    hmtx, cmap (format 4, Windows Unicode BMP), loca (short), glyf, name and post (3.0).
    """
    box = struct.pack(">hhhhh", 1, 100, 0, 900, 700)  # one contour; its bounding box
    box += struct.pack(">HH", 3, 0)  # the contour ends at point 3; no instructions
    box += bytes([0x01] * 4)  # four on-curve points, coordinates as 16-bit deltas
    box += struct.pack(">hhhh", 100, 0, 800, 0)  # x: (100,0) (100,700) (900,700) (900,0)
    box += struct.pack(">hhhh", 0, 700, 0, -700)  # y: clockwise, as TrueType's outer contours
    first, last = 0x21, 0x7E
    # Two segments: first..last, each to glyph 1 through glyphIdArray (which follows the two
    # idRangeOffsets, 4 bytes on from the first), and the 0xFFFF segment format 4 ends with.
    glyph_ids = struct.pack(f">{last - first + 1}H", *[1] * (last - first + 1))
    cmap4 = struct.pack(">HHHHHHH", 4, 32 + len(glyph_ids), 0, 4, 4, 1, 0)
    cmap4 += struct.pack(">HHHHHhhHH", last, 0xFFFF, 0, first, 0xFFFF, 0, 1, 4, 0) + glyph_ids
    names = {1: FONT_FAMILY, 2: "Regular", 4: f"{FONT_FAMILY} Regular", 6: f"{FONT_FAMILY}-Regular"}
    strings = [text.encode("utf-16-be") for text in names.values()]
    name = struct.pack(">HHH", 0, len(names), 6 + 12 * len(names))
    offset = 0
    for name_id, data in zip(names, strings, strict=True):
        name += struct.pack(">HHHHHH", 3, 1, 0x409, name_id, len(data), offset)
        offset += len(data)
    name += b"".join(strings)
    os2 = struct.pack(">HhHHH", 4, 750, 400, 5, 0)
    os2 += struct.pack(">10h", 650, 700, 0, 140, 650, 700, 0, 480, 50, 250)
    os2 += struct.pack(">h10s4I4s", 0, bytes(10), 0, 0, 0, 0, b"VLLM")
    os2 += struct.pack(">HHHhhhHH", 0x40, first, last, 800, -200, 0, 800, 200)
    os2 += struct.pack(">IIhhHHH", 1, 0, 500, 700, 0, 0x20, 1)
    # head: versions, checkSumAdjustment (set by _sfnt), magic, flags, unitsPerEm, dates,
    # bounding box, macStyle, lowestRecPPEM, direction hint, short loca, glyph data format.
    head = (0x00010000, 0x00010000, 0, 0x5F0F3CF5, 0x000B, 1000, 0, 0,
            100, 0, 900, 700, 0, 8, 2, 0, 0)  # fmt: skip
    # hhea: version, ascender, descender, line gap, widest advance, least side bearings,
    # widest extent, caret slope and offset, reserved, metric data format, two hmtx entries.
    hhea = (0x00010000, 800, -200, 0, 1000, 0, 100, 900, 1, 0, 0,
            0, 0, 0, 0, 0, 2)  # fmt: skip
    tables = {
        "OS/2": os2,
        "cmap": struct.pack(">HHHHI", 0, 1, 3, 1, 12) + cmap4,
        "glyf": box,
        "head": struct.pack(">IIIIHHqqhhhhHHhhh", *head),
        "hhea": struct.pack(">IhhhHhhhhhh4hhH", *hhea),
        "hmtx": struct.pack(">HhHh", 500, 0, 1000, 100),
        "loca": struct.pack(">HHH", 0, 0, len(box) // 2),
        "maxp": struct.pack(">IH13H", 0x00010000, 2, 4, 1, 0, 0, 2, *[0] * 8),
        "name": name,
        "post": struct.pack(">IIhhIIIII", 0x00030000, 0, -100, 50, 0, 0, 0, 0, 0),
    }
    return _sfnt(tables)


def _sfnt(tables: dict[str, bytes]) -> bytes:
    """Lay out ``tables`` (sorted by tag) as a TrueType file: the table directory, each table
    padded to 4 bytes with its checksum, and head's checkSumAdjustment set."""

    def checksum(data: bytes) -> int:
        data += bytes(-len(data) % 4)
        return sum(struct.unpack(f">{len(data) // 4}I", data)) & 0xFFFFFFFF

    count = len(tables)
    power = 1 << (count.bit_length() - 1)
    directory = struct.pack(">IHHHH", 0x00010000, count, power * 16, power.bit_length() - 1,
                            count * 16 - power * 16)  # fmt: skip
    offset = len(directory) + 16 * count
    records, body, placed = b"", b"", {}
    for tag in sorted(tables):
        data = tables[tag]
        placed[tag] = offset + len(body)
        records += struct.pack(">4sIII", tag.encode(), checksum(data), placed[tag], len(data))
        body += data + bytes(-len(data) % 4)
    font = bytearray(directory + records + body)
    adjustment = (0xB1B0AFBA - checksum(bytes(font))) & 0xFFFFFFFF
    font[placed["head"] + 8 : placed["head"] + 12] = struct.pack(">I", adjustment)
    return bytes(font)


@dataclass(frozen=True)
class Resource:
    """A request a page's marker depends on: ``method`` and ``path`` (with its query), on the
    host ``localhost`` when ``cross_site``, with a request ``body`` (a POST's)."""

    path: str
    method: str = "GET"
    body: bytes = b""
    cross_site: bool = False


@dataclass(frozen=True)
class Page:
    """One page of the site: its ``path``, the ``markers`` it shows once its difficulty was
    handled, and the ``resources`` whose answers carry them: spelled out in an answer, or
    (``in_answers`` False) written by the page's script once those resources loaded."""

    path: str
    difficulty: str
    markers: tuple[str, ...]
    resources: tuple[Resource, ...] = field(default=())
    in_answers: bool = True


SEARCHES = (b'{"query":"alpha"}', b'{"query":"beta"}')  # two POSTs to one URL, as sent
SUBSCRIPTION = b"email=reader%40example.org&list=quill"
PAGES = {
    "spa": Page(
        "/spa.html", "SPA: items from fetch() (JSON, gzip)", ("SPA-ITEM-MARKER",),
        (Resource("/api/items.json"),),
    ),
    "post": Page(
        "/post.html", "data loaded by POST (JSON and form bodies)",
        ("POST-ANSWER-ALPHA", "POST-ANSWER-BETA", "SUBSCRIBED-TO-QUILL"),
        (*(Resource("/api/search", "POST", body) for body in SEARCHES),
         Resource("/api/subscribe", "POST", SUBSCRIPTION)),
    ),
    "observer": Page(
        "/observer.html", "IntersectionObserver swaps in data-src", ("OBSERVED-IMAGE-MARKER",),
        (Resource("/img/observed.png"),), in_answers=False,
    ),
    "lazy": Page(
        "/lazy.html", "loading=lazy image far below the fold", ("LAZY-IMAGE-MARKER",),
        (Resource("/img/lazy.png"),), in_answers=False,
    ),
    "infinite": Page(
        "/infinite.html", "infinite scroll: page 2 at the bottom (chunked)",
        ("INFINITE-PAGE-2-MARKER",), (Resource("/api/feed?page=2"),),
    ),
    "import": Page(
        "/import.html", "CSS @import: a font and a background", ("IMPORTED-FONT-MARKER",),
        (Resource("/css/main.css"), Resource("/css/theme.css"), Resource("/fonts/marker.ttf"),
         Resource("/img/hero.png")), in_answers=False,
    ),
    "frames": Page(
        "/frames.html", "iframes (same-origin, cross-site) fetching their content",
        ("SAME-ORIGIN-FRAME-MARKER", "CROSS-SITE-FRAME-MARKER"),
        (Resource("/frame-same.html"), Resource("/api/frame-same.json"),
         Resource("/frame-cross.html", cross_site=True),
         Resource("/api/frame-cross.json", cross_site=True)),
    ),
    "delayed": Page(
        "/delayed.html", f"content a timer fetches {DELAY_MS} ms after the page ran",
        ("DELAYED-CONTENT-MARKER",), (Resource("/api/late.json"),),
    ),
    "responsive": Page(
        "/responsive.html", "<picture> and srcset: the chosen candidate, not the fallback src",
        ("PICTURE-SOURCE-MARKER", "SRCSET-CANDIDATE-MARKER"),
        (Resource("/img/picture.webp"), Resource("/img/srcset-1x.png")), in_answers=False,
    ),
    "video": Page(
        "/video.html", "a WebM video served with range requests (206)", ("VIDEO-FRAME-MARKER",),
        (Resource("/media/clip.webm"),), in_answers=False,
    ),
    "static": Page(
        "/static.html", "control: a static page and its image", ("STATIC-PAGE-MARKER",),
        (Resource("/static.html"), Resource("/img/static.png")),
    ),
}  # fmt: skip

SPA_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>A single-page app</title>
<script src="/js/spa.js" defer></script></head>
<body><main id="app">Loading…</main></body></html>
"""
SPA_JS = """fetch("/api/items.json").then((response) => response.json()).then((data) => {
  const list = document.createElement("ul");
  list.id = "items";
  list.className = "marker";
  for (const item of data.items) {
    const entry = document.createElement("li");
    entry.textContent = item.name;
    list.appendChild(entry);
  }
  document.getElementById("app").replaceChildren(list);
});
"""
ITEMS = {"items": [{"name": "First item"}, {"name": "SPA-ITEM-MARKER"}, {"name": "Last item"}]}

POST_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Posted</title></head>
<body><h1>Search results</h1><ul id="results" class="marker"></ul>
<p id="subscribed" class="marker"></p>
<script>
const show = (text) => {
  const entry = document.createElement("li");
  entry.textContent = text;
  document.getElementById("results").appendChild(entry);
};
for (const query of ["alpha", "beta"]) {
  fetch("/api/search", {method: "POST", headers: {"Content-Type": "application/json"},
                        body: JSON.stringify({query})})
    .then((response) => response.json()).then((data) => show(data.answer));
}
fetch("/api/subscribe", {method: "POST",
                         body: new URLSearchParams({email: "reader@example.org", list: "quill"})})
  .then((response) => response.text())
  .then((text) => { document.getElementById("subscribed").textContent = text; });
</script></body></html>
"""

PLACEHOLDER_GIF = "data:image/gif;base64,R0lGODlhAQABAAAAACH5BAEKAAEALAAAAAABAAEAAAICTAEAOw=="
OBSERVER_HTML = f"""<!doctype html><html><head><meta charset="utf-8"><title>Observed</title>
</head><body><h1>Scroll down</h1>
<div style="height: {FAR_BELOW}px">empty space</div>
<img id="observed" src="{PLACEHOLDER_GIF}" data-src="/img/observed.png" width="40" height="40"
  alt="observed">
<p id="seen" class="marker"></p>
<script>
const image = document.getElementById("observed");
image.addEventListener("load", () => {{
  if (image.src.endsWith("/img/observed.png")) {{
    document.getElementById("seen").textContent = {spelled("OBSERVED-IMAGE-MARKER")};
  }}
}});
new IntersectionObserver((entries, observer) => {{
  for (const entry of entries) {{
    if (entry.isIntersecting) {{
      entry.target.src = entry.target.dataset.src;
      observer.unobserve(entry.target);
    }}
  }}
}}).observe(image);
</script></body></html>
"""

LAZY_HTML = f"""<!doctype html><html><head><meta charset="utf-8"><title>Lazy</title></head>
<body><h1>Lazy image</h1>
<div style="height: {FAR_BELOW}px">empty space</div>
<img loading="lazy" src="/img/lazy.png" width="40" height="40" alt="lazy"
  onload="document.getElementById('loaded').textContent = {spelled("LAZY-IMAGE-MARKER")}">
<p id="loaded" class="marker"></p>
</body></html>
"""

INFINITE_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Endless</title>
<style>body { margin: 0 } .item { height: 500px; border-bottom: 1px solid #888 }</style>
</head><body><h1>An endless feed</h1><div id="feed" class="marker">
<div class="item">Item 1</div><div class="item">Item 2</div>
<div class="item">Item 3</div><div class="item">Item 4</div></div>
<script>
let next = 2;
let loading = false;
addEventListener("scroll", () => {
  if (loading || next === null) return;
  if (scrollY + innerHeight < document.documentElement.scrollHeight - 300) return;
  loading = true;
  fetch("/api/feed?page=" + next).then((response) => response.json()).then((data) => {
    for (const text of data.items) {
      const item = document.createElement("div");
      item.className = "item";
      item.textContent = text;
      document.getElementById("feed").appendChild(item);
    }
    next = data.next;
    loading = false;
  });
});
</script></body></html>
"""
FEED_PAGE_2 = {"items": ["Item 5", "INFINITE-PAGE-2-MARKER", "Item 7"], "next": None}

# The marker is hidden unless the @import'ed stylesheet shows it, and written only once the
# font that stylesheet declares has loaded.
IMPORT_HTML = f"""<!doctype html><html><head><meta charset="utf-8"><title>Imported</title>
<style>.imported-only {{ display: none }}</style>
<link rel="stylesheet" href="/css/main.css"></head>
<body><h1>Styled from afar</h1>
<div class="hero" id="hero">a hero with a background</div>
<p class="marker-font">Drawn in the imported font (a box for each letter)</p>
<p class="imported-only marker" id="font-marker"></p>
<script>
document.fonts.load("16px {FONT_FAMILY}").then((faces) => {{
  if (faces.some((face) => face.status === "loaded")) {{
    document.getElementById("font-marker").textContent = {spelled("IMPORTED-FONT-MARKER")};
  }}
}});
</script></body></html>
"""
MAIN_CSS = """@import url("theme.css");
body { font-family: sans-serif; }
"""
THEME_CSS = f"""@font-face {{
  font-family: "{FONT_FAMILY}";
  src: url("/fonts/marker.ttf") format("truetype");
}}
.hero {{ background: url("../img/hero.png") repeat; height: 120px; color: white; }}
.imported-only {{ display: block; }}
.marker-font {{ font-family: "{FONT_FAMILY}", monospace; }}
"""

FRAMES_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Framed</title></head>
<body><h1>Two frames</h1>
<iframe id="same" src="/frame-same.html" width="800" height="120"></iframe>
<iframe id="cross" src="http://localhost:{port}/frame-cross.html" width="800" height="120">
</iframe></body></html>
"""
FRAME_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head>
<body><p id="content" class="marker">…</p>
<script>
fetch("/api/{name}.json").then((response) => response.json()).then((data) => {{
  document.getElementById("content").textContent = data.text;
}});
</script></body></html>
"""

DELAYED_HTML = f"""<!doctype html><html><head><meta charset="utf-8"><title>Delayed</title>
</head><body><h1>Content after a delay</h1><p id="late" class="marker">…</p>
<script>
setTimeout(() => {{
  fetch("/api/late.json").then((response) => response.json()).then((data) => {{
    document.getElementById("late").textContent = data.text;
  }});
}}, {DELAY_MS});
</script></body></html>
"""
LATE = {"text": "DELAYED-CONTENT-MARKER"}

# Each image's marker is written once it loaded the candidate a browser chooses at a device
# pixel ratio of 1 (the <source> of a type it supports; srcset's 1x), never its fallback src.
RESPONSIVE_HTML = f"""<!doctype html><html><head><meta charset="utf-8"><title>Responsive</title>
</head><body><h1>Responsive images</h1>
<picture><source type="image/webp" srcset="/img/picture.webp">
<img id="picture" src="/img/picture-fallback.png" width="80" height="60" alt="picture"></picture>
<img id="srcset" srcset="/img/srcset-1x.png 1x, /img/srcset-2x.png 2x"
  src="/img/srcset-fallback.png" width="80" height="60" alt="srcset">
<p id="picture-marker" class="marker"></p><p id="srcset-marker" class="marker"></p>
<script>
const chosen = (id, path, marker) => {{
  const image = document.getElementById(id);
  const show = () => {{
    if (image.naturalWidth && image.currentSrc.endsWith(path)) {{
      document.getElementById(id + "-marker").textContent = marker;
    }}
  }};
  image.addEventListener("load", show);
  if (image.complete) show();
}};
chosen("picture", "/img/picture.webp", {spelled("PICTURE-SOURCE-MARKER")});
chosen("srcset", "/img/srcset-1x.png", {spelled("SRCSET-CANDIDATE-MARKER")});
</script></body></html>
"""

# The marker is written once the video can play: its metadata and first frames decoded.
VIDEO_HTML = f"""<!doctype html><html><head><meta charset="utf-8"><title>A video</title>
</head><body><h1>A video</h1>
<video id="clip" src="/media/clip.webm" muted preload="auto" width="320" height="240"></video>
<p id="played" class="marker"></p>
<script>
const clip = document.getElementById("clip");
const show = () => {{
  if (clip.videoWidth === {VIDEO_SIZE[0]}) {{
    document.getElementById("played").textContent = {spelled("VIDEO-FRAME-MARKER")};
  }}
}};
clip.addEventListener("canplay", show);
if (clip.readyState >= HTMLMediaElement.HAVE_FUTURE_DATA) show();
</script></body></html>
"""

STATIC_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Plain</title></head>
<body><h1>A plain page</h1><p id="marker" class="marker">STATIC-PAGE-MARKER</p>
<img src="/img/static.png" width="40" height="40" alt="static">
<noscript><img src="/img/noscript.png" alt="only without scripts"></noscript>
</body></html>
"""

# A request that fails mid-body, one the address policy refuses (127.0.0.2 is loopback, and
# ALLOWED_PRIVATE_NETWORKS opens 127.0.0.1 alone), and one to a port nothing listens on.
BROKEN_HTML = """<!doctype html><html><head><meta charset="utf-8"><title>Broken</title></head>
<body><h1>Some requests fail</h1><p id="done"></p>
<script>
const attempts = [
  fetch("/api/cut-short"),
  fetch("http://127.0.0.2:{port}/api/refused.json", {{mode: "no-cors"}}),
  fetch("http://127.0.0.1:{closed_port}/api/closed.json", {{mode: "no-cors"}}),
];
Promise.allSettled(attempts).then(() => {{
  document.getElementById("done").textContent = "attempted";
}});
</script></body></html>
"""


@dataclass
class Request:
    """What the server saw of one request (its Range header as ``range``, "" without one); the
    answer was ``gzipped``, sent ``chunked``, or had the ``status`` of a ranged answer."""

    method: str
    path: str
    host: str
    body: bytes
    user_agent: str
    range: str = ""
    gzipped: bool = False
    chunked: bool = False
    status: int | None = None


class DifficultHandler(BaseHTTPRequestHandler):
    """Serve ``site.files`` and the dynamic answers of ``ROUTES``; anything else is a 404."""

    protocol_version = "HTTP/1.0"
    site: DifficultSite

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.request_log = Request(
            method=self.command,
            path=self.path,
            host=self.headers.get("Host", ""),
            body=body,
            user_agent=self.headers.get("User-Agent", ""),
            range=self.headers.get("Range", ""),
        )
        with self.site.lock:
            self.site.requests.append(self.request_log)
        route = self.ROUTES.get((self.command, urlsplit(self.path).path))
        if route is not None:
            route(self, body)
        elif self.command == "GET" and self.path.split("?")[0] in self.site.files:
            content_type, data = self.site.files[self.path.split("?")[0]]
            self.send(HTTPStatus.OK, data, content_type)
        else:
            self.send(HTTPStatus.NOT_FOUND, b"not here\n", "text/plain")

    def send(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, value: object, status: int = HTTPStatus.OK) -> None:
        self.send(status, json.dumps(value).encode(), "application/json")

    def items(self, _body: bytes) -> None:
        """The SPA's items, gzip-encoded for a client that accepts it (as browsers do)."""
        data = json.dumps(ITEMS).encode()
        if "gzip" not in self.headers.get("Accept-Encoding", ""):
            self.send(HTTPStatus.OK, data, "application/json")
            return
        packed = gzip.compress(data)
        self.request_log.gzipped = True
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(packed)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(packed)

    def search(self, body: bytes) -> None:
        """Answer a JSON body ``{"query": q}`` with ``POST-ANSWER-<Q>``; 400 without one."""
        try:
            query = json.loads(body)["query"]
        except (ValueError, KeyError, TypeError):
            self.send_json({"error": "a JSON body with a query, please"}, HTTPStatus.BAD_REQUEST)
            return
        self.send_json({"answer": "POST-ANSWER-" + str(query).upper()})

    def subscribe(self, body: bytes) -> None:
        """Answer a form body naming a ``list`` with ``SUBSCRIBED-TO-<LIST>``; 400 without."""
        fields = parse_qs(body.decode("ascii", "replace"))
        if "list" not in fields or "email" not in fields:
            self.send(HTTPStatus.BAD_REQUEST, b"which list?\n", "text/plain")
            return
        answer = "SUBSCRIBED-TO-" + fields["list"][0].upper()
        self.send(HTTPStatus.OK, answer.encode(), "text/plain; charset=utf-8")

    def feed(self, _body: bytes) -> None:
        """The infinite scroll's pages after the first, sent chunked (HTTP/1.1)."""
        page = parse_qs(urlsplit(self.path).query).get("page", ["1"])[0]
        value = FEED_PAGE_2 if page == "2" else {"items": [], "next": None}
        data = json.dumps(value).encode()
        self.request_log.chunked = True
        self.protocol_version = "HTTP/1.1"
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        half = len(data) // 2
        for chunk in (data[:half], data[half:], b""):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.close_connection = True

    def frame_same(self, _body: bytes) -> None:
        self.send_json({"text": "SAME-ORIGIN-FRAME-MARKER"})

    def frame_cross(self, _body: bytes) -> None:
        self.send_json({"text": "CROSS-SITE-FRAME-MARKER"})

    def late(self, _body: bytes) -> None:
        self.send_json(LATE)

    def clip(self, _body: bytes) -> None:
        """The video, by byte range (RFC 9110 §14): one ``bytes=first-last``, ``first-`` or
        ``-suffix`` range is answered 206 with its Content-Range, one past the end 416; without
        a Range header, or with several ranges (which a server may ignore), the whole file."""
        size = len(CLIP_WEBM)
        asked = re.fullmatch(r"bytes=(\d*)-(\d*)", self.request_log.range.strip())
        if asked is None or asked.groups() == ("", ""):
            self.request_log.status = HTTPStatus.OK
            self.send(HTTPStatus.OK, CLIP_WEBM, "video/webm", {"Accept-Ranges": "bytes"})
            return
        first, last = asked.groups()
        if first:
            start, end = int(first), min(size - 1, int(last) if last else size - 1)
        else:
            start, end = max(0, size - int(last)), size - 1
        if start >= size or start > end:
            self.request_log.status = HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE
            self.send(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, b"", "video/webm",
                      {"Content-Range": f"bytes */{size}"})  # fmt: skip
            return
        self.request_log.status = HTTPStatus.PARTIAL_CONTENT
        headers = {"Accept-Ranges": "bytes", "Content-Range": f"bytes {start}-{end}/{size}"}
        self.send(HTTPStatus.PARTIAL_CONTENT, CLIP_WEBM[start : end + 1], "video/webm", headers)

    def cut_short(self, _body: bytes) -> None:
        """Promise CUT_SHORT_PROMISED bytes, send a few, and close the connection."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(CUT_SHORT_PROMISED))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b'{"partial": ')
        self.close_connection = True

    ROUTES = {
        ("GET", "/api/items.json"): items,
        ("POST", "/api/search"): search,
        ("POST", "/api/subscribe"): subscribe,
        ("GET", "/api/feed"): feed,
        ("GET", "/api/frame-same.json"): frame_same,
        ("GET", "/api/frame-cross.json"): frame_cross,
        ("GET", "/api/late.json"): late,
        ("GET", "/media/clip.webm"): clip,
        ("GET", "/api/cut-short"): cut_short,
    }

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class DifficultSite(LocalServer):
    """The running site: ``url(path)`` on 127.0.0.1, ``url(path, cross_site=True)`` on
    ``localhost`` (the same server, another site to the browser); ``requests`` logs each one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.closed_port = unused_port()  # for the broken page: nothing listens there
        super().__init__()
        self.files = self._files()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return type("BoundDifficultHandler", (DifficultHandler,), {"site": self})

    def url(self, path: str = "/", *, cross_site: bool = False) -> str:
        """Return the absolute URL of ``path`` on 127.0.0.1, or on ``localhost``."""
        url = super().url(path)
        return url.replace("127.0.0.1", "localhost", 1) if cross_site else url

    def resource_url(self, resource: Resource) -> str:
        return self.url(resource.path, cross_site=resource.cross_site)

    def static_content(self, path: str) -> bytes | None:
        """Return the bytes the site always answers ``path`` with (a file, the video whole), or
        None for an answer it makes for each request."""
        if path == "/media/clip.webm":
            return CLIP_WEBM
        return self.files[path][1] if path in self.files else None

    def requested(self, path: str, *, method: str = "GET") -> list[Request]:
        """Return the logged requests of ``path`` (with its query) made with ``method``."""
        with self.lock:
            return [r for r in self.requests if (r.method, r.path) == (method, path)]

    def _files(self) -> dict[str, tuple[str, bytes]]:
        html = "text/html; charset=utf-8"
        frame = FRAME_HTML.format
        files = {
            "/spa.html": (html, SPA_HTML),
            "/js/spa.js": ("text/javascript", SPA_JS),
            "/post.html": (html, POST_HTML),
            "/observer.html": (html, OBSERVER_HTML),
            "/lazy.html": (html, LAZY_HTML),
            "/infinite.html": (html, INFINITE_HTML),
            "/import.html": (html, IMPORT_HTML),
            "/css/main.css": ("text/css", MAIN_CSS),
            "/css/theme.css": ("text/css", THEME_CSS),
            "/frames.html": (html, FRAMES_HTML.format(port=self.port)),
            "/frame-same.html": (html, frame(title="Same-origin frame", name="frame-same")),
            "/frame-cross.html": (html, frame(title="Cross-site frame", name="frame-cross")),
            "/delayed.html": (html, DELAYED_HTML),
            "/responsive.html": (html, RESPONSIVE_HTML),
            "/video.html": (html, VIDEO_HTML),
            "/static.html": (html, STATIC_HTML),
            "/broken.html": (
                html, BROKEN_HTML.format(port=self.port, closed_port=self.closed_port)
            ),
            "/img/observed.png": ("image/png", OBSERVED_PNG),
            "/img/lazy.png": ("image/png", LAZY_PNG),
            "/img/hero.png": ("image/png", HERO_PNG),
            "/img/static.png": ("image/png", STATIC_PNG),
            "/img/noscript.png": ("image/png", NOSCRIPT_PNG),
            "/img/picture.webp": ("image/webp", PICTURE_WEBP),
            "/img/picture-fallback.png": ("image/png", PICTURE_FALLBACK_PNG),
            "/img/srcset-1x.png": ("image/png", SRCSET_1X_PNG),
            "/img/srcset-2x.png": ("image/png", SRCSET_2X_PNG),
            "/img/srcset-fallback.png": ("image/png", SRCSET_FALLBACK_PNG),
            "/fonts/marker.ttf": ("font/ttf", marker_font()),
        }  # fmt: skip
        style = f"<style>{MARKER_CSS}</style></head>"
        return {
            path: (kind, data.replace("</head>", style, 1).encode("utf-8"))
            if isinstance(data, str)
            else (kind, data)
            for path, (kind, data) in files.items()
        }
