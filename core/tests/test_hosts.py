"""Hosts and their circuit breakers, and the per-host limit on running results (issue 19, part 4:
core/models/hosts.py, core/services/hosts.py, ArchiveResultQuerySet.claimable).

Run on SQLite and on PostgreSQL (DATABASE_URL=postgres://...): the start of a result is where the
limit is exact, under the host row's lock; ``test_results_that_start_at_once_never_pass_the_limit``
starts them from threads at the same instant.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import close_old_connections, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone
from django_fsm import TransitionNotAllowed
from model_bakery import baker
from rich.console import Console

from core.choices import HostStatus, ResultStatus, SnapshotStatus
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.models import ArchiveResult, Host, Snapshot
from core.services.hosts import (
    CRAWL_LIMIT_RECHECK,
    host_note_outcome,
    host_resume,
    host_start_wait,
    hosts_paused,
)
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.claims import claim_next, claim_next_with_companions
from orchestrator.display import CrawlProgress
from orchestrator.wakeups import DUE, Listener
from orchestrator.work import work_types

pytestmark = pytest.mark.django_db(transaction=True)

HANG = "curl: operation timed out (exit 28)"
LEASE = 600.0


@pytest.fixture(autouse=True)
def _host_settings(settings) -> None:
    """The defaults this file's figures assume, whatever the environment says."""
    settings.HOST_CONCURRENCY = 2
    settings.HOST_PAUSE_AFTER_FAILURES = 3
    settings.BACKOFF_BASE = 10
    settings.BACKOFF_CAP = 1000


def snapshot_on(host: str, **fields) -> Snapshot:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    fields.setdefault("status", SnapshotStatus.STARTED)
    return baker.make(Snapshot, crawl=crawl, url=f"http://{host}/page", **fields)


def result_on(host: str, status: str = ResultStatus.QUEUED, **fields) -> ArchiveResult:
    """A result of a new started snapshot of ``host``: due now, or, started, under a live lease
    (``retry_at`` says otherwise)."""
    if status == ResultStatus.STARTED:
        fields.setdefault("retry_at", timezone.now() + timedelta(seconds=LEASE))
    fields.setdefault("retry_at", timezone.now() - timedelta(seconds=1))
    fields.setdefault("extractor", "headers")
    return baker.make(ArchiveResult, snapshot=snapshot_on(host), status=status, **fields)


def failure(error: str = HANG) -> ExtractorOutput:
    return ExtractorOutput(outcome=Outcome.TEMPORARY, error=error)


def fail_times(host: str, times: int) -> Host:
    for _ in range(times):
        host_note_outcome(host=host, extractor="headers", output=failure())
    return Host.objects.get(name=host)


def paused_host(name: str, *, for_seconds: float, failures: int = 3) -> Host:
    """A host paused ``for_seconds`` from now (negative: its pause has passed, it is on trial)."""
    host = Host.objects.create(name=name)
    host.pause(error=f"headers: {HANG}", delay=for_seconds)
    host.failures = failures
    host.save()
    return host


def seconds_from_now(moment) -> float:
    return (moment - timezone.now()).total_seconds()


# --- the host of a snapshot -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://example.com/a/b?c=d", "example.com"),
        ("http://example.com/", "example.com"),
        ("http://127.0.0.1:8000/page?x=1", "127.0.0.1:8000"),
        ("https://[::1]:8443/", "[::1]:8443"),
        ("http://xn--bcher-kva.example/", "xn--bcher-kva.example"),
        ("http://no-path.example", "no-path.example"),
    ],
)
def test_a_snapshot_knows_its_host_from_its_url(url: str, host: str) -> None:
    snapshot = baker.make(Snapshot, crawl=baker.make(Crawl), url=url)

    assert Snapshot.objects.get(pk=snapshot.pk).host == host
    assert Snapshot.objects.filter(host=host).count() == 1


# --- Host transitions -----------------------------------------------------------------------------


def test_host_count_failure_counts_and_keeps_the_reason() -> None:
    host = Host.objects.create(name="a.example")

    host.count_failure(error="headers: " + HANG)
    host.save()

    host = Host.objects.get(pk=host.pk)
    assert (host.status, host.failures, host.error) == (HostStatus.OK, 1, "headers: " + HANG)
    assert host.paused_until is None


@pytest.mark.parametrize("source", [HostStatus.OK, HostStatus.PAUSED])
def test_host_pause_counts_and_pauses_for_the_delay(source: str) -> None:
    host = Host.objects.create(name="a.example")
    if source == HostStatus.PAUSED:
        host.pause(error="first", delay=1)

    host.pause(error="wget: " + HANG, delay=40)
    host.save()

    host = Host.objects.get(pk=host.pk)
    assert host.status == HostStatus.PAUSED
    assert host.error == "wget: " + HANG
    assert 39 <= seconds_from_now(host.paused_until) <= 40
    assert host.failures == (2 if source == HostStatus.PAUSED else 1)


def test_host_count_success_clears_the_count() -> None:
    host = Host.objects.create(name="a.example")
    host.count_failure(error="x")

    host.count_success()
    host.save()

    host = Host.objects.get(pk=host.pk)
    assert (host.status, host.failures, host.error) == (HostStatus.OK, 0, "")
    assert host.proven_at is not None


def test_a_hosts_proof_is_kept_from_its_first_success() -> None:
    host = Host.objects.create(name="a.example")
    host.count_success()
    first = host.proven_at

    host.count_success()

    assert host.proven_at == first


@pytest.mark.parametrize("transition", ["count_failure", "pause"])
def test_a_connection_failure_ends_a_hosts_proof(transition: str) -> None:
    host = Host.objects.create(name="a.example")
    host.count_success()
    kwargs = {"error": "x", "delay": 1} if transition == "pause" else {"error": "x"}

    getattr(host, transition)(**kwargs)
    host.save()

    assert Host.objects.get(pk=host.pk).proven_at is None


def test_a_new_host_is_not_proven() -> None:
    assert Host.objects.create(name="a.example").proven_at is None


def test_host_resume_runs_its_results_again() -> None:
    host = paused_host("a.example", for_seconds=60)

    host.resume()
    host.save()

    host = Host.objects.get(pk=host.pk)
    assert (host.status, host.failures, host.error, host.paused_until) == (
        HostStatus.OK,
        0,
        "",
        None,
    )
    assert host.proven_at is not None


@pytest.mark.parametrize(
    ("source", "transition", "kwargs"),
    [
        (HostStatus.OK, "resume", {}),
        (HostStatus.PAUSED, "count_failure", {"error": "x"}),
        (HostStatus.PAUSED, "count_success", {}),
    ],
)
def test_disallowed_host_transition_raises(source: str, transition: str, kwargs: dict) -> None:
    host = Host.objects.create(name="a.example")
    if source == HostStatus.PAUSED:
        host.pause(error="x", delay=1)

    with pytest.raises(TransitionNotAllowed):
        getattr(host, transition)(**kwargs)
    assert host.status == source


def test_host_status_cannot_be_assigned() -> None:
    host = Host.objects.create(name="a.example")

    with pytest.raises(AttributeError):
        host.status = HostStatus.PAUSED


def test_a_paused_host_says_until_when_and_why() -> None:
    host = paused_host("a.example:8080", for_seconds=60)

    described = host.describe()

    until = timezone.localtime(host.paused_until)
    assert described == (
        f"host a.example:8080: paused until {until:%Y-%m-%d %H:%M:%S %Z} "
        f"(3 connection failures: headers: {HANG})"
    )


def test_a_host_whose_pause_passed_says_it_is_on_trial() -> None:
    assert " on trial since " in paused_host("a.example", for_seconds=-1).describe()


def test_a_host_says_it_is_on_probation_until_a_result_succeeds() -> None:
    host = Host.objects.create(name="a.example")

    assert host.describe() == "host a.example: ok, on probation (no result has succeeded yet)"
    host.count_success()
    assert host.describe() == "host a.example: ok"


# --- the breaker ----------------------------------------------------------------------------------


def test_failures_below_the_limit_are_counted_without_a_pause() -> None:
    host = fail_times("a.example", 2)

    assert (host.status, host.failures) == (HostStatus.OK, 2)
    assert host.error == f"headers: {HANG}"


def test_the_failure_that_reaches_the_limit_pauses_the_host_for_the_first_backoff() -> None:
    host = fail_times("a.example", 3)

    assert (host.status, host.failures) == (HostStatus.PAUSED, 3)
    # backoff_delay(1): BACKOFF_BASE (10 s here), with jitter down to half of it
    assert 4 <= seconds_from_now(host.paused_until) <= 10


def test_each_further_failure_pauses_the_host_for_longer() -> None:
    host = fail_times("a.example", 5)

    assert (host.status, host.failures) == (HostStatus.PAUSED, 5)
    # backoff_delay(3): 4 * BACKOFF_BASE, with jitter down to half of it
    assert 19 <= seconds_from_now(host.paused_until) <= 40


def test_a_success_resumes_a_paused_host() -> None:
    fail_times("a.example", 3)

    changed = host_note_outcome(
        host="a.example", extractor="wget", output=ExtractorOutput(outcome=Outcome.SUCCEEDED)
    )

    assert (changed.status, changed.failures, changed.paused_until) == (HostStatus.OK, 0, None)


def test_a_success_clears_failures_so_they_are_not_in_a_row() -> None:
    fail_times("a.example", 2)
    host_note_outcome(
        host="a.example", extractor="wget", output=ExtractorOutput(outcome=Outcome.SUCCEEDED)
    )

    host = fail_times("a.example", 2)

    assert (host.status, host.failures) == (HostStatus.OK, 2)


def test_the_first_success_of_a_host_proves_it_and_later_ones_write_nothing() -> None:
    Host.objects.create(name="a.example")  # as its first result's start makes it
    succeeded = ExtractorOutput(outcome=Outcome.SUCCEEDED)

    proven = host_note_outcome(host="a.example", extractor="wget", output=succeeded)
    again = host_note_outcome(host="a.example", extractor="headers", output=succeeded)

    assert proven is not None and proven.proven_at is not None
    assert again is None
    assert Host.objects.get(name="a.example").proven_at == proven.proven_at


def test_a_failure_after_a_success_puts_the_host_on_probation_again() -> None:
    Host.objects.create(name="a.example")
    host_note_outcome(
        host="a.example", extractor="wget", output=ExtractorOutput(outcome=Outcome.SUCCEEDED)
    )

    host = fail_times("a.example", 1)

    assert (host.status, host.failures, host.proven_at) == (HostStatus.OK, 1, None)


def test_a_success_on_a_host_with_nothing_to_clear_writes_nothing() -> None:
    changed = host_note_outcome(
        host="a.example", extractor="wget", output=ExtractorOutput(outcome=Outcome.SUCCEEDED)
    )

    assert changed is None
    assert not Host.objects.exists()


@pytest.mark.parametrize(
    "output",
    [
        ExtractorOutput(outcome=Outcome.FATAL, error="HTTP 404 from http://a.example/"),
        ExtractorOutput(outcome=Outcome.TEMPORARY, error="HTTP 503 from http://a.example/"),
        ExtractorOutput(
            outcome=Outcome.TEMPORARY, error="curl: partial file: transfer ended early (exit 18)"
        ),
        ExtractorOutput(outcome=Outcome.SKIPPED, error="page has no <title>"),
        ExtractorOutput(outcome=Outcome.TEMPORARY, error="git timed out after 60 s"),
    ],
    ids=["404", "503", "short body", "skipped", "git timeout"],
)
def test_a_server_that_answers_neither_counts_nor_clears(output: ExtractorOutput) -> None:
    fail_times("a.example", 2)

    changed = host_note_outcome(host="a.example", extractor="title", output=output)

    assert changed is None
    host = Host.objects.get(name="a.example")
    assert (host.status, host.failures) == (HostStatus.OK, 2)


def test_hosts_paused_lists_the_waiting_ones_first_then_those_on_trial() -> None:
    paused_host("later.example", for_seconds=120)
    paused_host("trial.example", for_seconds=-5)
    paused_host("sooner.example", for_seconds=60)
    Host.objects.create(name="fine.example")

    assert [host.name for host in hosts_paused()] == [
        "sooner.example",
        "later.example",
        "trial.example",
    ]


def test_host_resume_by_hand() -> None:
    host = paused_host("a.example", for_seconds=600)

    resumed = host_resume(host=host)

    assert resumed.status == HostStatus.OK
    assert Host.objects.get(pk=host.pk).paused_until is None
    with pytest.raises(TransitionNotAllowed):
        host_resume(host=resumed)


# --- how many may run: the start ---------------------------------------------------------------


def refused(result: ArchiveResult, *, keeps_slot: bool = False) -> bool:
    """Whether ``result`` may not start now, as result_tick asks it (host_start_wait)."""
    with transaction.atomic():
        return host_start_wait(result=result, keeps_slot=keeps_slot) is not None


def test_a_host_takes_results_up_to_its_limit() -> None:
    result_on("a.example:81", ResultStatus.STARTED)
    next_one = result_on("a.example:81")

    assert refused(next_one) is False
    assert Host.objects.filter(name="a.example:81", status=HostStatus.OK).exists()


def test_a_host_at_its_limit_takes_no_more() -> None:
    result_on("a.example:81", ResultStatus.STARTED)
    result_on("a.example:81", ResultStatus.STARTED)

    assert refused(result_on("a.example:81")) is True
    assert refused(result_on("b.example")) is False
    assert refused(result_on("a.example:82")) is False  # another port, another server


def test_the_limit_comes_from_host_concurrency(settings) -> None:
    settings.HOST_CONCURRENCY = 3
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED)

    assert refused(result_on("a.example")) is False


def test_host_concurrency_0_sets_no_limit(settings) -> None:
    settings.HOST_CONCURRENCY = 0
    for _ in range(5):
        result_on("a.example", ResultStatus.STARTED)

    assert refused(result_on("a.example")) is False


def test_a_started_result_whose_lease_ran_out_does_not_count() -> None:
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED, retry_at=timezone.now() - timedelta(seconds=1))

    assert refused(result_on("a.example")) is False


def test_a_result_that_reads_what_was_saved_neither_waits_for_nor_takes_a_place() -> None:
    """title reads the page from wget's WARC: it asks the host nothing."""
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED, extractor="title")

    assert refused(result_on("a.example", extractor="title")) is False
    assert refused(result_on("a.example")) is True
    assert refused(result_on("b.example")) is False


def test_results_that_read_what_was_saved_do_not_fill_a_host() -> None:
    result_on("a.example", ResultStatus.STARTED)
    for extractor in ("title", "htmltotext", "outlinks", "readability"):
        result_on("a.example", ResultStatus.STARTED, extractor=extractor)

    assert refused(result_on("a.example")) is False


def test_a_paused_host_holds_even_what_reads_what_was_saved() -> None:
    paused_host("a.example", for_seconds=60)

    assert refused(result_on("a.example", extractor="title")) is True


def test_a_paused_host_takes_none() -> None:
    paused_host("a.example", for_seconds=60)

    assert refused(result_on("a.example")) is True


def test_a_companion_keeps_its_claims_slot_at_the_limit() -> None:
    """The next capture of a page the actor just loaded runs where the first one ran."""
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED)
    companion = result_on("a.example")

    assert refused(companion, keeps_slot=True) is False
    assert refused(companion) is True  # the same result, claimed on its own, waits


def test_a_companion_still_waits_for_a_paused_host() -> None:
    paused_host("a.example", for_seconds=60)

    assert refused(result_on("a.example"), keeps_slot=True) is True


def test_a_host_on_trial_takes_one_at_a_time() -> None:
    paused_host("a.example", for_seconds=-1)
    first = result_on("a.example")

    assert refused(first) is False
    result_on("a.example", ResultStatus.STARTED)
    assert refused(result_on("a.example")) is True


def proven_host(name: str) -> Host:
    host = Host.objects.create(name=name)
    host.count_success()
    host.save()
    return host


def test_a_host_on_probation_takes_one_at_a_time_while_another_hosts_results_wait() -> None:
    result_on("new.example", ResultStatus.STARTED)
    result_on("other.example")
    second = result_on("new.example")

    with transaction.atomic():
        wait = host_start_wait(result=second)

    assert wait is not None
    assert seconds_from_now(wait) <= 0  # due again at once: the claim's filter holds it back
    assert refused(result_on("other.example")) is False  # the other host's first


def test_a_host_on_probation_takes_up_to_its_limit_when_nothing_else_waits() -> None:
    """One URL: its headers and wget start together on a host never seen before."""
    result_on("new.example", ResultStatus.STARTED)

    assert refused(result_on("new.example")) is False


def test_a_proven_host_takes_up_to_its_limit_while_others_wait() -> None:
    proven_host("good.example")
    result_on("good.example", ResultStatus.STARTED)
    result_on("other.example")

    assert refused(result_on("good.example")) is False


def test_a_host_that_failed_since_its_proof_is_on_probation_again() -> None:
    proven_host("flaky.example")
    fail_times("flaky.example", 1)
    result_on("flaky.example", ResultStatus.STARTED)
    result_on("other.example")

    assert refused(result_on("flaky.example")) is True


@pytest.mark.parametrize(
    "elsewhere",
    [
        "paused host",
        "full host",
        "host on trial running one",
        "held crawl",
        "waits for a step",
        "reads what was saved",
        "started",
        "not due",
    ],
)
def test_probation_counts_only_other_results_that_could_start(elsewhere: str) -> None:
    result_on("new.example", ResultStatus.STARTED)
    if elsewhere == "paused host":
        paused_host("paused.example", for_seconds=60)
        result_on("paused.example")
    elif elsewhere == "full host":
        proven_host("full.example")
        result_on("full.example", ResultStatus.STARTED)
        result_on("full.example", ResultStatus.STARTED)
        result_on("full.example")
    elif elsewhere == "host on trial running one":
        paused_host("trial.example", for_seconds=-1)
        result_on("trial.example", ResultStatus.STARTED)
        result_on("trial.example")
    elif elsewhere == "held crawl":
        held = result_on("other.example")
        Crawl.objects.filter(pk=held.snapshot.crawl_id).update(status=CrawlStatus.HELD)
    elif elsewhere == "waits for a step":
        wget = result_on("other.example", ResultStatus.STARTED, extractor="wget")
        baker.make(ArchiveResult, snapshot=wget.snapshot, extractor="media",
                   depends_on=",wget,", retry_at=timezone.now() - timedelta(seconds=1))  # fmt: skip
    elif elsewhere == "reads what was saved":
        result_on("other.example", extractor="title")
    elif elsewhere == "started":
        result_on("other.example", ResultStatus.STARTED)
    else:
        result_on("other.example", retry_at=timezone.now() + timedelta(seconds=60))
    second = result_on("new.example")

    assert second.pk in claimable_pks()  # the claim's filter offers it
    assert refused(second) is False  # and its admission takes it


def test_host_concurrency_0_has_no_probation(settings) -> None:
    settings.HOST_CONCURRENCY = 0
    result_on("new.example", ResultStatus.STARTED)
    result_on("other.example")
    second = result_on("new.example")

    assert second.pk in claimable_pks()
    assert refused(second) is False


def test_a_companion_keeps_its_claims_slot_on_probation() -> None:
    result_on("new.example", ResultStatus.STARTED)
    result_on("other.example")

    assert refused(result_on("new.example"), keeps_slot=True) is False


def test_results_that_start_at_once_never_pass_the_limit() -> None:
    # Eight results of one host start from eight threads at the same instant, each in the
    # transaction that checks its host: the host's row lock (PostgreSQL) or the database's
    # write lock (SQLite) lets exactly HOST_CONCURRENCY of them start. Each waits a moment
    # between its check and its start, so that without the lock all eight checks would come
    # before the first start.
    results = [result_on("busy.example") for _ in range(8)]
    Host.objects.create(name="busy.example")
    barrier = threading.Barrier(len(results))
    errors: list[BaseException] = []

    def start(result: ArchiveResult) -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                if host_start_wait(result=result) is None:
                    time.sleep(0.2)
                    result.start()
                    result.retry_at = timezone.now() + timedelta(seconds=LEASE)
                    result.save()
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=start, args=(result,)) for result in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert ArchiveResult.objects.filter(status=ResultStatus.STARTED).count() == 2


# --- how many may run: the claim ------------------------------------------------------------------


def claimable_pks() -> set[int]:
    return set(ArchiveResult.objects.claimable().values_list("pk", flat=True))


def test_results_of_a_host_at_its_limit_are_not_claimable() -> None:
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED)
    waiting = result_on("a.example")
    backing_off = result_on("a.example", ResultStatus.BACKOFF)
    elsewhere = result_on("b.example")

    assert claimable_pks() == {elsewhere.pk}
    assert waiting.pk not in claimable_pks() and backing_off.pk not in claimable_pks()


def test_results_that_read_what_was_saved_are_claimable_on_a_full_host() -> None:
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED)
    reader = result_on("a.example", extractor="outlinks")
    fetcher = result_on("a.example", extractor="favicon")

    assert claimable_pks() == {reader.pk}
    assert fetcher.pk not in claimable_pks()


def test_results_of_a_paused_host_are_not_claimable_until_its_pause_passes() -> None:
    paused_host("a.example", for_seconds=60)
    waiting = result_on("a.example")

    assert claimable_pks() == set()
    assert (
        ArchiveResult.objects.claimable(timezone.now() + timedelta(seconds=61))
        .filter(pk=waiting.pk)
        .exists()
    )


def test_a_host_on_trial_offers_one_result_while_none_runs() -> None:
    paused_host("a.example", for_seconds=-1)
    first = result_on("a.example")
    second = result_on("a.example")

    assert claimable_pks() == {first.pk, second.pk}
    result_on("a.example", ResultStatus.STARTED)
    assert claimable_pks() == set()


def test_a_host_on_probation_offers_no_second_result_while_another_hosts_waits() -> None:
    result_on("new.example", ResultStatus.STARTED)
    second = result_on("new.example")
    reader = result_on("new.example", extractor="title")
    elsewhere = result_on("other.example")

    assert claimable_pks() == {reader.pk, elsewhere.pk}
    paused_host("other.example", for_seconds=60)  # what waits there cannot start
    assert claimable_pks() == {second.pk, reader.pk}


def test_a_host_on_probation_offers_its_second_result_when_nothing_else_waits() -> None:
    result_on("new.example", ResultStatus.STARTED)
    second = result_on("new.example")
    result_on("other.example", ResultStatus.STARTED)

    assert claimable_pks() == {second.pk}


def test_a_proven_host_offers_up_to_its_limit_while_others_wait() -> None:
    proven_host("good.example")
    result_on("good.example", ResultStatus.STARTED)
    second = result_on("good.example")
    elsewhere = result_on("other.example")

    assert claimable_pks() == {second.pk, elsewhere.pk}


def test_hosts_on_probation_each_run_one_while_the_others_wait() -> None:
    """Three new hosts that hang: none takes a second actor while another's result waits."""
    for host in ("hang.example", "trickle.example", "reset.example"):
        result_on(host, ResultStatus.STARTED)
        result_on(host)

    assert claimable_pks() == set()


def test_a_result_whose_worker_died_is_claimable_whatever_its_host() -> None:
    paused_host("a.example", for_seconds=60)
    dead = result_on(
        "a.example", ResultStatus.STARTED, retry_at=timezone.now() - timedelta(seconds=1)
    )

    assert claimable_pks() == {dead.pk}


def test_claim_next_passes_over_a_busy_host_to_the_next() -> None:
    result_on("a.example", ResultStatus.STARTED)
    result_on("a.example", ResultStatus.STARTED)
    oldest = result_on("a.example", retry_at=timezone.now() - timedelta(seconds=60))
    newer = result_on("b.example", retry_at=timezone.now() - timedelta(seconds=1))

    claimed = claim_next(ArchiveResult, lease_seconds=lambda _r: LEASE)

    assert claimed.pk == newer.pk
    assert claim_next(ArchiveResult, lease_seconds=lambda _r: LEASE) is None
    assert ArchiveResult.objects.get(pk=oldest.pk).retry_at < timezone.now()


def claim_result() -> list[ArchiveResult]:
    """Claim as an archive result actor does: the record, admitted, and its companions."""
    kind = work_types()["archiveresult"]
    return claim_next_with_companions(
        ArchiveResult,
        lease_seconds=lambda _r: LEASE,
        lease_fields=kind.lease_fields,
        related=kind.related,
        companions=kind.companions,
        admit=kind.admit,
    )


def test_a_claim_starts_the_result_it_takes_and_the_next_claim_counts_it() -> None:
    first = result_on("a.example", retry_at=timezone.now() - timedelta(seconds=3))
    second = result_on("a.example", retry_at=timezone.now() - timedelta(seconds=2))
    result_on("a.example", retry_at=timezone.now() - timedelta(seconds=1))

    (claimed,) = claim_result()
    assert claimed.pk == first.pk and claimed.started_by_claim
    stored = ArchiveResult.objects.get(pk=first.pk)
    assert (stored.status, stored.attempts) == (ResultStatus.STARTED, 1)
    assert stored.retry_at == claimed.retry_at > timezone.now()  # under the claim's lease
    assert [r.pk for r in claim_result()] == [second.pk]
    assert claim_result() == []  # two started: the host takes no third


def test_a_claim_puts_back_what_the_host_refuses_and_takes_the_next_candidate() -> None:
    """A crawl's own lower limit is one the claim's filter does not know: only the admission
    in the claim's transaction sees it, and the claim moves on to another host."""
    proven_host("a.example")  # not on probation: the crawl's limit alone refuses
    snapshot = snapshot_on("a.example")
    Crawl.objects.filter(pk=snapshot.crawl_id).update(host_concurrency=1)
    baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor="wget",
        status=ResultStatus.STARTED,
        retry_at=timezone.now() + timedelta(seconds=LEASE),
    )
    refused = baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor="headers",
        retry_at=timezone.now() - timedelta(seconds=60),
    )
    elsewhere = result_on("b.example", retry_at=timezone.now() - timedelta(seconds=1))

    (claimed,) = claim_result()

    assert claimed.pk == elsewhere.pk
    put_back = ArchiveResult.objects.get(pk=refused.pk)
    assert (put_back.status, put_back.attempts) == (ResultStatus.QUEUED, 0)
    assert 0 < seconds_from_now(put_back.retry_at) <= CRAWL_LIMIT_RECHECK.total_seconds()


def test_a_claim_passes_over_a_host_on_probation_to_the_result_that_waits_elsewhere() -> None:
    """More of a new host's results than a claim reads candidates come first in claim order:
    the claim still reaches the other host's, and puts none of them back."""
    result_on("new.example", ResultStatus.STARTED)
    earlier = timezone.now() - timedelta(seconds=60)
    waiting = [result_on("new.example", retry_at=earlier) for _ in range(6)]
    elsewhere = result_on("other.example")

    (claimed,) = claim_result()

    assert claimed.pk == elsewhere.pk
    untouched = ArchiveResult.objects.filter(pk__in=[w.pk for w in waiting], retry_at=earlier)
    assert untouched.count() == len(waiting)  # none claimed and put back
    assert claim_result()[0].snapshot.host == "new.example"  # nothing else waits now


def test_the_proof_of_a_host_wakes_the_idle_result_actors(settings, tmp_path) -> None:
    settings.DATA_DIR = tmp_path  # no other listener hears the ping
    Host.objects.create(name="new.example")
    succeeded = ExtractorOutput(outcome=Outcome.SUCCEEDED)

    with Listener("archiveresult") as idle:
        host_note_outcome(host="new.example", extractor="wget", output=succeeded)
        woken = idle.drain()
        host_note_outcome(host="new.example", extractor="headers", output=succeeded)
        again = idle.drain()

    assert woken.pings == {(DUE, "archiveresult")}
    assert again.timed_out  # proven already: nothing new may start


def test_claims_that_come_at_once_take_no_more_than_the_host_takes() -> None:
    # Eight actors claim at the same instant from eight threads, results of one host with
    # room for two. Each claim starts what it takes in its own transaction: exactly two
    # claims stand, both started, and none takes a result it would then have to hand back.
    for _ in range(8):
        result_on("busy.example")
    barrier = threading.Barrier(8)
    claims: list[list[ArchiveResult]] = []
    errors: list[BaseException] = []

    def claim() -> None:
        try:
            barrier.wait()
            claims.append(claim_result())
        except BaseException as error:  # reported below, not lost in the thread
            errors.append(error)
        finally:
            close_old_connections()
            connection.close()

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    taken = [result.pk for claimed in claims for result in claimed]
    started = ArchiveResult.objects.filter(status=ResultStatus.STARTED)
    assert len(taken) == 2 and set(taken) == set(started.values_list("pk", flat=True))


def test_a_queued_snapshot_of_a_paused_host_waits_and_others_start() -> None:
    paused_host("a.example", for_seconds=60)
    waiting = snapshot_on("a.example", status=SnapshotStatus.QUEUED)
    other = snapshot_on("b.example", status=SnapshotStatus.QUEUED)

    assert list(Snapshot.objects.claimable().values_list("pk", flat=True)) == [other.pk]
    later = timezone.now() + timedelta(seconds=61)
    assert Snapshot.objects.claimable(later).filter(pk=waiting.pk).exists()


def test_started_snapshots_of_a_paused_host_leave_the_window_to_others(settings) -> None:
    settings.MAX_STARTED_SNAPSHOTS = 2
    paused_host("a.example", for_seconds=60)
    for _ in range(2):
        snapshot_on("a.example", retry_at=timezone.now() + timedelta(seconds=5))
    queued = snapshot_on("b.example", status=SnapshotStatus.QUEUED)

    assert Snapshot.objects.claimable().filter(pk=queued.pk).exists()
    snapshot_on("c.example", retry_at=timezone.now() + timedelta(seconds=5))
    snapshot_on("c.example", retry_at=timezone.now() + timedelta(seconds=5))
    assert not Snapshot.objects.claimable().filter(pk=queued.pk).exists()


# --- where a person sees it -----------------------------------------------------------------------


def status_output(*args: str) -> str:
    out = StringIO()
    call_command("status", *args, stdout=out)
    return out.getvalue()


def test_status_says_which_hosts_are_paused_until_when_and_why() -> None:
    host = paused_host("hang.example:8080", for_seconds=600)
    paused_host("trial.example", for_seconds=-1)
    Host.objects.create(name="fine.example")

    text = " ".join(status_output().split())

    until = timezone.localtime(host.paused_until)
    assert (
        f"Host hang.example:8080: paused until {until:%Y-%m-%d %H:%M:%S %Z} "
        f"(3 connection failures: headers: {HANG})."
    ) in text
    assert "Host trial.example: on trial since " in text
    assert "fine.example" not in text


def test_status_says_nothing_of_hosts_when_none_is_paused() -> None:
    Host.objects.create(name="fine.example")

    assert "host" not in status_output().lower()


def test_status_json_lists_the_paused_hosts() -> None:
    host = paused_host("hang.example:8080", for_seconds=600)

    document = json.loads(status_output("--json"))

    assert document["paused_hosts"] == [
        {
            "host": "hang.example:8080",
            "on_trial": False,
            "paused_until": host.paused_until.isoformat(),
            "failures": 3,
            "error": f"headers: {HANG}",
        }
    ]


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com"))
    return client


def test_the_admin_lists_hosts_with_how_they_stand(admin_client: Client) -> None:
    paused_host("hang.example:8080", for_seconds=600)
    proven_host("fine.example")
    Host.objects.create(name="new.example")

    html = admin_client.get("/admin/core/host/").content.decode()

    assert "hang.example:8080" in html and "fine.example" in html
    assert "paused until " in html
    assert f"(3 connection failures: headers: {HANG})" in html
    assert "ok, on probation (no result has succeeded yet)" in html


def test_a_paused_host_can_be_resumed_from_its_admin_page(admin_client: Client) -> None:
    host = paused_host("hang.example:8080", for_seconds=600)
    page = f"/admin/core/host/{host.pk}/change/"

    assert 'name="_fsm_transition_to" value="resume"' in admin_client.get(page).content.decode()
    response = admin_client.post(page, {"_fsm_transition_to": "resume"}, follow=True)

    assert [str(m) for m in response.context["messages"]] == [
        "Host hang.example:8080 resumed: its results start again."
    ]
    assert Host.objects.get(pk=host.pk).status == HostStatus.OK


def test_add_wait_says_which_host_of_the_crawl_is_paused() -> None:
    host = paused_host("hang.example:8080", for_seconds=600)
    snapshot = snapshot_on("hang.example:8080")
    out = StringIO()

    CrawlProgress(snapshot.crawl, Console(file=out, force_terminal=False, width=200)).update()

    until = timezone.localtime(host.paused_until)
    assert f"host hang.example:8080 paused until {until:%H:%M:%S}" in out.getvalue()


def test_add_wait_says_nothing_of_paused_hosts_the_crawl_does_not_wait_for() -> None:
    paused_host("hang.example:8080", for_seconds=600)
    snapshot = snapshot_on("fine.example")
    out = StringIO()

    CrawlProgress(snapshot.crawl, Console(file=out, force_terminal=False, width=200)).update()

    assert "paused" not in out.getvalue()


# --- the upgrade ----------------------------------------------------------------------------------


def test_the_upgrade_leaves_hosts_in_good_standing_out_of_probation() -> None:
    executor = MigrationExecutor(connection)
    before, after = [("core", "0016_host_robots_crawl_delay")], [("core", "0017_host_proven_at")]
    executor.migrate(before)
    old_host = executor.loader.project_state(before).apps.get_model("core", "Host")
    old_host.objects.create(name="good.example")
    old_host.objects.create(name="failing.example", failures=1)
    old_host.objects.create(name="paused.example", status=HostStatus.PAUSED, failures=3)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # later migrations too, if any

    proven = dict(Host.objects.values_list("name", "proven_at"))
    assert proven["good.example"] is not None
    assert proven["failing.example"] is None and proven["paused.example"] is None
