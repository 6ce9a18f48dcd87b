"""Hosts: the servers pages are fetched from, each with a circuit breaker (issue 19, part 4).

A host is a URL's ``host[:port]`` as its normalized form writes it (crawls/seeds.py: the port
only when it is not the scheme's default): two servers on one machine are two hosts, while
``http://`` and ``https://`` of one name are one. ``Snapshot.host`` holds it for every snapshot;
a Host row exists once a result of that host has started (it also serialises the starts of one
host's results, core/services/hosts.py).

The breaker: each archive result whose fetch of the page could not connect, was reset or timed
out (``ExtractorOutput.unreachable``) counts one failure; HOST_PAUSE_AFTER_FAILURES of them in a
row pause the host for the retry rule's backoff (orchestrator/retries.py), longer with each
further failure. While paused none of its results starts; once the pause has passed the host is
on trial: one result at a time is let through, and the first success resumes it.

Probation: a host no result of which has succeeded yet, or since its last connection failure
(``proven_at`` empty), runs one result at a time while results of other hosts wait to start. A
server that hangs is only known once its first fetch times out: without probation the first
pages of three such hosts would hold two result actors each, every actor there is, for a whole
timeout, and the good pages would wait. A proven host runs up to HOST_CONCURRENCY; so does one
on probation when nothing else waits (one URL's headers and wget start together).
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.utils import timezone
from django_fsm import FSMField, transition

from core.choices import HostStatus


class HostQuerySet(models.QuerySet):
    def paused(self, now: datetime | None = None) -> HostQuerySet:
        """Hosts whose pause has not passed at ``now`` (default: the current time)."""
        return self.filter(status=HostStatus.PAUSED, paused_until__gt=now or timezone.now())

    def on_trial(self, now: datetime | None = None) -> HostQuerySet:
        """Paused hosts whose pause has passed at ``now``: one result at a time may run."""
        return self.filter(status=HostStatus.PAUSED, paused_until__lte=now or timezone.now())

    def proven(self) -> HostQuerySet:
        """Hosts a result of which has succeeded since their last connection failure (or that
        an operator resumed): out of probation (the module's docstring)."""
        return self.filter(proven_at__isnull=False)


class Host(models.Model):
    """One host pages are fetched from (``host[:port]``) and the state of its circuit breaker.

    ``ok → paused`` after HOST_PAUSE_AFTER_FAILURES connection failures in a row (``pause``;
    a failure while paused pauses it again, for longer); ``paused → ok`` on the first success
    (``resume``); ``ok | paused → paused`` when the server answers 429 with Retry-After
    (``slow_down``). The pause's end is ``paused_until``; after it the host is on trial. A
    connection failure ends a host's proof (``proven_at``), the next success gives it again.
    """

    name = models.CharField(
        max_length=2048, unique=True, help_text="host[:port], as the normalized URL writes it."
    )
    status = FSMField(default=HostStatus.OK, choices=HostStatus.choices, protected=True)
    failures = models.PositiveIntegerField(
        default=0, help_text="Connection failures in a row (timed out, refused, reset, DNS)."
    )
    paused_until = models.DateTimeField(
        null=True, blank=True, help_text="When a paused host's next result may start."
    )
    error = models.TextField(blank=True, help_text="The last connection failure, and whose.")
    robots_txt = models.TextField(
        blank=True, help_text="Its robots.txt as last read, for crawls that obey it."
    )
    robots_unreachable = models.CharField(
        max_length=300, blank=True, help_text="Why its robots.txt could not be read, if so."
    )
    robots_crawl_delay = models.FloatField(
        null=True,
        blank=True,
        help_text="Seconds its robots.txt asks between requests (Crawl-delay, at most "
        "ROBOTS_CRAWL_DELAY_CAP); crawls that obey robots.txt wait at least that long.",
    )
    robots_fetched_at = models.DateTimeField(
        null=True, blank=True, help_text="When its robots.txt was last read."
    )
    proven_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the host was proven: its first result that succeeded since its last "
        "connection failure, or an operator resumed it (empty: on probation, one result at a "
        "time while other hosts' results wait).",
    )
    last_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When a result last started fetching from it."
    )
    modified_at = models.DateTimeField(auto_now=True)

    objects = HostQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def describe(self, now: datetime | None = None) -> str:
        """Say how the host stands, for ``manage.py status`` and the admin, e.g.
        ``host example.com: paused until 2025-06-01 10:00:05 UTC (3 connection failures: …)``
        or ``host example.com: ok, on probation (no result has succeeded yet)``."""
        if self.status == HostStatus.OK:
            if self.failures:
                return f"host {self.name}: ok ({self._failures()}: {self.error})"
            probation = "" if self.proven_at else ", on probation (no result has succeeded yet)"
            return f"host {self.name}: ok{probation}"
        until = f"{timezone.localtime(self.paused_until):%Y-%m-%d %H:%M:%S %Z}"
        if self.paused_until <= (now or timezone.now()):
            return f"host {self.name}: on trial since {until} ({self._failures()}: {self.error})"
        return f"host {self.name}: paused until {until} ({self._failures()}: {self.error})"

    def _failures(self) -> str:
        return f"{self.failures} connection failure{'s' if self.failures != 1 else ''}"

    # --- transitions ----------------------------------------------------------------------------

    @transition(field=status, source=HostStatus.OK, target=HostStatus.OK)
    def count_failure(self, *, error: str) -> None:
        """One more connection failure, not yet enough to pause the host."""
        self.failures += 1
        self.error = error[:2000]
        self.proven_at = None

    @transition(field=status, source=[HostStatus.OK, HostStatus.PAUSED], target=HostStatus.PAUSED)
    def pause(self, *, error: str, delay: float) -> None:
        """One more connection failure, enough to pause the host: start none of its results
        for ``delay`` seconds."""
        self.failures += 1
        self.error = error[:2000]
        self.proven_at = None
        self.paused_until = timezone.now() + timezone.timedelta(seconds=delay)

    @transition(field=status, source=[HostStatus.OK, HostStatus.PAUSED], target=HostStatus.PAUSED)
    def slow_down(self, *, error: str, delay: float) -> None:
        """The server asked to be left alone for ``delay`` seconds (a 429 with Retry-After,
        RFC 6585 §4, RFC 9110 §10.2.3): start none of its results until then
        (a longer pause already running is kept), then one at a time. Not a failure."""
        self.error = error[:2000]
        until = timezone.now() + timezone.timedelta(seconds=delay)
        if self.paused_until is None or self.paused_until < until:
            self.paused_until = until

    @transition(field=status, source=HostStatus.OK, target=HostStatus.OK)
    def count_success(self) -> None:
        """A result of the host succeeded: its failures are no longer in a row, and it is
        proven (``proven_at``: kept from its first success since a failure)."""
        self.failures = 0
        self.error = ""
        self.proven_at = self.proven_at or timezone.now()

    @transition(field=status, source=HostStatus.PAUSED, target=HostStatus.OK)
    def resume(self) -> None:
        """A result of the host succeeded (or an operator resumed it): run its results again,
        as many at once as any proven host."""
        self.failures = 0
        self.error = ""
        self.paused_until = None
        self.proven_at = timezone.now()
