"""The media extractor against a live test site, with the real yt-dlp (no database)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from archive.testing import files_in, unused_port
from core.extractors import process
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.extractors.html_page import Page
from core.extractors.media import (
    MEDIA_EXTENSIONS,
    MediaExtractor,
    claimed_by_site,
    classify_log,
    has_media_markers,
    is_media_url,
)
from core.extractors.redaction import REDACTED
from core.tests.media_site import CLIP_WEBM, TONE_WAV, MediaSite

SMALL_LIMIT = 100 * 1024  # bytes: over the test's tone and clip, under its large file


@pytest.fixture
def media_site() -> Iterator[MediaSite]:
    """A fresh media site per test, so that its request record is the test's own."""
    site = MediaSite().start()
    yield site
    site.stop()


def run(url: str, out_dir: Path) -> ExtractorOutput:
    """Run the media extractor on a stand-in snapshot (``run`` reads nothing but its url)."""
    return MediaExtractor().run(SimpleNamespace(url=url), out_dir)


def media_files(folder: Path) -> set[str]:
    """Return the files under ``folder`` that would count as downloaded audio or video."""
    return {name for name in files_in(folder) if name.rpartition(".")[2] in MEDIA_EXTENSIONS}


# --- media found ---------------------------------------------------------------------------------


def test_audio_is_saved_byte_for_byte_with_its_metadata(
    media_site: MediaSite, out_dir: Path
) -> None:
    output = run(media_site.url("/audio.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "A_tone_1-audio-1.wav"
    assert (out_dir / output.output).read_bytes() == TONE_WAV
    assert files_in(out_dir) == {
        "A_tone_1-audio-1.wav",
        "A_tone_1-audio-1.info.json",
        "media.log",
        "curl.log",  # the check for signs of media fetched the page first
    }
    info = json.loads((out_dir / "A_tone_1-audio-1.info.json").read_text())
    assert info["title"] == "A tone (1)"
    assert info["webpage_url"] == media_site.url("/audio.html")
    assert info["url"] == media_site.url("/tone.wav")
    assert Path(output.cmd[0]).name == "yt-dlp"
    assert output.cmd_version[:4].isdigit()  # yt-dlp's version is its release date
    assert output.exit_code == 0
    assert output.error == ""


def test_a_video_source_element_is_saved_byte_for_byte(
    media_site: MediaSite, out_dir: Path
) -> None:
    output = run(media_site.url("/video.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output.endswith(".webm")
    assert (out_dir / output.output).read_bytes() == CLIP_WEBM


def test_a_url_that_is_itself_media_is_saved(media_site: MediaSite, out_dir: Path) -> None:
    output = run(media_site.url("/tone.wav"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "tone-tone.wav"
    assert (out_dir / output.output).read_bytes() == TONE_WAV
    assert "curl.log" not in files_in(out_dir)  # its name said media: curl did not fetch it


def test_media_known_only_by_its_content_type_is_saved(
    media_site: MediaSite, out_dir: Path
) -> None:
    output = run(media_site.url("/listen"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert (out_dir / output.output).read_bytes() == TONE_WAV


def test_a_page_with_only_an_open_graph_video_is_saved(
    media_site: MediaSite, out_dir: Path
) -> None:
    output = run(media_site.url("/og.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert (out_dir / output.output).read_bytes() == CLIP_WEBM


def test_a_page_with_two_media_keeps_both_and_names_the_first(
    media_site: MediaSite, out_dir: Path
) -> None:
    output = run(media_site.url("/two.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert media_files(out_dir) == {"Two_media_1-two-1.wav", "Two_media_2-two-2.webm"}
    assert output.output == "Two_media_1-two-1.wav"  # the first on the page
    assert (out_dir / "Two_media_2-two-2.webm").read_bytes() == CLIP_WEBM


# --- nothing to save -----------------------------------------------------------------------------


def test_a_page_without_media_is_skipped_without_starting_yt_dlp(
    media_site: MediaSite, out_dir: Path
) -> None:
    started = time.monotonic()

    output = run(media_site.url("/plain.html"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "no audio or video found"
    assert Path(output.cmd[0]).name == "curl"  # the last command was the check's fetch
    assert output.exit_code == 0
    assert output.output == ""
    assert files_in(out_dir) == {"curl.log"}  # no media.log: yt-dlp never started
    assert len(media_site.headers("/plain.html", "User-Agent")) == 1
    assert time.monotonic() - started < 5  # a fetch (yt-dlp's start alone is about a second)


def test_a_document_is_not_downloaded_as_media(media_site: MediaSite, out_dir: Path) -> None:
    output = run(media_site.url("/doc.pdf"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "no audio or video found"
    assert Path(output.cmd[0]).name == "curl"
    assert files_in(out_dir) == {"curl.log"}


def test_yt_dlp_does_not_download_a_document_as_media(
    monkeypatch, media_site: MediaSite, out_dir: Path
) -> None:
    # Past the check (a document named like media gets there unfetched), yt-dlp's own filters
    # still refuse a "direct link" that is not audio or video.
    monkeypatch.setattr(MediaExtractor, "outcome_without_ytdlp", lambda *args: None)

    output = run(media_site.url("/doc.pdf"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "no audio or video found"
    assert output.exit_code == 0
    assert files_in(out_dir) == {"media.log"}
    assert "does not pass filter" in (out_dir / "media.log").read_text()


# --- size, time and network ----------------------------------------------------------------------


def test_media_over_the_size_limit_is_fatal(settings, media_site: MediaSite, out_dir: Path) -> None:
    settings.MAX_DOWNLOAD_BYTES = SMALL_LIMIT

    output = run(media_site.url("/large.html"), out_dir)

    # yt-dlp read the Content-Length, refused the file and exited 0: its log says why.
    assert output.exit_code == 0
    assert output.outcome is Outcome.FATAL
    assert output.error == f"download exceeds MAX_DOWNLOAD_BYTES ({SMALL_LIMIT} bytes)"
    assert output.output == ""
    assert media_files(out_dir) == set()
    assert output.cmd[output.cmd.index("--max-filesize") + 1] == str(SMALL_LIMIT)


def test_media_without_a_length_is_stopped_at_the_size_limit(
    settings, media_site: MediaSite, out_dir: Path
) -> None:
    settings.MAX_DOWNLOAD_BYTES = SMALL_LIMIT

    output = run(media_site.url("/streamed.html"), out_dir)

    # yt-dlp cannot check a body of unknown length: run_command's limit killed it.
    assert output.exit_code is None
    assert output.outcome is Outcome.FATAL
    assert output.error == f"download exceeds MAX_DOWNLOAD_BYTES ({SMALL_LIMIT} bytes)"
    assert output.output == ""
    assert media_files(out_dir) == set()  # at most a .part file, and the folder is discarded


def test_a_hanging_server_times_out_as_temporary(
    settings, media_site: MediaSite, out_dir: Path
) -> None:
    settings.EXTRACTOR_OPTIONS = {"media": {"timeout": 2}}
    started = time.monotonic()

    output = run(media_site.url("/hang.html"), out_dir)

    assert time.monotonic() - started < 10
    assert output.outcome is Outcome.TEMPORARY
    assert output.error == "curl: operation timed out (exit 28)"  # the check's fetch
    assert output.exit_code == 28


def test_yt_dlp_gets_what_is_left_of_the_timeout(
    settings, media_site: MediaSite, out_dir: Path
) -> None:
    settings.EXTRACTOR_OPTIONS = {"media": {"timeout": 2}}
    started = time.monotonic()

    output = run(media_site.url("/hang.webm"), out_dir)  # named like media: yt-dlp at once

    assert time.monotonic() - started < 10
    assert output.outcome is Outcome.TEMPORARY
    assert output.error == "yt-dlp timed out after 2 s"
    assert output.exit_code is None


def test_a_missing_page_is_fatal(media_site: MediaSite, out_dir: Path) -> None:
    output = run(media_site.url("/missing.html"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert output.error == f"HTTP 404 from {media_site.url('/missing.html')}"
    assert files_in(out_dir) == {"curl.log"}


def test_missing_media_at_a_media_url_is_fatal(media_site: MediaSite, out_dir: Path) -> None:
    output = run(media_site.url("/missing.webm"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert output.error.startswith("HTTP 404: yt-dlp: ")
    assert output.exit_code == 1


def test_missing_media_on_a_page_is_fatal(media_site: MediaSite, out_dir: Path) -> None:
    output = run(media_site.url("/gone.html"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert (
        output.error == "HTTP 404: yt-dlp: unable to download video data: HTTP Error 404: Not Found"
    )
    assert media_files(out_dir) == set()


def test_a_server_error_is_temporary(media_site: MediaSite, out_dir: Path) -> None:
    output = run(media_site.url("/busy.html"), out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert output.error == f"HTTP 503 from {media_site.url('/busy.html')}"
    assert len(media_site.headers("/busy.html", "User-Agent")) == 1  # no retries of its own


def test_a_refused_connection_is_temporary(out_dir: Path) -> None:
    output = run(f"http://127.0.0.1:{unused_port()}/video.html", out_dir)

    # curl asks the egress proxy, which could not connect: the error says what it met.
    assert output.outcome is Outcome.TEMPORARY
    assert output.error.startswith("network error: ")
    assert output.error.endswith(": Connection refused")


def test_a_refused_connection_to_yt_dlp_is_temporary(out_dir: Path) -> None:
    output = run(f"http://127.0.0.1:{unused_port()}/clip.webm", out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert "Connection refused" in output.error
    assert "caused by" not in output.error  # yt-dlp's repetition of the cause is cut


# --- options and environment ---------------------------------------------------------------------


def test_the_user_agent_option_reaches_the_page_and_the_media(
    settings, media_site: MediaSite, out_dir: Path
) -> None:
    settings.EXTRACTOR_OPTIONS = {"media": {"user_agent": "VellumMediaTest/1.0"}}

    output = run(media_site.url("/audio.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    # curl's check and yt-dlp both asked for the page.
    assert media_site.headers("/audio.html", "User-Agent") == ["VellumMediaTest/1.0"] * 2
    assert set(media_site.headers("/tone.wav", "User-Agent")) == {"VellumMediaTest/1.0"}


def test_the_default_user_agent_is_settings_user_agent(
    settings, media_site: MediaSite, out_dir: Path
) -> None:
    settings.USER_AGENT = "VellumDefault/2.0"

    run(media_site.url("/audio.html"), out_dir)

    assert set(media_site.headers("/tone.wav", "User-Agent")) == {"VellumDefault/2.0"}


def test_arguments_come_before_the_url_and_take_effect(
    settings, media_site: MediaSite, out_dir: Path
) -> None:
    settings.EXTRACTOR_OPTIONS = {"media": {"arguments": ["--add-headers", "X-Vellum:yes"]}}
    url = media_site.url("/audio.html")

    output = run(url, out_dir)

    assert output.cmd[-3:] == ["--add-headers", f"X-Vellum: {REDACTED}", url]  # recorded so
    assert media_site.headers("/tone.wav", "X-Vellum") == ["yes"]
    assert media_site.headers("/audio.html", "X-Vellum") == ["", "yes"]  # not given to curl


def test_a_user_config_file_is_ignored(
    monkeypatch, tmp_path: Path, media_site: MediaSite, out_dir: Path
) -> None:
    # A config that would make yt-dlp download nothing, where yt-dlp looks for one.
    for config in (tmp_path / "xdg" / "yt-dlp" / "config", tmp_path / "home" / "yt-dlp.conf"):
        config.parent.mkdir(parents=True)
        config.write_text("--skip-download\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    output = run(media_site.url("/audio.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert (out_dir / output.output).read_bytes() == TONE_WAV


def test_the_command_keeps_yt_dlp_to_the_page(media_site: MediaSite) -> None:
    cmd = MediaExtractor().command("yt-dlp", media_site.url("/"))

    for flag in ("--ignore-config", "--no-plugin-dirs", "--no-cache-dir", "--no-update"):
        assert flag in cmd
    assert "--no-playlist" in cmd
    assert "--no-check-certificates" not in cmd  # TLS is checked


def test_yt_dlp_not_found_is_skipped(monkeypatch, tmp_path: Path, out_dir: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: nothing is found
    monkeypatch.setattr(process, "PROJECT_BIN_DIRS", ())  # nor in the virtualenv's bin
    extractor = MediaExtractor()

    assert extractor.should_run(SimpleNamespace(url="http://127.0.0.1/")) == (
        False,
        "yt-dlp not found",
    )
    output = extractor.run(SimpleNamespace(url="http://127.0.0.1/"), out_dir)
    assert output.outcome is Outcome.SKIPPED
    assert output.error == "yt-dlp not found"
    assert files_in(out_dir) == set()


# --- deciding whether yt-dlp is worth starting ---------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        '<video src="a.webm"></video>',
        "<audio controls></audio>",
        '<div><source src="/talk.MP3?x=1"></div>',
        '<source src="/stream" type="video/mp4; codecs=avc1">',
        '<source src="/live" type="application/x-mpegURL">',
        '<iframe src="https://player.example/embed/1"></iframe>',
        '<embed src="/player.swf">',
        '<object data="/movie"></object>',
        '<meta property="og:video" content="https://a.example/v">',
        '<meta property="og:video:secure_url" content="https://a.example/v">',
        '<meta property="og:audio" content="https://a.example/a">',
        '<meta name="twitter:player" content="https://a.example/p">',
        '<script type="application/ld+json">{"@type": "VideoObject", "name": "x"}</script>',
        "<script>jwplayer('p').setup({file: 'https://cdn.example/movie.m3u8'});</script>",
    ],
)
def test_signs_of_media_are_found(body: str) -> None:
    page = Page(url="http://a.example/", html=f"<html><head></head><body>{body}</body></html>")

    assert has_media_markers(page)


@pytest.mark.parametrize(
    "body",
    [
        "<p>Words only.</p>",
        '<img src="/photo.jpg"><a href="/page.html">a page</a>',
        '<picture><source srcset="/a.webp" type="image/webp"><img src="/a.jpg"></picture>',
        '<source src="/image.png" type="image/png">',
        '<meta property="og:image" content="https://a.example/i.png">',
        '<meta property="og:title" content="A video about cats">',
        "<p>We talk about video and audio, and .mp4 files.</p>",
        '<script type="application/ld+json">{"@type": "Article"}</script>',
    ],
)
def test_pages_without_signs_of_media_are_told_apart(body: str) -> None:
    page = Page(url="http://a.example/", html=f"<html><head></head><body>{body}</body></html>")

    assert not has_media_markers(page)


@pytest.mark.parametrize(
    ("url", "claimed"),
    [
        ("https://www.youtube.com/watch?v=dQw4w9WgXcQ", True),
        ("https://vimeo.com/76979871", True),
        ("https://example.com/", False),
        ("http://127.0.0.1:8000/plain.html", False),  # only the generic extractor would take it
    ],
)
def test_urls_of_known_sites_are_claimed(url: str, claimed: bool) -> None:
    assert claimed_by_site(url) is claimed


@pytest.mark.parametrize(
    ("url", "media"),
    [
        ("http://a.example/clip.webm", True),
        ("http://a.example/Song.MP3?download=1", True),
        ("http://a.example/live/index.m3u8", True),
        ("http://a.example/a%20b.mp4", True),
        ("http://a.example/page.html", False),
        ("http://a.example/mp4", False),
        ("http://a.example/doc.pdf", False),
        ("http://[invalid/", False),
    ],
)
def test_media_urls_are_known_by_their_extension(url: str, media: bool) -> None:
    assert is_media_url(url) is media


def test_a_page_a_site_extractor_claims_goes_to_yt_dlp_without_a_fetch(
    monkeypatch, media_site: MediaSite, out_dir: Path
) -> None:
    monkeypatch.setattr("core.extractors.media.claimed_by_site", lambda url: True)

    output = run(media_site.url("/plain.html"), out_dir)

    assert Path(output.cmd[0]).name == "yt-dlp"
    assert (output.outcome, output.error) == (Outcome.SKIPPED, "no audio or video found")
    assert files_in(out_dir) == {"media.log"}


# --- classifying yt-dlp's errors -----------------------------------------------------------------


NO_MEDIA = (Outcome.SKIPPED, "no audio or video found")


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("ERROR: Unsupported URL: http://a.example/\n", NO_MEDIA),
        ("ERROR: [generic] x: No video formats found!; please report this issue\n", NO_MEDIA),
        (
            "ERROR: [generic] x: Unable to download webpage: HTTP Error 410: Gone\n",
            (
                Outcome.FATAL,
                "HTTP 410: yt-dlp: [generic] x: Unable to download webpage: HTTP Error 410: Gone",
            ),
        ),
        (
            "ERROR: unable to download video data: HTTP Error 429: Too Many Requests\n",
            (
                Outcome.TEMPORARY,
                "HTTP 429: yt-dlp: unable to download video data: "
                "HTTP Error 429: Too Many Requests",
            ),
        ),
        (
            "ERROR: [generic] a: Unable to download webpage: HTTPConnection(host='a.invalid', "
            "port=80): Failed to resolve 'a.invalid' ([Errno -2] Name or service not known) "
            '(caused by TransportError("..."))\n',
            (
                Outcome.TEMPORARY,
                "yt-dlp: [generic] a: Unable to download webpage: "
                "HTTPConnection(host='a.invalid', port=80): Failed to resolve 'a.invalid' "
                "([Errno -2] Name or service not known)",
            ),
        ),
        (
            "ERROR: unable to download video data: The read operation timed out\n",
            (
                Outcome.TEMPORARY,
                "yt-dlp: unable to download video data: The read operation timed out",
            ),
        ),
        (
            "WARNING: a warning\nERROR: [youtube] x: Private video\nERROR: a later error\n",
            (Outcome.FATAL, "yt-dlp: [youtube] x: Private video"),
        ),
        (
            "ERROR: [generic] loop: Unable to download webpage: HTTP Error 302: Found "
            "(redirect loop detected)\n",
            (
                Outcome.FATAL,
                "HTTP 302: yt-dlp: [generic] loop: Unable to download webpage: "
                "HTTP Error 302: Found (redirect loop detected)",
            ),
        ),
        (
            "Traceback (most recent call last):\n",
            (Outcome.FATAL, "yt-dlp failed (exit 1); see media.log"),
        ),
    ],
)
def test_classify_log(log: str, expected: tuple[Outcome, str]) -> None:
    assert classify_log(log, 1) == expected
