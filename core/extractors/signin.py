"""Sign in once, by hand, in a headed Chromium, and keep the session (``persona login``).

The person signs in at the site in the window that opens; when they close it, the browser
context's cookies (a Playwright storage state) are what the persona keeps. This browser is the
operator's own, outside the egress proxy the capture browser uses: it visits only the sites
the operator opens in it.
"""

from __future__ import annotations

import json
import os

from core.extractors.process import find_binary


def can_open_window() -> bool:
    """True when a display is there for a headed browser (X11's DISPLAY or Wayland's)."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def sign_in(url: str) -> str:
    """Open ``url`` in a headed Chromium and wait, without limit, until its window is closed;
    return the context's storage state as JSON text (``{"cookies": [...], "origins": [...]}``).

    Raises LookupError when Chromium is not installed, and Playwright's Error when it cannot
    start (no display) or the page cannot be opened.
    """
    # Imported here: playwright takes ~0.28 s to import, paid only by this interactive command.
    from playwright.sync_api import sync_playwright

    chromium = find_binary("chromium")
    if chromium is None:
        raise LookupError("chromium not found")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=False)
        try:
            context = browser.new_context()
            page = context.new_page()
            page.goto(url)
            page.wait_for_event("close", timeout=0)
            return json.dumps(context.storage_state())
        finally:
            browser.close()
