"""A snapshot whose page cannot be reached backs off as a whole (issue 19, part 4): the
``defer`` and ``give_up`` transitions, ``result_share_failure``, and the whole of it through
``result_tick`` with the real curl and wget against servers on 127.0.0.1 that refuse, reset or
never accept the connection; and connect timeouts shorter than the extractor's.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django_fsm import TransitionNotAllowed
from model_bakery import baker

from core.choices import HostStatus, ResultStatus, SnapshotStatus
from core.extractors.fetch import _curl_command
from core.extractors.wget import WgetExtractor
from core.models import ArchiveResult, Host, Snapshot
from core.services.results import result_share_failure, result_tick
from core.tests.hostile_site import HostileSite
from crawls.choices import CrawlStatus, StepBehaviour
from crawls.models import Crawl

pytestmark = pytest.mark.django_db(transaction=True)

HANG = "curl: operation timed out (exit 28)"


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.MAX_ATTEMPTS = 3
    settings.BACKOFF_BASE = 10
    settings.BACKOFF_CAP = 1000
    settings.HOST_CONCURRENCY = 2
    settings.HOST_PAUSE_AFTER_FAILURES = 3


@pytest.fixture
def refusing_url() -> str:
    """A URL on 127.0.0.1 whose port nothing listens on: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/page"


@pytest.fixture
def unaccepting_url() -> Iterator[str]:
    """A URL on 127.0.0.1 whose server never accepts: its one-place backlog is taken by a
    connection of ours, so the kernel drops every further SYN and a connect hangs."""
    with socket.socket() as listener, socket.socket() as filler:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        filler.connect(listener.getsockname())
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/page"


@pytest.fixture(scope="module")
def hostile_site() -> Iterator[HostileSite]:
    site = HostileSite().start()
    yield site
    site.stop()


def started_snapshot(url: str = "http://a.example/page") -> Snapshot:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds=url)
    return baker.make(Snapshot, crawl=crawl, url=url, status=SnapshotStatus.STARTED)


def result_of(snapshot: Snapshot, extractor: str, status=ResultStatus.QUEUED, **fields):
    fields.setdefault("retry_at", timezone.now() - timedelta(seconds=1))
    return baker.make(
        ArchiveResult, snapshot=snapshot, extractor=extractor, status=status, **fields
    )


def reloaded(result: ArchiveResult) -> ArchiveResult:
    return ArchiveResult.objects.get(pk=result.pk)


def seconds_from_now(moment) -> float:
    return (moment - timezone.now()).total_seconds()


def backed_off(result: ArchiveResult, *, delay: float, error: str = HANG) -> ArchiveResult:
    """``result`` (started) after its run met ``error``: in backoff for ``delay`` seconds."""
    result.back_off(error=error, delay=delay)
    result.save()
    return result


# --- the transitions ------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [ResultStatus.QUEUED, ResultStatus.BACKOFF])
def test_result_defer_shares_the_attempt_and_waits(source: str) -> None:
    result = result_of(started_snapshot(), "title", source, attempts=1)

    result.defer(error="page did not answer headers: " + HANG, delay=40)
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.BACKOFF
    assert result.attempts == 2
    assert result.error == "page did not answer headers: " + HANG
    assert 39 <= seconds_from_now(result.retry_at) <= 40
    assert result.start_ts is None and result.end_ts is None


@pytest.mark.parametrize("source", [ResultStatus.QUEUED, ResultStatus.BACKOFF])
def test_result_give_up_is_final_with_its_reason(source: str) -> None:
    result = result_of(started_snapshot(), "title", source, attempts=2)

    result.give_up(error="attempts exhausted (3): page did not answer headers: " + HANG)
    result.save()

    result = reloaded(result)
    assert result.status == ResultStatus.FAILED
    assert result.attempts == 3
    assert result.error == "attempts exhausted (3): page did not answer headers: " + HANG
    assert result.retry_at is None
    assert result.end_ts is not None


@pytest.mark.parametrize(
    "source",
    [ResultStatus.STARTED, ResultStatus.SUCCEEDED, ResultStatus.FAILED, ResultStatus.SKIPPED],
)
@pytest.mark.parametrize(
    ("transition", "kwargs"), [("defer", {"error": "x", "delay": 1}), ("give_up", {"error": "x"})]
)
def test_a_result_that_started_or_ended_is_not_deferred(source, transition, kwargs) -> None:
    result = result_of(started_snapshot(), "title", source)

    with pytest.raises(TransitionNotAllowed):
        getattr(result, transition)(**kwargs)
    assert result.status == source


# --- result_share_failure -------------------------------------------------------------------------


def test_the_results_not_started_back_off_with_the_same_reason_and_delay() -> None:
    snapshot = started_snapshot()
    failed = backed_off(result_of(snapshot, "headers", ResultStatus.STARTED, attempts=1), delay=40)
    queued = result_of(snapshot, "title")
    due_again = result_of(snapshot, "wget", ResultStatus.BACKOFF, attempts=1)

    shared = result_share_failure(result=failed, error=HANG)

    assert shared == 2
    for other, attempts in ((queued, 1), (due_again, 2)):
        other = reloaded(other)
        assert other.status == ResultStatus.BACKOFF
        assert other.attempts == attempts
        assert other.error == "page did not answer headers: " + HANG
        assert abs((other.retry_at - failed.retry_at).total_seconds()) < 1


def test_results_running_waiting_or_final_are_left_alone() -> None:
    snapshot = started_snapshot()
    failed = backed_off(result_of(snapshot, "headers", ResultStatus.STARTED, attempts=1), delay=40)
    running = result_of(
        snapshot, "wget", ResultStatus.STARTED, retry_at=timezone.now() + timedelta(seconds=90)
    )
    waiting = result_of(
        snapshot, "title", ResultStatus.BACKOFF, retry_at=timezone.now() + timedelta(seconds=5)
    )
    skipped = result_of(snapshot, "favicon", ResultStatus.SKIPPED, retry_at=None)
    before = {r.pk: (r.status, r.attempts, r.retry_at) for r in (running, waiting, skipped)}

    assert result_share_failure(result=failed, error=HANG) == 0

    after = {
        r.pk: (r.status, r.attempts, r.retry_at)
        for r in ArchiveResult.objects.filter(pk__in=before)
    }
    assert after == before


def test_a_page_that_answered_another_result_backs_nothing_off() -> None:
    snapshot = started_snapshot()
    result_of(snapshot, "wget", ResultStatus.SUCCEEDED, retry_at=None)
    failed = backed_off(result_of(snapshot, "headers", ResultStatus.STARTED, attempts=1), delay=40)
    queued = result_of(snapshot, "title")

    assert result_share_failure(result=failed, error=HANG) == 0
    assert reloaded(queued).status == ResultStatus.QUEUED


def test_a_shared_attempt_that_was_the_last_fails_the_result(settings) -> None:
    settings.MAX_ATTEMPTS = 2
    snapshot = started_snapshot()
    failed = backed_off(result_of(snapshot, "headers", ResultStatus.STARTED, attempts=1), delay=40)
    last_try = result_of(snapshot, "title", ResultStatus.BACKOFF, attempts=1)

    result_share_failure(result=failed, error=HANG)

    last_try = reloaded(last_try)
    assert last_try.status == ResultStatus.FAILED
    assert last_try.error == "attempts exhausted (2): page did not answer headers: " + HANG


def test_after_a_result_failed_for_good_the_others_wait_the_retry_rules_delay() -> None:
    snapshot = started_snapshot()
    failed = result_of(snapshot, "headers", ResultStatus.STARTED, attempts=3)
    failed.fail(error=f"attempts exhausted (3): {HANG}")
    failed.save()
    queued = result_of(snapshot, "title")

    result_share_failure(result=failed, error=HANG)

    # backoff_delay(3): 4 * BACKOFF_BASE, with jitter down to half of it
    assert 19 <= seconds_from_now(reloaded(queued).retry_at) <= 40


def test_a_blocking_step_that_fails_so_stops_the_rest(settings) -> None:
    settings.MAX_ATTEMPTS = 1
    snapshot = started_snapshot()
    failed = result_of(snapshot, "headers", ResultStatus.STARTED, attempts=1)
    failed.fail(error=f"attempts exhausted (1): {HANG}")
    failed.save()
    blocking = result_of(snapshot, "wget", behaviour=StepBehaviour.BLOCKING)
    later = result_of(
        snapshot, "title", ResultStatus.BACKOFF, retry_at=timezone.now() + timedelta(seconds=30)
    )

    result_share_failure(result=failed, error=HANG)

    assert reloaded(blocking).status == ResultStatus.FAILED
    later = reloaded(later)
    assert later.status == ResultStatus.SKIPPED
    assert later.error.startswith("stopped: blocking step wget failed: attempts exhausted (1): ")


# --- through result_tick, with the real tools -----------------------------------------------------


def test_a_refused_page_backs_its_snapshot_off_and_counts_for_its_host(refusing_url) -> None:
    snapshot = started_snapshot(refusing_url)
    headers = result_of(snapshot, "headers")
    others = [result_of(snapshot, name) for name in ("wget", "title", "favicon")]

    result_tick(result=headers)

    headers = reloaded(headers)
    assert headers.status == ResultStatus.BACKOFF
    assert headers.error.startswith(f"network error: {refusing_url}: could not connect to ")
    for other in map(reloaded, others):
        assert (other.status, other.attempts) == (ResultStatus.BACKOFF, 1)
        assert other.error == f"page did not answer headers: {headers.error}"
        assert abs((other.retry_at - headers.retry_at).total_seconds()) < 1
    host = Host.objects.get(name=snapshot.host)
    assert (host.status, host.failures) == (HostStatus.OK, 1)
    assert host.error == f"headers: {headers.error}"


def test_a_reset_connection_backs_the_snapshot_off(hostile_site: HostileSite) -> None:
    snapshot = started_snapshot(hostile_site.url("/reset?shared"))
    wget = result_of(snapshot, "wget")
    title = result_of(snapshot, "title")

    result_tick(result=wget)

    assert reloaded(wget).error == "wget: network failure (timeout, refused or reset) (exit 4)"
    title = reloaded(title)
    assert title.status == ResultStatus.BACKOFF
    assert title.error == "page did not answer wget: " + reloaded(wget).error


def test_three_refusals_in_a_row_pause_the_host_and_its_results_wait(refusing_url) -> None:
    snapshots = [started_snapshot(f"{refusing_url}?n={n}") for n in range(4)]
    for snapshot in snapshots[:3]:
        result_tick(result=result_of(snapshot, "headers"))
    waiting = result_of(snapshots[3], "title")

    host = Host.objects.get(name=snapshots[0].host)
    assert (host.status, host.failures) == (HostStatus.PAUSED, 3)
    assert not ArchiveResult.objects.claimable().filter(pk=waiting.pk).exists()

    result_tick(result=waiting)  # claimed before the pause: its start finds the host paused

    waiting = reloaded(waiting)
    assert (waiting.status, waiting.attempts, waiting.start_ts) == (ResultStatus.QUEUED, 0, None)


def test_a_result_whose_host_is_full_is_handed_back_unstarted() -> None:
    snapshot = started_snapshot()
    for name in ("wget", "headers"):
        result_of(
            snapshot, name, ResultStatus.STARTED, retry_at=timezone.now() + timedelta(seconds=90)
        )
    lease_end = timezone.now() + timedelta(seconds=90)
    claimed = result_of(snapshot, "favicon", retry_at=lease_end)

    result_tick(result=claimed)

    assert claimed.retry_at < lease_end  # what the actor dates its release by
    fresh = reloaded(claimed)
    assert (fresh.status, fresh.attempts) == (ResultStatus.QUEUED, 0)
    assert fresh.retry_at == claimed.retry_at <= timezone.now()


# --- connect timeouts -----------------------------------------------------------------------------


@pytest.mark.parametrize("extractor", ["headers", "wget"])
def test_a_server_that_never_accepts_fails_at_the_connect_timeout(
    unaccepting_url: str, settings, extractor: str
) -> None:
    # The extractor's own timeout is far off: only the connect timeout can have ended it.
    settings.CONNECT_TIMEOUT_SECONDS = 1
    settings.EXTRACTOR_TIMEOUT = 120
    snapshot = started_snapshot(unaccepting_url)
    result = result_of(snapshot, extractor)

    result_tick(result=result)

    result = reloaded(result)
    assert result.status == ResultStatus.BACKOFF
    host = unaccepting_url.split("/")[2]
    assert result.error == f"network error: {unaccepting_url}: timed out connecting to {host}"


def test_curl_and_wget_are_given_the_connect_timeout(settings, tmp_path: Path) -> None:
    settings.CONNECT_TIMEOUT_SECONDS = 7
    curl = _curl_command("curl", "http://a.example/", tmp_path / "b", tmp_path / "h", 60, "", ())
    wget = WgetExtractor().command("wget", "http://a.example/")

    assert curl[curl.index("--connect-timeout") + 1] == "7"
    assert curl[curl.index("--max-time") + 1] == "60"
    assert "--connect-timeout=7" in wget
    assert wget.index("--connect-timeout=7") > wget.index(
        next(a for a in wget if a.startswith("--timeout="))
    )
