"""robots.txt for crawls that obey it (``add --robots``): fetch a host's rules and tell
whether a URL may be fetched (RFC 9309, read by Protego).

The file is fetched with curl like every page (``core.extractors.fetch``: the address policy,
USER_AGENT, redirects followed). RFC 9309 decides what its absence means: a 4xx answer
("unavailable", §2.3.1.3) lets the crawler fetch everything; a 5xx answer or a server that
cannot be reached ("unreachable", §2.3.1.4) means complete disallow, until it can be read.
Keeping the rules is the caller's (core/services/scope.py keeps them on the Host row, so that
every actor asks the server once, and asks again sooner when it was unreachable).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from protego import Protego

from core.extractors.errors import Outcome
from core.extractors.fetch import fetch

ROBOTS_TIMEOUT_SECONDS = 15
ROBOTS_MAX_BYTES = 500 * 1024  # RFC 9309 §2.5: parse at least 500 KiB
# Crawl-delay is no part of RFC 9309 but widely written; a site asking for more than five
# minutes between requests would hold a crawl for days: obeyed up to this (Heritrix's
# respectCrawlDelayUpToSeconds default).
ROBOTS_CRAWL_DELAY_CAP = 300.0


@dataclass
class RobotsRules:
    """A host's rules: the text of its robots.txt ("" when it has none to obey) and, when the
    file could not be read, ``unreachable`` saying why (then everything is disallowed)."""

    text: str = ""
    unreachable: str = ""
    _parser: Protego | None = field(default=None, repr=False, compare=False)

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be fetched, in words, or None when it may."""
        if self.unreachable:
            return f"robots.txt unreachable ({self.unreachable}): all disallowed"
        if not self.text.strip():
            return None
        if self._parsed().can_fetch(url, settings.USER_AGENT):
            return None
        return "disallowed by robots.txt"

    def crawl_delay(self) -> float | None:
        """Seconds the file asks between two requests from USER_AGENT (its group's
        ``Crawl-delay``, at most ROBOTS_CRAWL_DELAY_CAP), or None when it asks none."""
        if self.unreachable or not self.text.strip():
            return None
        delay = self._parsed().crawl_delay(settings.USER_AGENT)
        return None if not delay or delay < 0 else min(float(delay), ROBOTS_CRAWL_DELAY_CAP)

    def _parsed(self) -> Protego:
        if self._parser is None:
            self._parser = Protego.parse(self.text)
        return self._parser


def fetch_robots(origin: str) -> RobotsRules:
    """GET ``origin``/robots.txt (``origin``: ``scheme://host[:port]``) within
    ROBOTS_TIMEOUT_SECONDS and return its rules (the first ROBOTS_MAX_BYTES of it). Raises
    LookupError if curl is not installed."""
    with tempfile.TemporaryDirectory(prefix="vellum-robots-") as folder:
        body = Path(folder) / "robots.txt"
        result = fetch(
            f"{origin}/robots.txt",
            body_path=body,
            headers_path=None,
            log_path=Path(folder) / "curl.log",
            timeout=ROBOTS_TIMEOUT_SECONDS,
        )
        status = result.http_status
        if result.outcome is Outcome.SUCCEEDED:
            return RobotsRules(body.read_bytes()[:ROBOTS_MAX_BYTES].decode("utf-8", "replace"))
        if status is not None and 400 <= status < 500:
            return RobotsRules()  # unavailable: no rules
        return RobotsRules(unreachable=result.error or "no answer")
