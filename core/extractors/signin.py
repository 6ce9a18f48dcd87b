"""Sign in once, by hand, in a headed Chromium, and keep the session (``persona login``); or
take the cookies of a Chromium profile made that way elsewhere (``persona add --profile-dir``).

The person signs in at the site in the window that opens; when they close it, the browser
context's cookies (a Playwright storage state) are what the persona keeps. This browser is the
operator's own, outside the egress proxy the capture browser uses: it visits only the sites
the operator opens in it. Only the cookies are kept, encrypted (crawls/persona_store.py):
neither browser's profile folder is copied into DATA_DIR.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
            if not page.is_closed():  # a tab closed at once is as good
                page.wait_for_event("close", timeout=0)
            return json.dumps(context.storage_state())
        finally:
            browser.close()


def profile_state(profile_dir: Path) -> str:
    """Open the Chromium user-data directory ``profile_dir`` headless, as it is, and return its
    cookies as a storage state in JSON text; nothing of the folder is copied.

    Chromium must be able to decrypt the profile's cookies: a profile made by Playwright, or by
    Chromium with ``--password-store=basic``, not one whose key is in a desktop keyring. Raises
    LookupError when Chromium is not installed or ``profile_dir`` is no folder, and
    Playwright's Error when it cannot be opened (a Chromium running on it holds its lock).
    """
    from playwright.sync_api import sync_playwright

    chromium = find_binary("chromium")
    if chromium is None:
        raise LookupError("chromium not found")
    if not profile_dir.is_dir():
        raise LookupError(f"{profile_dir} is not a folder")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile_dir), executable_path=chromium, headless=True
        )
        try:
            return json.dumps(context.storage_state())
        finally:
            context.close()
