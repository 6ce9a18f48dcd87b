"""Workflows over hosts (core/models/hosts.py): who may start a result on a host, what a
result's outcome tells its host's circuit breaker, and resuming a paused host by hand.

Every change to a Host row is a transition made under the row's lock: on PostgreSQL ``SELECT
... FOR UPDATE``; on SQLite every transaction takes the database's write lock when it begins
(``IMMEDIATE``, archive/settings.py), which serialises them as well.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from core.choices import HostStatus
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.extractors.registry import READS_SAVED
from core.models import ArchiveResult, Host
from orchestrator.prepared import Statement, UpdateStatement
from orchestrator.retries import backoff_delay
from orchestrator.wakeups import notify_due

logger = logging.getLogger(__name__)

TOO_MANY_REQUESTS = 429  # RFC 6585 §4
CRAWL_LIMIT_RECHECK = timedelta(seconds=1)


def host_start_wait(*, result: ArchiveResult, keeps_slot: bool = False) -> datetime | None:
    """Return None when ``result`` may start now on its snapshot's host, else when to try
    again: now when the host is paused, or on trial (after a pause) with a result running, or
    has as many results running as the crawl allows (HOST_CONCURRENCY, 0: no limit; a second
    later, CRAWL_LIMIT_RECHECK, when the crawl's own lower ``host_concurrency`` is the limit);
    now when the host is on probation (none of its results has succeeded yet, or since its last
    connection failure: core/models/hosts.py) with a result running while a result of another
    host waits to start (``ArchiveResultQuerySet.waiting_elsewhere``; with HOST_CONCURRENCY 0
    there is no probation either);
    the moment its crawl's ``host_delay_seconds`` (or, for a crawl that obeys robots.txt, the
    host's Crawl-delay when longer) after the host's last start has passed, when that is later.

    Running means started and under a live lease; ``result`` itself is not counted, nor any
    result whose extractor ``reads_saved`` (wget's WARC, the DOM: it asks the host nothing),
    and such a result is refused only by a pause. With ``keeps_slot`` (a companion run right
    after its claim's first result, in the same actor: core/services/results.py) only a pause
    refuses it too: it takes the place the first one held, and refusing it would load the page
    again in another actor. Another actor that started in the moment between the two can then
    make the host's count one more than the limit, until one of them ends.

    Call it in the transaction that starts ``result`` (the one that claims it: result_admit in
    core/services/results.py): it locks the host's row (creating it on first use), so that of
    two results of one host that start at once, the second sees the first one started; a
    result allowed to start is noted as the host's last start. This makes the limit exact;
    the claim's filter (``ArchiveResultQuerySet.held_back_hosts``) only spares actors claiming
    what they could not start.
    """
    host = _locked_host(result.snapshot.host)
    now = timezone.now()
    crawl = result.snapshot.crawl
    if host.status == HostStatus.PAUSED:
        if host.paused_until > now:
            return now
        limit = 1
    else:
        limit = crawl.host_concurrency or settings.HOST_CONCURRENCY
    if keeps_slot or result.extractor in READS_SAVED:
        return None
    delay = _start_delay(crawl, host)
    if delay and host.last_started_at is not None:
        free_at = host.last_started_at + timedelta(seconds=delay)
        if free_at > now:
            return free_at
    if limit:
        running = _running_on(host.name, now, result.pk)
        if running >= limit:
            return now + _recheck_after(crawl)
        if _on_probation(host, running) and _others_waiting(host.name, now):
            return now  # the claim's filter holds it back meanwhile, as a full host's
    HOST_STARTED.run(host.pk, now)
    return None


# Every start of a result runs the first two statements below and the last, and every success
# the third; the fourth, only a start on a host on probation with a result running already.
# Compiled once per process (orchestrator/prepared.py), the first two take host_start_wait from
# 1.2 ms to 0.4 ms (SQLite, its transaction and the update of the host's last start included).
# The orchestrator compiles them before it forks the result actors that run them.


def _host_by_name(wanted: str) -> models.QuerySet:
    return Host.objects.select_for_update().filter(name=wanted)


def _results_running_on(name: str, at: datetime, pk: int) -> models.QuerySet:
    return ArchiveResult.objects.running(at).filter(snapshot__host=name).exclude(pk=pk)


def _host_with_breaker(wanted: str) -> models.QuerySet:
    return Host.objects.filter(name=wanted).exclude(
        status=HostStatus.OK, failures=0, proven_at__isnull=False
    )


def _waiting_elsewhere(name: str, at: datetime) -> models.QuerySet:
    return ArchiveResult.objects.waiting_elsewhere(at).exclude(snapshot__host=name)


RESULT_ACTORS = ("archiveresult",)
HOST_BY_NAME = Statement("host by name, locked", _host_by_name, (str,), actors=RESULT_ACTORS)
RUNNING_ON = Statement(
    "results running on a host", _results_running_on, (str, datetime, int), actors=RESULT_ACTORS
)
BREAKER_TO_CLEAR = Statement(
    "host with a breaker to clear", _host_with_breaker, (str,), actors=RESULT_ACTORS
)
WAITING_ELSEWHERE = Statement(
    "results of other hosts that could start",
    _waiting_elsewhere,
    (str, datetime),
    actors=RESULT_ACTORS,
)
HOST_STARTED = UpdateStatement(
    "a host's last start",
    lambda pk, at: (Host.objects.filter(pk=pk), {"last_started_at": at}),
    (int, datetime),
    actors=RESULT_ACTORS,
)


def _locked_host(name: str) -> Host:
    """The Host row ``name``, locked (``FOR UPDATE``) until the transaction ends; made on
    first use."""
    found = HOST_BY_NAME.records(name)
    if found:
        return found[0]
    return Host.objects.select_for_update().get_or_create(name=name)[0]


def _running_on(host: str, now: datetime, result_pk: int) -> int:
    """How many results that ask ``host`` for pages run at ``now``, the one ``result_pk``
    aside: started, under a live lease, of an extractor that does not read a saved page."""
    return RUNNING_ON.count(host, now, result_pk)


def _on_probation(host: Host, running: int) -> bool:
    """Whether ``host`` (not paused) is on probation with ``running`` results running: one
    at least, none of its results succeeded since its last failure, HOST_CONCURRENCY set
    (as the claim's filter, ``ArchiveResultQuerySet.held_back_hosts``, has it)."""
    return bool(running and settings.HOST_CONCURRENCY and host.proven_at is None)


def _others_waiting(host: str, now: datetime) -> bool:
    """Whether a result of a host other than ``host`` waits to start at ``now``
    (``ArchiveResultQuerySet.waiting_elsewhere``, as the claim's filter asks it)."""
    return WAITING_ELSEWHERE.exists(host, now)


def _breaker_to_clear(name: str) -> bool:
    """Whether host ``name`` is paused, counts failures or is on probation (compiled once, as
    above)."""
    return BREAKER_TO_CLEAR.exists(name)


def _start_delay(crawl, host: Host) -> float:
    """Seconds between two starts on ``host`` for ``crawl``: its ``host_delay_seconds``, or
    the Crawl-delay of the host's robots.txt when the crawl obeys robots.txt and that is
    longer (0: none)."""
    delay = crawl.host_delay_seconds or 0.0
    if crawl.robots and host.robots_crawl_delay:
        delay = max(delay, host.robots_crawl_delay)
    return delay


def _recheck_after(crawl) -> timedelta:
    """How long a result refused for a full host waits: none when the claim's filter holds
    such results back by itself (HOST_CONCURRENCY); CRAWL_LIMIT_RECHECK when its crawl's own
    lower limit refused it, which that filter does not know (without the wait, idle actors
    would claim and hand it back over and over while the host is busy)."""
    lower = crawl.host_concurrency and (
        not settings.HOST_CONCURRENCY or crawl.host_concurrency < settings.HOST_CONCURRENCY
    )
    return CRAWL_LIMIT_RECHECK if lower else timedelta(0)


def host_note_outcome(*, host: str, extractor: str, output: ExtractorOutput) -> Host | None:
    """Tell ``host``'s circuit breaker how a run of ``extractor`` ended (``output``).

    A run that could not reach the page (``output.unreachable``) counts one failure;
    HOST_PAUSE_AFTER_FAILURES of them in a row pause the host for ``backoff_delay(n)``
    seconds, where n counts the failures from the one that reached the limit (1, 2, ...), and
    each further one pauses it again, for longer. A 429 Too Many Requests with Retry-After
    (RFC 6585 §4) pauses the whole host for that many seconds (``Host.slow_down``, at most
    BACKOFF_CAP), not only the result's URL. A success resumes a paused host, clears the
    count and ends the host's probation (``proven_at``; written once, by its first success
    since a failure, and the idle result actors are woken: what waited may start now). Any
    other outcome (the server answered with an error, the extractor did not
    apply) leaves the breaker as it is. Return the host's row when it changed, else None.
    """
    if output.unreachable:
        return _host_count_failure(host, f"{extractor}: {output.error}")
    if output.http_status == TOO_MANY_REQUESTS and output.retry_after:
        return _host_slow_down(host, f"{extractor}: {output.error}", output.retry_after)
    if output.outcome is Outcome.SUCCEEDED:
        return _host_count_success(host)
    return None


def _host_count_failure(name: str, error: str) -> Host:
    with transaction.atomic():
        host, _created = Host.objects.select_for_update().get_or_create(name=name)
        failures = host.failures + 1
        if failures >= settings.HOST_PAUSE_AFTER_FAILURES:
            beyond = failures - settings.HOST_PAUSE_AFTER_FAILURES + 1
            host.pause(error=error, delay=backoff_delay(beyond))
        else:
            host.count_failure(error=error)
        host.save()
    if host.status == HostStatus.PAUSED:
        logger.warning("%s", host.describe())
    return host


def _host_slow_down(name: str, error: str, delay: float) -> Host:
    with transaction.atomic():
        host, _created = Host.objects.select_for_update().get_or_create(name=name)
        host.slow_down(error=error, delay=min(delay, settings.BACKOFF_CAP))
        host.save()
    logger.warning("%s (Retry-After %g s)", host.describe(), delay)
    return host


def _host_count_success(name: str) -> Host | None:
    # Most successes are on hosts with nothing to clear: one indexed read, no write.
    if not _breaker_to_clear(name):
        return None
    with transaction.atomic():
        host = Host.objects.select_for_update().get(name=name)
        was_proven = host.proven_at is not None
        if host.status == HostStatus.PAUSED:
            host.resume()
            logger.info("host %s resumed: a result succeeded", name)
        else:
            host.count_success()
        host.save()
        if not was_proven:
            # Its proof may let results start that the claims held back (probation): no end
            # of a result wakes the idle actors, so they are told.
            notify_due("archiveresult")
    return host


def host_resume(*, host: Host) -> Host:
    """Resume a paused ``host`` now (an operator's request): its results start again and its
    failures are forgotten. Raise TransitionNotAllowed when it is not paused."""
    with transaction.atomic():
        fresh = Host.objects.select_for_update().get(pk=host.pk)
        fresh.resume()
        fresh.save()
    logger.info("host %s resumed by hand", fresh.name)
    return fresh


def hosts_paused(now: datetime | None = None) -> list[Host]:
    """Paused hosts, those still waiting first (soonest resumed first), then those on trial."""
    now = now or timezone.now()
    waiting = list(Host.objects.paused(now).order_by("paused_until", "name"))
    return waiting + list(Host.objects.on_trial(now).order_by("paused_until", "name"))
