"""Save how a page looked: a full-page PNG from the shared Chromium.

The capture asks Chromium for it over the DevTools protocol (``Page.captureScreenshot`` clipped
to the page's content size from ``Page.getLayoutMetrics``, ``captureBeyondViewport`` only when
that content overflows the viewport), which is what Playwright's ``full_page`` does too, less
its round trips and its second pass over the page: the same PNG (byte for byte on 19 of 20
python3-doc pages, the twentieth 2 bytes apart) for 0.16 s less of Chromium's CPU a page
(issue 18).

``captureBeyondViewport`` resizes the page for the capture, and a cross-site frame (rendered by
another process) then sometimes comes out blank: 3 in 30 captures of a page that fits the
viewport, on a busy machine, and none without it.

Chromium encodes the PNG with its slower, tighter settings unless SCREENSHOT_OPTIMIZE_FOR_SPEED
is on (CDP's ``optimizeForSpeed``). PNG is lossless, so the pixels are the same either way
(checked on python3-doc pages and in the tests). On the first 30 pages of python3-doc's
``library/`` it took 0.71 CPU-s of Chromium a screenshot instead of 1.01 (median capture 0.39 s
instead of 0.65 s), for 39.7 MB of PNG instead of 31.2 MB. The screenshots were 58 % of those
snapshots' bytes, so the setting is off by default.
"""

from __future__ import annotations

import base64
import math
from pathlib import Path

from django.conf import settings

from core.extractors.base import Format, Output, ShownAs
from core.extractors.browser import devtools_session
from core.extractors.rendering import ChromiumExtractor

SCREENSHOT_PNG = "screenshot.png"
# Tallest screenshot in CSS pixels: past Chromium's largest texture (16384 px) a full-page
# capture comes out blank or fails, and no reader scrolls a longer image anyway.
MAX_HEIGHT = 16384


class ScreenshotExtractor(ChromiumExtractor):
    """Render the page at 1280 px wide and save all of it (up to MAX_HEIGHT) as screenshot.png."""

    name = "screenshot"
    outputs = (Output(SCREENSHOT_PNG, Format.PNG),)
    shown_as = ShownAs.IMAGE
    index_image = "thumbnail"

    def capture(self, page, out_dir: Path) -> str:
        """Write screenshot.png: PNG, as wide as the page's content (1280 px unless it
        overflows the viewport) and as tall, up to MAX_HEIGHT, at one device pixel per CSS
        pixel. Raises Playwright's Error when Chromium refuses the capture."""
        with devtools_session(page) as session:
            metrics = session.send("Page.getLayoutMetrics")
            content, viewport = metrics["cssContentSize"], metrics["cssLayoutViewport"]
            clip = {
                "x": 0,
                "y": 0,
                "width": max(1, math.ceil(content["width"])),
                "height": max(1, min(math.ceil(content["height"]), MAX_HEIGHT)),
                "scale": 1,
            }
            shot = session.send(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "clip": clip,
                    "captureBeyondViewport": overflows(clip, viewport),
                    "optimizeForSpeed": settings.SCREENSHOT_OPTIMIZE_FOR_SPEED,
                },
            )
        (out_dir / SCREENSHOT_PNG).write_bytes(base64.b64decode(shot["data"]))
        return SCREENSHOT_PNG


def overflows(clip: dict, viewport: dict) -> bool:
    """True when ``clip`` (CSS pixels) reaches past ``viewport`` (CDP's ``cssLayoutViewport``:
    clientWidth, clientHeight in CSS pixels), so only a capture beyond it holds all of it."""
    return clip["width"] > viewport["clientWidth"] or clip["height"] > viewport["clientHeight"]
