"""Servers that misbehave (issue 3, item 7): every extractor ends bounded, with a clear outcome.

The extractors run for real (curl, wget, Chromium, SingleFile, yt-dlp's check, git) against
core/tests/hostile_site.py, with MAX_DOWNLOAD_BYTES lowered to 2 MiB and EXTRACTOR_TIMEOUT to
2 s so that the suite stays quick (SingleFile gets 4 s: its capture alone takes about 3.5 s); a
case whose server answers at once, so that its run must end by itself, gets FINISH_TIMEOUT.
Each case checks the outcome and its message, that the run ended within its timeout plus a
margin, that what it left on disk stays within MAX_DOWNLOAD_BYTES plus a little, and that it
stopped reading early. Every extractor has an expected outcome for every case: the tables below
say, per kind of extractor, what it makes of each server. The git extractor runs twice, on the
URL as it is (it probes ``<url>/info/refs`` with curl) and on the URL with ``.git`` (cloned at
once by git). The Chromium-based runs of all but the dom extractor are slow-marked. A few cases
go through the whole pipeline (``result_tick``) on a Snapshot of a Crawl; one slow test runs the
orchestrator with its actors over a crawl of every hostile URL.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings as django_settings
from django.utils import timezone
from model_bakery import baker

from archive.testing import chromium_pids, process_cmdline
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.base import ExtractorOutput
from core.extractors.browser import CLOSE_TIMEOUT, DEADLINE_GRACE, close_shared_browser
from core.extractors.errors import Outcome
from core.extractors.fetch import fetch
from core.extractors.registry import BY_NAME, get_extractor
from core.models import ArchiveResult, Snapshot
from core.services.results import result_tick
from core.tests.hostile_site import HUGE_BYTES, HostileSite
from crawls.choices import CrawlStatus
from crawls.models import Crawl

MAX_BYTES = 2 * 1024**2
TIMEOUT = 2  # seconds
SINGLEFILE_TIMEOUT = 4  # seconds: SingleFile needs about 3.5 s for any page
MARGIN = 5  # seconds a run may take past its timeout (curl's kill deadline is timeout + 5)
# Seconds a browser capture may take past its timeout: the browser is killed DEADLINE_GRACE
# after it, may take CLOSE_TIMEOUT to exit, and its visit as long again to give up
# (core/extractors/browser.py). Seen: a pdf capture of /trickle took 7.15 s, under load.
BROWSER_MARGIN = DEADLINE_GRACE + 2 * CLOSE_TIMEOUT
# Seconds for a case whose run must end on its own (by success, a byte bound or the error the
# server causes): its answer is prompt, so TIMEOUT is not what it tests, and on a busy machine
# (the suite's other worker rendering too) a Chromium capture can take longer than 2 s.
FINISH_TIMEOUT = 20
SLACK = 64 * 1024  # bytes on disk past MAX_BYTES: logs, headers, WARC records' own headers
TOO_LARGE = f"download exceeds MAX_DOWNLOAD_BYTES ({MAX_BYTES} bytes)"
CURL_EXTRACTORS = ("headers", "title", "favicon", "htmltotext", "outlinks")
ALL_EXTRACTORS = tuple(BY_NAME)
GIT_CLONE = "git .git"  # the git extractor, on the case's URL with ".git": git clones at once
RUNNERS = (*ALL_EXTRACTORS, GIT_CLONE)
# Which column of the tables below each runner reads; every other one is "curl": the
# extractors that fetch the page with curl first (readability, and media's check for signs
# of media, included: a page that fails to arrive fails them as it does curl).
KINDS = {
    "wget": "wget",
    "screenshot": "chromium",
    "pdf": "chromium",
    "dom": "chromium",
    "recording": "chromium",
    "singlefile": "singlefile",
    "git": "git",
    GIT_CLONE: GIT_CLONE,
}
# Slow-marked where they are not the quick representative of their kind: screenshot, pdf and
# recording load pages as dom does, and SingleFile costs 3 to 7 s a case.
HEAVY_RUNNERS = ("screenshot", "pdf", "recording", "singlefile")
CASE_NUMBERS = itertools.count(1)


def kind(runner: str) -> str:
    return KINDS.get(runner, "curl")


def runner_params(runners=RUNNERS, *, quick: tuple[str, ...] | None = None) -> list:
    """``runners`` as parameters: HEAVY_RUNNERS (or all but ``quick``, if given) marked slow."""
    return [
        pytest.param(runner, marks=pytest.mark.slow)
        if (runner not in quick if quick is not None else runner in HEAVY_RUNNERS)
        else runner
        for runner in runners
    ]


@pytest.fixture(scope="module")
def hostile_site() -> Iterator[HostileSite]:
    """Serve the hostile site on 127.0.0.1 for this module."""
    site = HostileSite().start()
    yield site
    site.stop()


@pytest.fixture(scope="module", autouse=True)
def _no_chromium_left() -> Iterator[None]:
    """The rendering extractors share one browser in this process: once the module is done
    and it is closed, no Chromium process of this test session (its profiles are under
    DATA_DIR; other test runs may have theirs) may be left."""
    yield
    close_shared_browser()
    deadline = time.monotonic() + 10
    while chromium_pids(django_settings.DATA_DIR) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = chromium_pids(django_settings.DATA_DIR)
    assert not left, [process_cmdline(pid) for pid in left]


@pytest.fixture(autouse=True)
def bounds(settings) -> None:
    """Small bounds, so that a 1 GiB body or a silent server costs seconds, not minutes."""
    settings.MAX_DOWNLOAD_BYTES = MAX_BYTES
    set_timeouts(settings, TIMEOUT, singlefile=SINGLEFILE_TIMEOUT)


def set_timeouts(settings, seconds: int, *, singlefile: int) -> None:
    """Give every extractor ``seconds`` to run, and SingleFile ``singlefile`` seconds."""
    settings.EXTRACTOR_TIMEOUT = seconds
    settings.EXTRACTOR_OPTIONS = {"singlefile": {"timeout": singlefile}}


def give_time_to_finish(settings) -> None:
    """Lift the timeouts of ``bounds`` to FINISH_TIMEOUT, for a case that must not meet them."""
    set_timeouts(settings, FINISH_TIMEOUT, singlefile=FINISH_TIMEOUT)


def case_path(path: str) -> str:
    """Return ``path`` with a query of its own, so the site counts this case's requests apart."""
    separator = "&" if "?" in path else "?"
    return f"{path}{separator}case={next(CASE_NUMBERS):05d}"


@dataclass
class Case:
    """One hostile path as one runner is given it: ``url``, and ``marker``, which is in the
    path (query included) of every request the run makes for it, and of no other case's."""

    url: str
    marker: str


def hostile_case(site: HostileSite, path: str, runner: str) -> Case:
    """Return the case for ``path`` (a route with its variant, such as "/huge?html").

    The git extractor drops a URL's query and asks for ``<url>/info/refs``: it gets the route
    and its variant as path segments instead (hostile_site.py answers below a route too).
    """
    if kind(runner) not in ("git", GIT_CLONE):
        case = case_path(path)
        return Case(url=site.url(case), marker=case)
    route, _, variant = path.partition("?")
    marker = f"/case-{next(CASE_NUMBERS):05d}"
    suffix = ".git" if runner == GIT_CLONE else ""
    return Case(url=site.url(f"{route}/{variant or 'plain'}{marker}{suffix}"), marker=marker)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run_timed(name: str, url: str, out_dir: Path) -> tuple[ExtractorOutput, float]:
    """Run extractor ``name`` (or GIT_CLONE) on ``url``; return its output and the seconds it
    took."""
    extractor = get_extractor("git" if name == GIT_CLONE else name)
    started = time.monotonic()
    output = extractor.run(SimpleNamespace(url=url), out_dir)
    return output, time.monotonic() - started


def time_limit(runner: str) -> float:
    """Seconds a run of ``runner`` may take: its extractor's timeout plus MARGIN."""
    return get_extractor("git" if runner == GIT_CLONE else runner).timeout + MARGIN


class AnyOf(frozenset):
    """Expected outcomes when the run may end either way, by the machine's speed."""


def assert_outcome(output: ExtractorOutput, expected, url: str) -> None:
    """Check (outcome, error) against ``expected``: a pair, or an AnyOf of pairs; an error may
    name the case's ``{url}``."""
    if isinstance(expected, AnyOf):
        choices = {(outcome, error.format(url=url)) for outcome, error in expected}
        assert (output.outcome, output.error) in choices
    else:
        assert (output.outcome, output.error) == (expected[0], expected[1].format(url=url))


# --- bodies larger than MAX_DOWNLOAD_BYTES -------------------------------------------------------


@pytest.mark.parametrize("path", ["/huge", "/huge?html", "/gzip-bomb"])
def test_fetch_stops_a_body_at_max_download_bytes_when_no_length_gives_it_away(
    hostile_site: HostileSite, tmp_path: Path, path: str
) -> None:
    # curl's --max-filesize only checks a Content-Length: /huge sends none, and the gzip bomb's
    # is its small compressed size. The body on disk is what curl wrote (decompressed).
    path = case_path(path)
    body = tmp_path / "body"
    started = time.monotonic()

    result = fetch(
        hostile_site.url(path),
        body_path=body,
        headers_path=tmp_path / "headers.txt",
        log_path=tmp_path / "curl.log",
        timeout=TIMEOUT,
    )

    assert time.monotonic() - started < TIMEOUT + MARGIN
    assert result.outcome is Outcome.FATAL
    assert result.error == TOO_LARGE
    assert result.exit_code is None
    assert body.stat().st_size == MAX_BYTES + 1  # the kernel stopped the write one byte over
    assert hostile_site.sent(path) < HUGE_BYTES // 16  # the server stopped sending early


CHROMIUM_TIMED_OUT = (Outcome.TEMPORARY, f"chromium timed out after {TIMEOUT} s")
SINGLEFILE_TIMED_OUT = (Outcome.TEMPORARY, f"single-file timed out after {SINGLEFILE_TIMEOUT} s")
# Chromium treats a body it will not render as a download, and drops it: so does SingleFile's
# page, which then holds no document to capture; a probe of the content type says why.
DOWNLOAD = (Outcome.SKIPPED, "not a page Chromium renders (the URL is a download)")
NO_DOCUMENT = (Outcome.SKIPPED, "not a page Chromium renders (application/octet-stream)")
# What the git extractor says of an answer that is not git's: its probe's finding, or its
# check's when git took the page for an empty repository.
NOT_A_REF_LIST = (Outcome.SKIPPED, "not a git repository (info/refs is not a ref list)")
# git reads all of a huge info/refs (1 GiB here, in a few MB of memory: no disk, no limit of
# its own on the bytes) and then finds it is no ref list, unless its deadline comes first.
GIT_READS_IT_ALL = AnyOf(
    {
        (Outcome.FATAL, "git: no repository at {url}"),
        (Outcome.TEMPORARY, f"git timed out after {TIMEOUT} s"),
    }
)

# What each extractor makes of each server, as (outcome, error); "curl", "wget", "chromium",
# "singlefile", "git" and GIT_CLONE stand for the extractors of each kind (KINDS). The git
# extractor's probe is a curl fetch of <url>/info/refs, and keeps curl's outcome when it fails.
BOUNDED_CASES = {
    "/huge": {
        "curl": (Outcome.FATAL, TOO_LARGE),
        "wget": (Outcome.FATAL, TOO_LARGE),
        "chromium": DOWNLOAD,  # application/octet-stream
        "singlefile": NO_DOCUMENT,
        "git": (Outcome.FATAL, TOO_LARGE),
        GIT_CLONE: GIT_READS_IT_ALL,
    },
    "/huge?html": {
        "curl": (Outcome.FATAL, TOO_LARGE),
        "wget": (Outcome.FATAL, TOO_LARGE),
        # Chromium parses the endless page (at its own pace, a few MB a second) until the
        # deadline: retried later, and each attempt is bounded by the timeout.
        "chromium": CHROMIUM_TIMED_OUT,
        "singlefile": SINGLEFILE_TIMED_OUT,
        "git": (Outcome.FATAL, TOO_LARGE),
        GIT_CLONE: GIT_READS_IT_ALL,
    },
    "/huge?announced": {
        "curl": (Outcome.FATAL, "curl: response larger than MAX_DOWNLOAD_BYTES (exit 63)"),
        "wget": (Outcome.FATAL, TOO_LARGE),
        "chromium": DOWNLOAD,
        "singlefile": NO_DOCUMENT,
        "git": (Outcome.FATAL, "curl: response larger than MAX_DOWNLOAD_BYTES (exit 63)"),
        GIT_CLONE: GIT_READS_IT_ALL,
    },
    # wget asks for no compression and keeps the bytes as sent: the small gzip file itself.
    # Chromium inflates the 64 MiB of zeros in memory as it reads them (about 1 s on a quiet
    # machine), and captures the blank page they make (a few KB). git takes them for an empty
    # info/refs: its check (curl) stops. A case of MUST_FINISH.
    "/gzip-bomb": {
        "curl": (Outcome.FATAL, TOO_LARGE),
        "wget": (Outcome.SUCCEEDED, ""),
        "chromium": (Outcome.SUCCEEDED, ""),
        "singlefile": (Outcome.SUCCEEDED, ""),
        "git": (Outcome.FATAL, TOO_LARGE),
        GIT_CLONE: (Outcome.FATAL, TOO_LARGE),
    },
    "/loop": {
        "curl": (Outcome.FATAL, "curl: too many redirects (exit 47)"),
        "wget": (Outcome.FATAL, "wget: too many redirects (exit 8)"),
        "chromium": (Outcome.FATAL, "chromium: ERR_TOO_MANY_REDIRECTS"),
        # SingleFile only says that the page did not load, not why: retried, up to
        # max_attempts, as for any unreachable page.
        "singlefile": (Outcome.TEMPORARY, "single-file: unreachable {url}"),
        "git": (Outcome.FATAL, "curl: too many redirects (exit 47)"),
        GIT_CLONE: (
            Outcome.FATAL,
            "git clone failed (exit 128): unable to access '{url}/': Maximum (20) redirects "
            "followed",
        ),
    },
    # Content-Length promises 100000 bytes, the server sends about 1000 and closes.
    "/short": {
        "curl": (Outcome.TEMPORARY, "curl: partial file: transfer ended early (exit 18)"),
        "wget": (Outcome.TEMPORARY, "wget: network failure (timeout, refused or reset) (exit 4)"),
        "chromium": (Outcome.TEMPORARY, "chromium: ERR_CONTENT_LENGTH_MISMATCH"),
        # SingleFile captures the page Chromium loaded: the cut document is a network error.
        "singlefile": (Outcome.TEMPORARY, "single-file: unreachable {url}"),
        "git": (Outcome.TEMPORARY, "curl: partial file: transfer ended early (exit 18)"),
        GIT_CLONE: (
            Outcome.TEMPORARY,
            "git: network error: unable to access '{url}/': transfer closed with 99058 bytes "
            "remaining to read",
        ),
    },
    "/empty-reply": {
        "curl": (Outcome.TEMPORARY, "curl: server replied with nothing (exit 52)"),
        "wget": (Outcome.TEMPORARY, "wget: network failure (timeout, refused or reset) (exit 4)"),
        "chromium": (Outcome.TEMPORARY, "chromium: ERR_EMPTY_RESPONSE"),
        "singlefile": (Outcome.TEMPORARY, "single-file: unreachable {url}"),
        "git": (Outcome.TEMPORARY, "curl: server replied with nothing (exit 52)"),
        GIT_CLONE: (
            Outcome.TEMPORARY,
            "git: network error: unable to access '{url}/': Empty reply from server",
        ),
    },
}


# Bounded cases whose server answers at once: every runner ends them by itself (by its byte
# bound, by success or by the error the server causes), given time.
MUST_FINISH = {"/gzip-bomb", "/loop", "/short", "/empty-reply"}


@pytest.mark.parametrize("runner", runner_params())
@pytest.mark.parametrize("path", list(BOUNDED_CASES))
def test_misbehaving_server_gives_a_clear_bounded_outcome(
    hostile_site: HostileSite, out_dir: Path, settings, path: str, runner: str
) -> None:
    if path in MUST_FINISH:
        give_time_to_finish(settings)
    case = hostile_case(hostile_site, path, runner)

    output, took = run_timed(runner, case.url, out_dir)

    assert_outcome(output, BOUNDED_CASES[path][kind(runner)], case.url)
    assert took < time_limit(runner)
    assert folder_bytes(out_dir) <= MAX_BYTES + SLACK
    if output.outcome is Outcome.SUCCEEDED:
        assert (out_dir / output.output).stat().st_size > 0
    if BOUNDED_CASES[path][kind(runner)] is not GIT_READS_IT_ALL:
        assert hostile_site.sent_containing(case.marker) < HUGE_BYTES // 16


def test_a_redirect_loop_is_given_up_after_ten_hops(
    hostile_site: HostileSite, out_dir: Path
) -> None:
    path = case_path("/loop")

    run_timed("headers", hostile_site.url(path), out_dir)

    assert hostile_site.requests[path] == 11  # the URL, then --max-redirs 10


def test_wget_keeps_a_gzip_bomb_as_the_small_file_it_was(
    hostile_site: HostileSite, out_dir: Path
) -> None:
    output, _took = run_timed("wget", hostile_site.url(case_path("/gzip-bomb")), out_dir)

    saved = out_dir / output.output
    assert saved.name.endswith(".gz")
    assert saved.read_bytes()[:2] == b"\x1f\x8b"  # gzip's magic number: never inflated
    assert (out_dir / "warc" / "archive.warc").stat().st_size < MAX_BYTES


# --- servers that are too slow -------------------------------------------------------------------

# One curl-based extractor (headers), wget and one Chromium-based one (dom) run in the quick
# suite; the others share their fetch or their page load, and only run with the slow suite.
QUICK_RUNNERS = ("headers", "wget", "dom")
TIMED_OUT = {
    "curl": "curl: operation timed out (exit 28)",
    "wget": f"wget timed out after {TIMEOUT} s",
    "chromium": f"chromium timed out after {TIMEOUT} s",
    "singlefile": f"single-file timed out after {SINGLEFILE_TIMEOUT} s",
    "git": "curl: operation timed out (exit 28)",  # the probe
    GIT_CLONE: f"git timed out after {TIMEOUT} s",
}


@pytest.mark.parametrize("runner", runner_params(quick=QUICK_RUNNERS))
@pytest.mark.parametrize("path", ["/never", "/trickle"])
def test_a_server_that_never_finishes_times_out_as_temporary(
    hostile_site: HostileSite, out_dir: Path, path: str, runner: str
) -> None:
    case = hostile_case(hostile_site, path, runner)
    timeout = time_limit(runner) - MARGIN

    output, took = run_timed(runner, case.url, out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert output.error == TIMED_OUT[kind(runner)]
    overrun = BROWSER_MARGIN if kind(runner) == "chromium" else MARGIN
    assert timeout - 0.5 < took < timeout + overrun
    assert hostile_site.requests_containing(case.marker) == 1
    assert hostile_site.sent_containing(case.marker) < 100  # a short start, a byte a second


# --- content that lies or is broken --------------------------------------------------------------

NO_FAVICON = "no favicon (declared: none; /favicon.ico: HTTP 404)"
NO_MEDIA = (Outcome.SKIPPED, "no audio or video found")  # media's check: yt-dlp never starts
CONTENT_CASES = {
    # HTML served as image/png: only what does not read HTML keeps it. Chromium shows what the
    # server says it is, a broken image, and SingleFile saves that.
    "/html-as-png": {
        "headers": (Outcome.SUCCEEDED, ""),
        "wget": (Outcome.SUCCEEDED, ""),
        "title": (Outcome.SKIPPED, "not HTML (image/png)"),
        "favicon": (Outcome.SKIPPED, NO_FAVICON),
        "htmltotext": (Outcome.SKIPPED, "not HTML (image/png)"),
        "outlinks": (Outcome.SKIPPED, "not HTML (image/png)"),
        "screenshot": (Outcome.SUCCEEDED, ""),
        "pdf": (Outcome.SUCCEEDED, ""),
        "dom": (Outcome.SUCCEEDED, ""),
        "singlefile": (Outcome.SUCCEEDED, ""),
        "recording": (Outcome.SUCCEEDED, ""),
        "readability": (Outcome.SKIPPED, "not HTML (image/png)"),
        "media": NO_MEDIA,
        "git": NOT_A_REF_LIST,
        GIT_CLONE: NOT_A_REF_LIST,  # git called it empty; its info/refs says otherwise
    },
    # A PNG served as text/html is read as the (odd) HTML it claims to be.
    "/png-as-html": {
        "headers": (Outcome.SUCCEEDED, ""),
        "wget": (Outcome.SUCCEEDED, ""),
        "title": (Outcome.SKIPPED, "page has no <title>"),
        "favicon": (Outcome.SKIPPED, NO_FAVICON),
        "htmltotext": (Outcome.SUCCEEDED, ""),
        "outlinks": (Outcome.SUCCEEDED, ""),
        "screenshot": (Outcome.SUCCEEDED, ""),
        "pdf": (Outcome.SUCCEEDED, ""),
        "dom": (Outcome.SUCCEEDED, ""),
        "singlefile": (Outcome.SUCCEEDED, ""),
        "recording": (Outcome.SUCCEEDED, ""),
        # trafilatura refuses a body that does not start like HTML and parses to no elements
        # (readability-lxml read the PNG's text chunks as a paragraph).
        "readability": (Outcome.SKIPPED, "no article text found"),
        "media": NO_MEDIA,
        "git": NOT_A_REF_LIST,
        # git refuses the binary info/refs itself ("info/refs not valid"), as for any URL named
        # like a repository that is none.
        GIT_CLONE: (Outcome.FATAL, "git: no repository at {url}"),
    },
    "/invalid-html": {
        "headers": (Outcome.SUCCEEDED, ""),
        "wget": (Outcome.SUCCEEDED, ""),
        "title": (Outcome.SUCCEEDED, ""),
        "favicon": (Outcome.SKIPPED, NO_FAVICON),
        "htmltotext": (Outcome.SUCCEEDED, ""),
        "outlinks": (Outcome.SUCCEEDED, ""),
        "screenshot": (Outcome.SUCCEEDED, ""),
        "pdf": (Outcome.SUCCEEDED, ""),
        "dom": (Outcome.SUCCEEDED, ""),
        "singlefile": (Outcome.SUCCEEDED, ""),
        "recording": (Outcome.SUCCEEDED, ""),
        "readability": (Outcome.SUCCEEDED, ""),  # its <base> is no URL: ignored
        "media": NO_MEDIA,
        "git": NOT_A_REF_LIST,
        GIT_CLONE: NOT_A_REF_LIST,
    },
}


@pytest.mark.parametrize("runner", runner_params())
@pytest.mark.parametrize("path", list(CONTENT_CASES))
def test_lying_or_broken_content_gives_a_sensible_outcome(
    hostile_site: HostileSite, out_dir: Path, settings, path: str, runner: str
) -> None:
    give_time_to_finish(settings)  # every server here answers at once
    case = hostile_case(hostile_site, path, runner)

    output, took = run_timed(runner, case.url, out_dir)

    assert_outcome(output, CONTENT_CASES[path][runner], case.url)
    assert took < time_limit(runner)
    if output.outcome is Outcome.SUCCEEDED and runner != "title":  # title outputs the text
        assert (out_dir / output.output).is_file()
        assert (out_dir / output.output).stat().st_size > 0


def test_invalid_html_still_yields_title_text_and_the_valid_links(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    url = hostile_site.url(case_path("/invalid-html"))
    outputs = {}
    for name in ("title", "htmltotext", "outlinks"):
        folder = tmp_path / name
        folder.mkdir()
        outputs[name] = run_timed(name, url, folder)[0]

    assert outputs["title"].facts == {"title": "Broken <b>title"}  # <title> holds only text
    text = (tmp_path / "htmltotext" / "output.txt").read_text(encoding="utf-8")
    assert "Survivor" in text
    assert "\x00" not in text
    links = outputs["outlinks"].facts["outlinks"]
    assert hostile_site.url("/ok") in links  # resolved against the page: the <base> is invalid
    assert not [link for link in links if "javascript" in link or "[invalid" in link]


def test_deeply_nested_html_does_not_crash_the_parsers(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    url = hostile_site.url(case_path("/deep-html"))
    outcomes = {}
    for name in ("title", "htmltotext", "outlinks"):
        folder = tmp_path / name
        folder.mkdir()
        outcomes[name] = run_timed(name, url, folder)[0]

    assert outcomes["title"].output == "Deep"
    assert outcomes["outlinks"].outcome is Outcome.SUCCEEDED
    # libxml2 stops at its depth limit, so the deep text may be lost, but nothing fails.
    assert outcomes["htmltotext"].outcome in (Outcome.SUCCEEDED, Outcome.SKIPPED)


DEEP_HTML_CASES = {
    "screenshot": (Outcome.SUCCEEDED, ""),
    "pdf": (Outcome.SUCCEEDED, ""),
    "dom": (Outcome.SUCCEEDED, ""),
    "singlefile": (Outcome.SUCCEEDED, ""),  # it walks all 5000 levels: about 3 s
    # libxml2 stops at its depth limit before the deep text, as for htmltotext.
    "readability": (Outcome.SKIPPED, "no article text found"),
    "media": NO_MEDIA,
    "git": NOT_A_REF_LIST,
    GIT_CLONE: NOT_A_REF_LIST,
}


@pytest.mark.parametrize("runner", runner_params(DEEP_HTML_CASES))
def test_deeply_nested_html_is_captured_or_skipped_cleanly(
    hostile_site: HostileSite, out_dir: Path, settings, runner: str
) -> None:
    give_time_to_finish(settings)  # the page comes at once; only its depth is hostile
    case = hostile_case(hostile_site, "/deep-html", runner)

    output, took = run_timed(runner, case.url, out_dir)

    assert_outcome(output, DEEP_HTML_CASES[runner], case.url)
    assert took < time_limit(runner)
    if output.outcome is Outcome.SUCCEEDED:
        assert (out_dir / output.output).stat().st_size > 0


# --- the whole pipeline: result_tick on a Snapshot of a Crawl ------------------------------------


@pytest.fixture
def archive_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.MAX_ATTEMPTS = 3
    return settings.ARCHIVE_DIR


def queued_result(url: str, extractor: str) -> ArchiveResult:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds=url)
    snapshot = baker.make(Snapshot, crawl=crawl, url=url, status=SnapshotStatus.STARTED)
    return baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor=extractor,
        status=ResultStatus.QUEUED,
        retry_at=timezone.now(),
    )


def ticked(result: ArchiveResult) -> ArchiveResult:
    result_tick(result=result)
    return ArchiveResult.objects.get(pk=result.pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("extractor", ["headers", "wget"])
def test_500_then_200_backs_off_then_succeeds(
    hostile_site: HostileSite, archive_dir: Path, extractor: str
) -> None:
    url = hostile_site.url(case_path("/flaky"))
    result = queued_result(url, extractor)

    result = ticked(result)

    assert result.status == ResultStatus.BACKOFF
    assert result.attempts == 1
    assert result.error == f"HTTP 500 from {url}"
    assert result.retry_at > timezone.now() - timezone.timedelta(seconds=1)

    result = ticked(result)

    assert result.status == ResultStatus.SUCCEEDED, result.error
    assert result.attempts == 2
    assert result.error == ""
    assert result.output_files
    assert (result.snapshot.output_dir / "logs" / f"{extractor}.1.log").is_file()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("path", "extractor"), [("/huge", "wget"), ("/gzip-bomb", "title")])
def test_a_body_too_large_fails_the_result_and_leaves_nothing_behind(
    hostile_site: HostileSite, archive_dir: Path, path: str, extractor: str
) -> None:
    result = queued_result(hostile_site.url(case_path(path)), extractor)

    result = ticked(result)

    assert result.status == ResultStatus.FAILED
    assert result.error == TOO_LARGE
    assert result.attempts == 1
    assert result.retry_at is None
    folder = result.snapshot.output_dir
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        f"logs/{extractor}.1.log"
    ]
    assert folder_bytes(folder) < SLACK


@pytest.mark.django_db(transaction=True)
def test_a_server_that_never_answers_backs_off_with_timed_out(
    hostile_site: HostileSite, archive_dir: Path
) -> None:
    result = queued_result(hostile_site.url(case_path("/never")), "title")
    started = time.monotonic()

    result = ticked(result)

    assert time.monotonic() - started < TIMEOUT + MARGIN
    assert result.status == ResultStatus.BACKOFF
    assert result.error == "curl: operation timed out (exit 28)"
    assert result.retry_at > timezone.now() - timezone.timedelta(seconds=1)


@pytest.mark.django_db(transaction=True)
def test_a_redirect_loop_fails_the_result_at_once(
    hostile_site: HostileSite, archive_dir: Path
) -> None:
    result = ticked(queued_result(hostile_site.url(case_path("/loop")), "wget"))

    assert result.status == ResultStatus.FAILED
    assert result.error == "wget: too many redirects (exit 8)"
    assert result.attempts == 1


# --- the orchestrator and its actors over a crawl of every hostile URL ---------------------------

MANAGE = str(Path(django_settings.BASE_DIR) / "manage.py")
E2E_TIMEOUT = 4  # seconds
E2E_PATHS = (
    "/huge",
    "/gzip-bomb",
    "/never",
    "/trickle",
    "/loop",
    "/short",
    "/empty-reply",
    "/invalid-html",
    "/png-as-html",
    "/html-as-png",
    "/flaky",
)


def manage(data_dir: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "VELLUM_TEST_DATA_DIR_CREATED")
        and not k.startswith("DJANGO_SUPERUSER_")
    }
    env.update(
        DATA_DIR=str(data_dir),
        DJANGO_SETTINGS_MODULE="archive.settings_for_tests",
        MAX_DOWNLOAD_BYTES=str(MAX_BYTES),
        # More than the quick tests' 2 s: four actors share two cores with the site here.
        EXTRACTOR_TIMEOUT=str(E2E_TIMEOUT),
        MAX_ATTEMPTS="2",
        BACKOFF_BASE="0.2",
    )
    return subprocess.run(
        [sys.executable, MANAGE, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=django_settings.BASE_DIR,
    )


@pytest.mark.slow
def test_the_orchestrator_seals_a_crawl_of_hostile_servers(
    hostile_site: HostileSite, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    assert manage(data_dir, "init", timeout=60).returncode == 0
    urls = {path: hostile_site.url(case_path(path)) for path in E2E_PATHS}
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(urls.values()) + "\n")

    done = manage(data_dir, "add", "--wait", "--file", str(seeds), timeout=240)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    listed = manage(data_dir, "list", "--json", timeout=60)
    rows = {row["url"]: row for row in json.loads(listed.stdout)}
    by_path = {path: rows[url] for path, url in urls.items()}
    assert {row["status"] for row in by_path.values()} == {"sealed"}
    # A fatal error keeps its own message (attempts exhausted would say so first).
    for path in ("/huge", "/gzip-bomb"):
        for name, result in by_path[path]["results"].items():
            if path == "/gzip-bomb" and name == "wget":
                assert result["status"] == "succeeded", result  # the gzip file as it was sent
                continue
            assert (result["status"], result["error"]) == ("failed", TOO_LARGE), (path, name)
    for name, result in by_path["/loop"]["results"].items():
        expected = BOUNDED_CASES["/loop"]["wget" if name == "wget" else "curl"][1]
        assert (result["status"], result["error"]) == ("failed", expected), (name, result)
    for path in ("/never", "/trickle"):
        for name, result in by_path[path]["results"].items():
            assert result["status"] == "failed", (path, name, result)
            assert result["error"].startswith("attempts exhausted (2): "), (path, name, result)
            assert "timed out" in result["error"], (path, name, result)
    flaky = by_path["/flaky"]["results"]
    assert {r["status"] for n, r in flaky.items() if n != "favicon"} == {"succeeded"}
    assert flaky["favicon"]["status"] == "skipped"  # the site has no icon
    # The first request, whoever made it, got the 500: that extractor backed off and tried again.
    assert 2 in [r["attempts"] for r in flaky.values()]
    logs = data_dir / "logs"
    assert " actors spawned, 0 crashed" in (logs / "orchestrator.log").read_text()
    for log in logs.glob("*.log"):
        assert "Traceback" not in log.read_text(errors="replace"), log.name
    with closing(sqlite3.connect(data_dir / "db.sqlite3")) as db:
        (active,) = db.execute(
            "SELECT count(*) FROM core_archiveresult WHERE status IN ('queued', 'started', "
            "'backoff')"
        ).fetchone()
    assert active == 0
