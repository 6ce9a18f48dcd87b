"""The estimate before a crawl: seed sizes by HEAD from real local servers, the disk guard's
room, holding a crawl that would not fit, ``add --estimate`` and ``status``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django_fsm import TransitionNotAllowed
from model_bakery import baker

from archive.testing import LocalServer
from core.services.crawls import crawl_create, crawl_hold, crawl_release
from core.tests.site import LARGE_FILE_BYTES, LiveSite
from crawls.choices import CrawlStatus
from crawls.estimate import ESTIMATING, crawl_estimate, describe, summarize
from crawls.models import Crawl
from crawls.seed_sizes import SeedSize, seed_sizes
from orchestrator.diskguard import disk_usage

pytestmark = pytest.mark.django_db

GET_ONLY_BYTES = 4321


class AwkwardServer(LocalServer):
    """``/no-head``: refuses HEAD (405) and gives its length on GET; ``/hang``: never answers
    until the server stops; ``/no-length``: a HEAD answer without Content-Length."""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        release = self.release

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                if self.path == "/hang":
                    release.wait(30)
                    return
                if self.path == "/no-head":
                    self.send_response(405)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.end_headers()  # /no-length: HTTP/1.0, no length, closes

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(GET_ONLY_BYTES))
                self.end_headers()
                self.wfile.write(b"x" * GET_ONLY_BYTES)

            def log_message(self, *args) -> None:
                """Quiet."""

        return Handler


@pytest.fixture
def awkward() -> Iterator[AwkwardServer]:
    server = AwkwardServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.ESTIMATE_TIMEOUT = 1
    settings.ESTIMATE_COPIES = 3
    return tmp_path


# --- asking seeds ------------------------------------------------------------------------------


def test_seed_sizes_come_from_content_length_in_order(live_site: LiveSite) -> None:
    urls = [live_site.url("/large.bin"), live_site.url("/missing.html"), "http://127.0.0.1:9/"]

    sizes = seed_sizes(urls, timeout=2, workers=4)

    assert sizes == [
        SeedSize(urls[0], LARGE_FILE_BYTES),
        SeedSize(urls[1], None, "HTTP 404"),
        SeedSize(
            urls[2],
            None,
            f"network error: {urls[2]}: could not connect to 127.0.0.1:9: Connection refused",
        ),
    ]


def test_a_seed_on_a_private_address_is_refused_not_asked(live_site: LiveSite) -> None:
    url = f"http://[::1]:{live_site.port}/large.bin"

    (size,) = seed_sizes([url], timeout=2, workers=1)

    assert size.size is None
    assert size.problem == (
        f"refused by the address policy: {url}: ::1 is a loopback address "
        "(ALLOWED_PRIVATE_NETWORKS opens it)"
    )


def test_a_server_that_refuses_head_is_asked_with_get(awkward: AwkwardServer) -> None:
    (size,) = seed_sizes([awkward.url("/no-head")], timeout=2, workers=1)

    assert size.size == GET_ONLY_BYTES


def test_a_seed_that_hangs_or_gives_no_length_is_unknown(awkward: AwkwardServer) -> None:
    hang, no_length = seed_sizes(
        [awkward.url("/hang"), awkward.url("/no-length")], timeout=0.5, workers=2
    )

    assert (hang.size, hang.problem) == (None, "no answer in time")
    assert (no_length.size, no_length.problem) == (None, "no Content-Length")


def test_the_summary_is_a_lower_bound_kept_estimate_copies_times() -> None:
    sizes = [SeedSize("http://a/", 1000), SeedSize("http://b/", None, "HTTP 404")]

    estimate = summarize(sizes, room_bytes=2500)

    assert {k: v for k, v in estimate.items() if k != "at"} == {
        "seed_bytes": 1000,
        "expected_bytes": 3000,
        "measured": 1,
        "unknown": 1,
        "unknown_examples": ["http://b/: HTTP 404"],
        "room_bytes": 2500,
        "fits": False,
    }
    assert describe(estimate) == (
        "expected 2.9\xa0KB (1000\xa0bytes in 1 seed(s), kept 3 times; 1 unknown); "
        "the disk guard leaves 2.4\xa0KB"
    )


def test_the_disk_guard_room_is_what_may_be_written_below_its_limit(settings) -> None:
    settings.DISK_HOLD_PERCENT = 100
    everything = disk_usage().room_bytes
    settings.DISK_HOLD_PERCENT = 0

    assert everything > 0
    assert disk_usage().room_bytes == 0


# --- holding a crawl that would not fit --------------------------------------------------------


def estimated_crawl(live_site: LiveSite) -> Crawl:
    data = f"{live_site.url('/large.bin')}\n{live_site.url('/missing.html')}".encode()
    return crawl_create(data=data, source_name="t", hold_reason=ESTIMATING)


def test_a_crawl_being_estimated_is_held_from_the_start(live_site: LiveSite) -> None:
    crawl = estimated_crawl(live_site)

    assert (crawl.status, crawl.hold_reason) == (CrawlStatus.HELD, ESTIMATING)


def test_a_crawl_that_fits_is_released_with_its_estimate(settings, live_site: LiveSite) -> None:
    settings.DISK_HOLD_PERCENT = 100
    crawl = estimated_crawl(live_site)

    estimate = crawl_estimate(crawl=crawl)

    crawl.refresh_from_db()
    assert (crawl.status, crawl.hold_reason) == (CrawlStatus.QUEUED, "")
    assert crawl.estimate == estimate
    assert (estimate["seed_bytes"], estimate["unknown"]) == (LARGE_FILE_BYTES, 1)


def test_a_crawl_that_would_not_fit_stays_held_with_the_reason(settings, live_site) -> None:
    settings.DISK_HOLD_PERCENT = 0  # no room at all
    crawl = estimated_crawl(live_site)

    crawl_estimate(crawl=crawl)

    crawl.refresh_from_db()
    assert crawl.status == CrawlStatus.HELD
    assert crawl.hold_reason.startswith("would not fit under the disk guard: expected 9.0")
    assert crawl.estimate["fits"] is False


def test_estimating_a_crawl_not_held_for_it_only_stores_the_estimate(settings, live_site) -> None:
    settings.DISK_HOLD_PERCENT = 0
    crawl = crawl_create(data=live_site.url("/large.bin").encode(), source_name="t")

    crawl_estimate(crawl=crawl)

    crawl.refresh_from_db()
    assert crawl.status == CrawlStatus.QUEUED
    assert crawl.estimate["fits"] is False


# --- hold reasons: the transitions -------------------------------------------------------------


def test_hold_keeps_its_reason_and_release_clears_it() -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.QUEUED)

    crawl = crawl_hold(crawl_id=crawl.pk, reason="moving storage")
    assert (crawl.status, crawl.hold_reason) == (CrawlStatus.HELD, "moving storage")
    crawl = crawl_release(crawl_id=crawl.pk)
    assert (crawl.status, crawl.hold_reason) == (CrawlStatus.QUEUED, "")


def test_explain_hold_changes_the_reason_of_a_held_crawl_only() -> None:
    held = baker.make(Crawl, status=CrawlStatus.HELD, hold_reason="first")
    queued = baker.make(Crawl, status=CrawlStatus.QUEUED)

    held.explain_hold(reason="second")

    assert (held.status, held.hold_reason) == (CrawlStatus.HELD, "second")
    with pytest.raises(TransitionNotAllowed):
        queued.explain_hold(reason="second")


# --- add --estimate, status --------------------------------------------------------------------


def test_add_estimate_says_the_expected_size_and_queues_a_crawl_that_fits(
    settings, live_site: LiveSite
) -> None:
    settings.DISK_HOLD_PERCENT = 100
    out = StringIO()

    call_command("add", "--estimate", live_site.url("/large.bin"), stdout=out)

    assert "Estimate: expected 9.0\xa0MB (3.0\xa0MB in 1 seed(s), kept 3 times)" in out.getvalue()
    assert Crawl.objects.get().status == CrawlStatus.QUEUED


def test_add_estimate_holds_a_crawl_that_would_not_fit_and_status_says_why(
    settings, live_site: LiveSite
) -> None:
    settings.DISK_HOLD_PERCENT = 0
    out = StringIO()

    with pytest.raises(CommandError, match=r"is held: it would not fit under the disk guard; "):
        call_command("add", "--estimate", live_site.url("/large.bin"), stdout=out)

    crawl = Crawl.objects.get()
    assert crawl.status == CrawlStatus.HELD
    status = StringIO()
    call_command("status", stdout=status)
    assert f"Crawl {crawl.pk} is held: would not fit under the disk guard" in status.getvalue()
    document = StringIO()
    call_command("status", "--json", stdout=document)
    (held,) = json.loads(document.getvalue())["held_crawls"]
    assert held["id"] == crawl.pk


def test_estimate_before_crawl_makes_add_estimate_without_the_flag(settings, live_site) -> None:
    settings.ESTIMATE_BEFORE_CRAWL = True
    settings.DISK_HOLD_PERCENT = 100
    out = StringIO()

    call_command("add", live_site.url("/index.html"), stdout=out)

    assert "Estimate: expected " in out.getvalue()
    assert Crawl.objects.get().estimate["measured"] == 1
