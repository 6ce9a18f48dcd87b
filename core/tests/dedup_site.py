"""A small site whose page has requisites big enough to be stored once (core/services/dedup.py):
a stylesheet, a script and an image, each past DEDUP_MIN_BYTES. Its files can be changed
between two captures (``DedupSite.write``)."""

from __future__ import annotations

import io
import random
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from PIL import Image

from archive.testing import LocalServer

PAGE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Unchanged page</title>
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js"></script></head>
<body><h1 id="heading">Stored once</h1>
<p>{words}</p>
<img src="/static/logo.png" alt="a logo" width="48" height="48">
<p><a href="/other.html">Another page</a></p>
</body></html>
"""
OTHER_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Another page</title>
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js"></script></head>
<body><h1>Another page with the same requisites</h1><p>{words}</p>
<img src="/static/logo.png" alt="a logo" width="48" height="48"></body></html>
"""
WORDS = " ".join(["Nothing on this page changes between two captures of it."] * 12)


def noise_png(seed: int, size: int = 48) -> bytes:
    """A PNG of deterministic noise: it does not compress, so it is a few kilobytes."""
    rng = random.Random(seed)
    image = Image.new("RGB", (size, size))
    image.putdata([tuple(rng.randrange(256) for _ in range(3)) for _ in range(size * size)])
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def site_files() -> dict[str, bytes]:
    style = "".join(f".rule-{n} {{ margin: {n}px; padding: {n % 7}px; }}\n" for n in range(60))
    script = "".join(f"function step{n}(x) {{ return x * {n} + {n % 11}; }}\n" for n in range(150))
    return {
        "index.html": PAGE_HTML.format(words=WORDS).encode(),
        "other.html": OTHER_HTML.format(words=WORDS).encode(),
        "static/style.css": style.encode(),
        "static/app.js": script.encode(),
        "static/logo.png": noise_png(1),
        "favicon.ico": noise_png(2, size=16),
    }


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class DedupSite(LocalServer):
    """Serve ``site_files()`` from ``root`` on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name, content in site_files().items():
            self.write(name, content)
        super().__init__()

    def handler(self):
        return partial(_Quiet, directory=str(self.root))

    def write(self, name: str, content: bytes) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
