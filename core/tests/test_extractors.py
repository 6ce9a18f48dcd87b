"""The extractors against the live test site, with the real curl and wget (no database)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator

from archive.testing import files_in, unused_port
from core.extractors.base import Extractor, ExtractorOutput
from core.extractors.errors import Outcome
from core.extractors.favicon import FaviconExtractor, icon_extension
from core.extractors.fetch import final_response, parse_retry_after
from core.extractors.headers import HeadersExtractor
from core.extractors.html_page import decode_html
from core.extractors.htmltotext import HtmlToTextExtractor
from core.extractors.outlinks import OutlinksExtractor
from core.extractors.title import TitleExtractor
from core.extractors.wget import WgetExtractor, read_log
from core.tests.site import FAVICON_ICO, ICON_PNG, RETRY_AFTER_SECONDS, LiveSite

CURL_EXTRACTORS = (
    HeadersExtractor,
    TitleExtractor,
    FaviconExtractor,
    HtmlToTextExtractor,
    OutlinksExtractor,
)
ALL_EXTRACTORS = (*CURL_EXTRACTORS, WgetExtractor)
# Extractors that only make sense for HTML, so skip anything else.
HTML_ONLY_EXTRACTORS = (TitleExtractor, HtmlToTextExtractor, OutlinksExtractor)


def run(extractor: Extractor, url: str, out_dir: Path) -> ExtractorOutput:
    """Run ``extractor`` on a stand-in snapshot: ``run`` reads nothing of it but ``url``."""
    return extractor.run(SimpleNamespace(url=url), out_dir)


def assert_ran_curl(output: ExtractorOutput) -> None:
    """Check the output names the curl command that ran, its version and its exit code."""
    assert Path(output.cmd[0]).name == "curl"
    assert output.cmd_version.startswith("curl ")
    assert output.exit_code == 0


# --- headers -------------------------------------------------------------------------------------


def test_headers_saves_final_response_as_json(live_site: LiveSite, out_dir: Path) -> None:
    output = run(HeadersExtractor(), live_site.url("/"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "headers.json"
    assert_ran_curl(output)
    assert files_in(out_dir) == {"headers.json", "headers.txt", "curl.log"}
    document = json.loads((out_dir / "headers.json").read_text())
    assert document["url"] == live_site.url("/")
    assert document["final_url"] == live_site.url("/")
    assert document["status"] == 200
    assert document["headers"]["Content-type"] == "text/html"
    assert int(document["headers"]["Content-Length"]) > 0


def test_headers_json_keeps_only_the_final_hop(live_site: LiveSite, out_dir: Path) -> None:
    output = run(HeadersExtractor(), live_site.url("/redirect"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    document = json.loads((out_dir / "headers.json").read_text())
    assert document["url"] == live_site.url("/redirect")
    assert document["final_url"] == live_site.url("/page2.html")
    assert document["status"] == 200
    assert "Location" not in document["headers"]
    every_hop = (out_dir / "headers.txt").read_text()
    assert " 302 " in every_hop
    assert "Location: /page2.html" in every_hop


def test_headers_joins_repeated_fields(live_site: LiveSite, out_dir: Path) -> None:
    run(HeadersExtractor(), live_site.url("/multi-header"), out_dir)

    document = json.loads((out_dir / "headers.json").read_text())
    assert document["headers"]["X-Vellum"] == "one, two"


def test_headers_of_a_large_file_keep_no_body(live_site: LiveSite, out_dir: Path) -> None:
    output = run(HeadersExtractor(), live_site.url("/large.bin"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    document = json.loads((out_dir / "headers.json").read_text())
    assert document["headers"]["Content-type"] == "application/octet-stream"
    assert files_in(out_dir) == {"headers.json", "headers.txt", "curl.log"}


def test_final_response_parses_the_last_block_only() -> None:
    dump = (
        "HTTP/1.1 301 Moved Permanently\r\nLocation: /b\r\nX-Hop: first\r\n\r\n"
        "HTTP/2 200\r\ncontent-type: text/html\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n"
        "X-Folded: one\r\n  two\r\n\r\n"
    )
    status, fields = final_response(dump)

    assert status == 200
    assert fields == {
        "content-type": "text/html",
        "Set-Cookie": "a=1, b=2",
        "X-Folded": "one two",
    }


# --- wget ----------------------------------------------------------------------------------------


def test_wget_saves_page_requisites_and_a_valid_warc(live_site: LiveSite, out_dir: Path) -> None:
    output = run(WgetExtractor(), live_site.url("/"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    host = f"127.0.0.1+{live_site.port}"  # --restrict-file-names=windows replaces the ':'
    assert output.output == f"{host}/index.html"
    assert Path(output.cmd[0]).name == "wget"
    assert output.cmd_version.startswith("GNU Wget")
    assert output.exit_code == 0
    assert {
        f"{host}/static/style.css",
        f"{host}/static/pixel.png",
        f"{host}/static/icon.png",
        f"{host}/static/bg.png",  # found in the stylesheet
        "warc/archive.warc",  # uncompressed: finalizing packs it
        "wget.log",
    } <= files_in(out_dir)
    page = (out_dir / output.output).read_text()
    assert 'href="static/style.css"' in page  # converted to the saved copy
    assert 'src="static/pixel.png"' in page
    assert f'href="{live_site.url("/page2.html")}"' in page  # not saved: made absolute


def test_wget_warc_passes_warcio_check(live_site: LiveSite, out_dir: Path) -> None:
    run(WgetExtractor(), live_site.url("/"), out_dir)
    warc = out_dir / "warc" / "archive.warc"

    warcio = Path(sys.executable).with_name("warcio")
    check = subprocess.run(
        [str(warcio), "check", str(warc)], capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0, check.stdout + check.stderr
    with open(warc, "rb") as stream:
        responses = {
            record.rec_headers.get_header("WARC-Target-URI"): record.http_headers.get_statuscode()
            for record in ArchiveIterator(stream, check_digests=True)
            if record.rec_type == "response"
        }
    assert responses[live_site.url("/")] == "200"
    assert responses[live_site.url("/static/pixel.png")] == "200"


def test_wget_follows_a_redirect(live_site: LiveSite, out_dir: Path) -> None:
    output = run(WgetExtractor(), live_site.url("/redirect"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert "<title>Page Two</title>" in (out_dir / output.output).read_text()


def test_wget_succeeds_when_only_a_requisite_is_missing(live_site: LiveSite, out_dir: Path) -> None:
    output = run(WgetExtractor(), live_site.url("/broken-requisite.html"), out_dir)

    assert output.exit_code == 8  # wget's "server issued an error response", for the image
    assert output.outcome is Outcome.SUCCEEDED
    assert output.error == ""
    assert output.output == f"127.0.0.1+{live_site.port}/broken-requisite.html"


def test_wget_404_is_fatal(live_site: LiveSite, out_dir: Path) -> None:
    output = run(WgetExtractor(), live_site.url("/missing.html"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert output.error == f"HTTP 404 from {live_site.url('/missing.html')}"
    assert output.exit_code == 8
    assert output.output == ""


def test_wget_503_is_temporary_with_retry_after(live_site: LiveSite, out_dir: Path) -> None:
    output = run(WgetExtractor(), live_site.url("/server-error"), out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert "HTTP 503" in output.error
    assert output.retry_after == RETRY_AFTER_SECONDS


def test_wget_refused_connection_is_temporary(out_dir: Path) -> None:
    output = run(WgetExtractor(), f"http://127.0.0.1:{unused_port()}/", out_dir)

    # wget asks the egress proxy, which could not connect: it says so, and wget sees a 502.
    assert output.outcome is Outcome.TEMPORARY
    assert output.error.startswith("network error: ")
    assert "Connection refused" in output.error


def test_read_log_finds_a_redirect_loop() -> None:
    log = "10 redirections exceeded.\n"

    main = read_log(log)

    assert main.too_many_redirects
    assert (main.path, main.http_status) == (None, None)
    assert not read_log("2024-01-01 10:00:00 ERROR 404: Not Found.\n").too_many_redirects


def test_read_log_finds_the_main_file_or_its_error() -> None:
    saved = (
        '2026-01-01 10:00:00 URL:http://a.test/ [816/816] -> "a.test/index.html" [1]\n'
        "http://a.test/gone.png:\n2026-01-01 10:00:00 ERROR 404: Not Found.\n"
    )
    failed = "http://a.test/x:\n2026-01-01 10:00:00 ERROR 503: Service Unavailable.\n"

    assert read_log(saved).path == "a.test/index.html"
    assert read_log(saved).http_status is None
    assert read_log(failed).http_status == 503
    assert read_log(failed).path is None


# --- title ---------------------------------------------------------------------------------------


def test_title_is_read_and_whitespace_collapsed(live_site: LiveSite, out_dir: Path) -> None:
    output = run(TitleExtractor(), live_site.url("/"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "Vellum Test Home"
    assert output.facts == {"title": "Vellum Test Home"}
    assert (out_dir / "title.txt").read_text() == "Vellum Test Home\n"
    assert files_in(out_dir) == {"title.txt", "curl.log"}  # the fetched body is gone
    assert_ran_curl(output)


def test_title_of_a_latin1_page_is_decoded_by_its_meta_charset(
    live_site: LiveSite, out_dir: Path
) -> None:
    output = run(TitleExtractor(), live_site.url("/latin1.html"), out_dir)

    assert output.facts == {"title": "Caf\u00e9"}


def test_title_missing_is_skipped(live_site: LiveSite, out_dir: Path) -> None:
    output = run(TitleExtractor(), live_site.url("/page3.html"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "page has no <title>"
    assert files_in(out_dir) == {"curl.log"}


def test_title_is_not_taken_from_a_404_page(live_site: LiveSite, out_dir: Path) -> None:
    output = run(TitleExtractor(), live_site.url("/missing.html"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert output.error == f"HTTP 404 from {live_site.url('/missing.html')}"
    assert output.facts == {}


def test_response_over_max_download_bytes_is_fatal(
    live_site: LiveSite, out_dir: Path, settings
) -> None:
    settings.MAX_DOWNLOAD_BYTES = 1024 * 1024

    output = run(TitleExtractor(), live_site.url("/large.bin"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert output.exit_code == 63
    assert "MAX_DOWNLOAD_BYTES" in output.error
    assert files_in(out_dir) == {"curl.log"}


# --- favicon -------------------------------------------------------------------------------------


def test_favicon_prefers_the_declared_icon(live_site: LiveSite, out_dir: Path) -> None:
    output = run(FaviconExtractor(), live_site.url("/"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "favicon.png"
    assert (out_dir / "favicon.png").read_bytes() == ICON_PNG
    assert files_in(out_dir) == {"favicon.png", "curl.log"}
    assert output.cmd[-1] == live_site.url("/static/icon.png")


def test_favicon_falls_back_to_favicon_ico(live_site: LiveSite, out_dir: Path) -> None:
    output = run(FaviconExtractor(), live_site.url("/page2.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "favicon.ico"
    assert (out_dir / "favicon.ico").read_bytes() == FAVICON_ICO


def test_favicon_falls_back_when_the_declared_icon_is_gone(
    live_site: LiveSite, out_dir: Path
) -> None:
    output = run(FaviconExtractor(), live_site.url("/broken-icon.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert (out_dir / "favicon.ico").read_bytes() == FAVICON_ICO
    assert files_in(out_dir) == {"favicon.ico", "curl.log"}


def test_no_favicon_is_skipped_with_every_candidate_named(
    bare_site: LiveSite, out_dir: Path
) -> None:
    output = run(FaviconExtractor(), bare_site.url("/page2.html"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "no favicon (declared: none; /favicon.ico: HTTP 404)"
    assert files_in(out_dir) == {"curl.log"}


def test_no_favicon_names_the_failed_declared_icon(bare_site: LiveSite, out_dir: Path) -> None:
    output = run(FaviconExtractor(), bare_site.url("/broken-icon.html"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    # The data: URI icon is not fetched; the relative one is resolved against the page.
    assert output.error == (
        f"no favicon ({bare_site.url('/static/nope.png')}: HTTP 404; /favicon.ico: HTTP 404)"
    )


@pytest.mark.parametrize(
    ("content_type", "url", "extension"),
    [
        ("image/png", "http://a.test/icon", "png"),
        ("image/vnd.microsoft.icon", "http://a.test/icon.png", "ico"),
        ("application/octet-stream", "http://a.test/icon.svg", "svg"),
        ("", "http://a.test/favicon", "ico"),
    ],
)
def test_icon_extension(content_type: str, url: str, extension: str) -> None:
    assert icon_extension(content_type, url) == extension


# --- htmltotext ----------------------------------------------------------------------------------


def test_htmltotext_writes_the_page_text(live_site: LiveSite, out_dir: Path) -> None:
    output = run(HtmlToTextExtractor(), live_site.url("/"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "output.txt"
    text = (out_dir / "output.txt").read_text(encoding="utf-8")
    assert "Welcome to the Vellum test site" in text
    assert "This paragraph is archived by every extractor." in text
    assert "<p>" not in text
    assert files_in(out_dir) == {"output.txt", "curl.log"}


def test_htmltotext_output_is_utf8_whatever_the_page_encoding(
    live_site: LiveSite, out_dir: Path
) -> None:
    run(HtmlToTextExtractor(), live_site.url("/latin1.html"), out_dir)

    assert "A na\u00efve caf\u00e9 page." in (out_dir / "output.txt").read_bytes().decode("utf-8")


@pytest.mark.parametrize(
    ("data", "http_charset", "text"),
    [
        (b"\xef\xbb\xbf<p>caf\xc3\xa9</p>", "iso-8859-1", "<p>caf\u00e9</p>"),  # BOM wins
        (b"<meta charset=utf-8>caf\xe9", "iso-8859-1", "<meta charset=utf-8>caf\u00e9"),  # HTTP
        (b'<meta charset="iso-8859-1">caf\xe9', None, '<meta charset="iso-8859-1">caf\u00e9'),
        (b"caf\xc3\xa9", None, "caf\u00e9"),  # nothing declared: UTF-8
        (b"caf\xe9", "no-such-charset", "caf\ufffd"),  # nothing fits: UTF-8, replaced
        # A page's own <meta> may name any Python codec: only text encodings count, and only
        # when they give no lone surrogate.
        (b'<meta charset="rot13">abc', None, '<meta charset="rot13">abc'),
        (b'<meta charset="base64">PHA+', None, '<meta charset="base64">PHA+'),
        (b'<meta charset="unicode_escape">\\ud800', None, '<meta charset="unicode_escape">\\ud800'),
        (b"+2AA-", "utf-7", "+2AA-"),
    ],
)
def test_decode_html(data: bytes, http_charset: str | None, text: str) -> None:
    assert decode_html(data, http_charset) == text


# --- outlinks ------------------------------------------------------------------------------------


def test_outlinks_are_absolute_http_without_fragments_or_duplicates(
    live_site: LiveSite, out_dir: Path
) -> None:
    output = run(OutlinksExtractor(), live_site.url("/"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    expected = [
        live_site.url("/page2.html"),  # written relative, and again with a fragment
        live_site.url("/page3.html"),
        live_site.url("/missing.html"),
        "http://example.invalid/x",
    ]  # no mailto:, and no "#top": that is this very page
    assert output.facts == {"outlinks": expected}
    assert output.output == "outlinks.json"
    assert json.loads((out_dir / "outlinks.json").read_text()) == expected
    assert files_in(out_dir) == {"outlinks.json", "curl.log"}


def test_outlinks_respect_base_href_and_area(live_site: LiveSite, out_dir: Path) -> None:
    output = run(OutlinksExtractor(), live_site.url("/base.html"), out_dir)

    assert output.facts["outlinks"] == [
        live_site.url("/docs/guide.html"),
        live_site.url("/top.html"),
        live_site.url("/docs/area.html"),
    ]


def test_page_without_links_succeeds_with_an_empty_list(live_site: LiveSite, out_dir: Path) -> None:
    output = run(OutlinksExtractor(), live_site.url("/no-links.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED
    assert output.facts == {"outlinks": []}
    assert json.loads((out_dir / "outlinks.json").read_text()) == []


# --- every extractor: failures -------------------------------------------------------------------


@pytest.mark.parametrize("extractor_class", CURL_EXTRACTORS)
def test_404_is_fatal(extractor_class: type[Extractor], live_site: LiveSite, out_dir: Path) -> None:
    output = run(extractor_class(), live_site.url("/missing.html"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert "404" in output.error
    assert output.output == ""


@pytest.mark.parametrize("extractor_class", ALL_EXTRACTORS)
def test_503_is_temporary_with_retry_after(
    extractor_class: type[Extractor], live_site: LiveSite, out_dir: Path
) -> None:
    output = run(extractor_class(), live_site.url("/server-error"), out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert "503" in output.error
    assert output.retry_after == RETRY_AFTER_SECONDS


@pytest.mark.parametrize("extractor_class", ALL_EXTRACTORS)
def test_slow_page_times_out_as_temporary(
    extractor_class: type[Extractor], live_site: LiveSite, out_dir: Path, settings
) -> None:
    settings.EXTRACTOR_TIMEOUT = 2
    started = time.monotonic()

    url = live_site.url("/slow")
    output = run(extractor_class(), url, out_dir)

    assert time.monotonic() - started < 6
    assert output.outcome is Outcome.TEMPORARY
    # curl's own --max-time fires first; wget's read timeout races the kill of its group.
    assert output.error in (
        "curl: operation timed out (exit 28)",
        "wget timed out after 2 s",
        f"wget: network failure (timeout, refused or reset) (exit 4) from {url}",
    )


@pytest.mark.parametrize("extractor_class", HTML_ONLY_EXTRACTORS)
@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/data.json", "application/json"), ("/feed.xml", "application/rss+xml")],
)
def test_not_html_is_skipped(
    extractor_class: type[Extractor],
    path: str,
    content_type: str,
    live_site: LiveSite,
    out_dir: Path,
) -> None:
    output = run(extractor_class(), live_site.url(path), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == f"not HTML ({content_type})"
    assert files_in(out_dir) == {"curl.log"}


@pytest.mark.parametrize("extractor_class", ALL_EXTRACTORS)
def test_missing_binary(
    extractor_class: type[Extractor],
    live_site: LiveSite,
    out_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    extractor = extractor_class()
    binary = extractor.binaries[0]

    assert extractor.should_run(SimpleNamespace(url=live_site.url("/"))) == (
        False,
        f"{binary} not found",
    )
    output = run(extractor, live_site.url("/"), out_dir)
    assert output.outcome is Outcome.SKIPPED
    assert output.error == f"{binary} not found"


@pytest.mark.parametrize("extractor_class", ALL_EXTRACTORS)
def test_should_run_when_the_binary_is_installed(
    extractor_class: type[Extractor], live_site: LiveSite
) -> None:
    assert extractor_class().should_run(SimpleNamespace(url=live_site.url("/"))) == (True, "")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("7", 7.0), ("0", 0.0), ("", None), ("soon", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],
)
def test_parse_retry_after(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value) == seconds


# --- per-extractor user agent and arguments (EXTRACTOR_OPTIONS) ----------------------------------


def test_curl_extractors_send_their_user_agent_and_arguments(
    live_site: LiveSite, out_dir: Path, settings
) -> None:
    settings.EXTRACTOR_OPTIONS = {
        "htmltotext": {"user_agent": "VellumText/2", "arguments": ["--header", "X-Vellum: text"]}
    }

    text_output = run(HtmlToTextExtractor(), live_site.url("/echo-headers"), out_dir)
    title_output = run(TitleExtractor(), live_site.url("/echo-headers"), out_dir.parent / "t")

    text = (out_dir / text_output.output).read_text(encoding="utf-8")
    assert "User-Agent: VellumText/2" in text
    assert "X-Vellum: text" in text
    # The recorded command names the header but not its value (core/extractors/redaction.py).
    assert text_output.cmd[-3:-1] == ["--header", "X-Vellum: …redacted…"]
    assert title_output.output == settings.USER_AGENT  # the others keep USER_AGENT


def test_wget_sends_its_user_agent_and_arguments(
    live_site: LiveSite, out_dir: Path, settings
) -> None:
    settings.EXTRACTOR_OPTIONS = {
        "wget": {"user_agent": "VellumWget/3", "arguments": ["--header=X-Vellum: wget"]}
    }

    output = run(WgetExtractor(), live_site.url("/echo-headers"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED
    page = (out_dir / output.output).read_text(encoding="utf-8")
    assert "<title>VellumWget/3</title>" in page
    assert "X-Vellum: wget" in page
