"""Signing in once with Chromium (issue 21): ``persona login`` in a headed Chromium under Xvfb,
and ``persona add --profile-dir`` from a Chromium profile made elsewhere.

The login test plays the person: the test site sets the session cookie when its page opens,
and once the window shows it, xdotool presses Ctrl+W in it, as a person closes the tab when
signed in. (The page cannot close itself: Chromium refuses ``window.close()`` to a tab it did
not open by script and that has history, which Playwright's tab has.)
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.testing import LocalServer
from crawls.models import Persona

pytestmark = [pytest.mark.browser, pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

SESSION = "login-session-3b9f27d1e8"
# Loaded (sign_in's goto has returned), the page tells the site: only then is its tab closed.
PAGE = (
    b"<!doctype html><title>Signed in</title><h1>Welcome back</h1><script>"
    b"addEventListener('load', () => setTimeout(() => fetch('/loaded'), 300))</script>"
)
CLOSE_TRIES = 40  # xdotool tries, a quarter second apart, while the window appears


class SessionSite(LocalServer):
    """``/``: a page that sets ``session=<SESSION>`` (HttpOnly; persistent when ``max_age``);
    ``opened`` is set when the page, loaded, asks for ``/loaded``."""

    def __init__(self, max_age: int | None = None) -> None:
        self.max_age = max_age
        self.opened = threading.Event()
        super().__init__()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/loaded":
                    site.opened.set()
                    self.send_response(204)
                    self.end_headers()
                    return
                lasting = f"; Max-Age={site.max_age}" if site.max_age else ""
                self.send_response(200)
                self.send_header("Set-Cookie", f"session={SESSION}; Path=/; HttpOnly{lasting}")
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)

            def log_message(self, format: str, *args: object) -> None:
                """Keep test output quiet."""

        return Handler


@pytest.fixture
def display() -> Iterator[str]:
    """An Xvfb server on a display it chose free (``-displayfd``); yield ``:N``."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (.ci/install installs it)")
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-nolisten", "tcp", "-screen", "0", "1280x800x24"],
        pass_fds=(write,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    number = b""
    while not number.endswith(b"\n"):
        chunk = os.read(read, 16)
        assert chunk, "Xvfb ended before it named its display"
        number += chunk
    os.close(read)
    yield f":{number.decode().strip()}"
    xvfb.terminate()
    xvfb.wait(timeout=10)


def close_tab_when_opened(site: SessionSite, display: str) -> threading.Thread:
    """Once the page has loaded, press Ctrl+W in Chromium's window on ``display``."""

    def press() -> None:
        site.opened.wait(timeout=60)
        for _ in range(CLOSE_TRIES):
            pressed = subprocess.run(
                ["xdotool", "search", "--onlyvisible", "--class", "chromium",
                 "windowfocus", "--sync", "key", "--clearmodifiers", "ctrl+w"],
                env={**os.environ, "DISPLAY": display},
                capture_output=True,
                timeout=20,
            )  # fmt: skip
            if pressed.returncode == 0:
                return
            time.sleep(0.25)

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    return presser


def files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_login_in_a_headed_chromium_keeps_the_session_encrypted(
    display: str, data_dir: Path, monkeypatch
) -> None:
    if shutil.which("xdotool") is None:
        pytest.skip("xdotool is not installed (.ci/install installs it)")
    site = SessionSite().start()
    monkeypatch.setenv("DISPLAY", display)
    out = io.StringIO()
    try:
        presser = close_tab_when_opened(site, display)
        call_command("persona", "login", "reader", site.url("/"), stdout=out)
        presser.join(timeout=5)
    finally:
        site.stop()

    persona = Persona.objects.get(name="reader")
    cookies = persona.credentials().cookies
    assert [(c.name, c.value, c.domain, c.http_only) for c in cookies] == [
        ("session", SESSION, "127.0.0.1", True)
    ]
    assert "persona reader: 1 cookies" in out.getvalue()
    assert SESSION not in persona.secrets and SESSION not in out.getvalue()
    assert files_holding(data_dir, SESSION) == []


def test_a_chromium_profile_gives_its_cookies_and_is_not_copied(
    data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")  # outside DATA_DIR
    site = SessionSite(max_age=3600).start()  # a session cookie would not outlive the browser
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(profile), executable_path=shutil.which("chromium"), headless=True
            )
            context.new_page().goto(site.url("/"))
            context.close()
    finally:
        site.stop()
    out = io.StringIO()

    call_command("persona", "add", "reader", "--profile-dir", str(profile), stdout=out)

    persona = Persona.objects.get(name="reader")
    assert [(c.name, c.value) for c in persona.credentials().cookies] == [("session", SESSION)]
    assert "persona reader: 1 cookies" in out.getvalue()
    assert files_holding(data_dir, SESSION) == []
    assert not any(p.name in ("Cookies", "Local State") for p in data_dir.rglob("*"))


def test_a_profile_dir_that_is_no_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="is not a folder"):
        call_command("persona", "add", "reader", "--profile-dir", str(tmp_path / "missing"))
    assert not Persona.objects.exists()
