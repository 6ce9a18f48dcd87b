"""Save how a page looked: a full-page PNG from the shared Chromium."""

from __future__ import annotations

from pathlib import Path

from core.extractors.base import Format, Output, ShownAs
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
        """Write screenshot.png (PNG, 1280 px wide, as tall as the page up to MAX_HEIGHT)."""
        height = page.evaluate(
            "() => Math.max(document.documentElement.scrollHeight,"
            " document.body ? document.body.scrollHeight : 0)"
        )
        clip = None
        if height > MAX_HEIGHT:
            clip = {"x": 0, "y": 0, "width": page.viewport_size["width"], "height": MAX_HEIGHT}
        page.screenshot(path=out_dir / SCREENSHOT_PNG, full_page=True, clip=clip, type="png")
        return SCREENSHOT_PNG
