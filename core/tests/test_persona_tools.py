"""What wget, curl and yt-dlp are given of a persona (issue 21): its header reaches the site, and
no secret is on their command line, which any local user may read in /proc/PID/cmdline.

The test site looks at every process's command line while a tool waits for its answer (the
tool is then running, blocked on the request), so what is checked is the live argv.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace

import pytest

from archive.testing import LocalServer
from core.extractors.credentials import Cookie, Credentials
from core.extractors.fetch import fetch
from core.extractors.media import MediaExtractor
from core.extractors.wget import WgetExtractor
from core.tests.media_site import TONE_WAV

HEADER_VALUE = "Bearer hdr-5ec7e7-abcdef"
COOKIE_VALUE = "ck-77aa99bb11"
PAGE = b"<!doctype html><title>Signed</title><p>hello</p>"


class WatchingSite(LocalServer):
    """Answer every GET (``*.wav``: a short WAV, else a page), first noting the request's
    headers and the command line of every running process that names this site's port."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.requests: list[dict[str, str]] = []
        self.command_lines: list[str] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen = running_command_lines(f":{site.port}/")
                with site.lock:
                    site.requests.append(dict(self.headers.items()))
                    site.command_lines += seen
                wav = self.path.endswith(".wav")
                body = TONE_WAV if wav else PAGE
                self.send_response(200)
                self.send_header("Content-Type", "audio/wav" if wav else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Keep test output quiet."""

        return Handler


def running_command_lines(needle: str) -> list[str]:
    """The command lines (arguments joined by spaces) of the processes whose argv holds
    ``needle``, read from /proc/*/cmdline as any local user can."""
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = path.read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        line = " ".join(arg.decode("utf-8", "replace") for arg in argv if arg)
        if needle in line:
            found.append(line)
    return found


@pytest.fixture
def watching_site() -> Iterator[WatchingSite]:
    site = WatchingSite().start()
    yield site
    site.stop()


def persona() -> Credentials:
    return Credentials(
        cookies=[Cookie("sid", COOKIE_VALUE, "127.0.0.1")],
        headers={"Authorization": HEADER_VALUE},
    )


def assert_sent_and_not_on_argv(site: WatchingSite, tool: str) -> None:
    # The program, or the script an interpreter runs (yt-dlp is Python).
    tool_lines = [line for line in site.command_lines if tool in " ".join(line.split(" ")[:2])]
    assert tool_lines, f"{tool} was not seen running: {site.command_lines}"
    assert all(HEADER_VALUE not in line for line in site.command_lines)
    assert all(COOKIE_VALUE not in line for line in site.command_lines)
    assert site.requests and all(r.get("Authorization") == HEADER_VALUE for r in site.requests)
    assert all(f"sid={COOKIE_VALUE}" in r.get("Cookie", "") for r in site.requests)


def test_curl_gets_the_persona_from_files(watching_site: WatchingSite, tmp_path: Path) -> None:
    result = fetch(
        watching_site.url("/page"),
        body_path=tmp_path / "body",
        headers_path=None,
        log_path=tmp_path / "curl.log",
        timeout=20,
        credentials=persona(),
    )

    assert result.exit_code == 0
    assert_sent_and_not_on_argv(watching_site, "curl")
    assert HEADER_VALUE not in " ".join(result.cmd)


def test_wget_gets_the_persona_from_files(watching_site: WatchingSite, tmp_path: Path) -> None:
    wget = WgetExtractor(persona())

    output = wget.run(SimpleNamespace(url=watching_site.url("/page")), tmp_path)

    assert output.exit_code == 0, output.error
    assert_sent_and_not_on_argv(watching_site, "wget")
    assert any(arg.startswith("--config=") for arg in output.cmd)
    assert "--no-config" not in output.cmd  # wget would then read no file at all


def test_wget_without_a_persona_reads_no_startup_file() -> None:
    cmd = WgetExtractor().command("wget", "https://example.com/")

    assert "--no-config" in cmd and not any(arg.startswith("--config") for arg in cmd)


def test_ytdlp_gets_the_persona_from_files(watching_site: WatchingSite, tmp_path: Path) -> None:
    media = MediaExtractor(persona())

    media.run(SimpleNamespace(url=watching_site.url("/tone.wav")), tmp_path)

    assert_sent_and_not_on_argv(watching_site, "yt-dlp")
    assert any(path.suffix == ".wav" for path in tmp_path.rglob("*"))
