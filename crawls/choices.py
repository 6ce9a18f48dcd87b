"""State vocabulary of a Crawl (DESIGN.md §2)."""

from django.db import models


class CrawlStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    STARTED = "started", "Started"
    SEALED = "sealed", "Sealed"
    HELD = "held", "Held"

    @classmethod
    def active(cls) -> tuple[str, ...]:
        """States in which actors tick a crawl (held is paused, not active)."""
        return (cls.QUEUED, cls.STARTED)


class StepBehaviour(models.TextChoices):
    """What a failure of one step of a profile means for the rest (crawls/profiles.py)."""

    BLOCKING = "blocking", "Blocking: a failure stops the remaining steps and fails the snapshot"
    NONBLOCKING = "nonblocking", "Nonblocking: a failure is recorded, the others go on"
    FINALLY = "finally", "Finally: runs even after a blocking step failed"


class CrawlScope(models.TextChoices):
    """Which links of a page a crawl with depth follows (crawls/scope.py; Browsertrix Crawler's
    ``scopeType`` names)."""

    PAGE = "page", "Page: the seeds only, no links followed"
    PREFIX = "prefix", "Prefix: links under a seed's directory (its URL up to the last /)"
    HOST = "host", "Host: links to the same host[:port] as the page they are on"
    DOMAIN = "domain", "Domain: links to the seed's host name or any of its subdomains"
    ANY = "any", "Any: links to any host"


class SkipReason(models.TextChoices):
    """Why a URL a crawl met was not archived (crawls.models.CrawlSkip)."""

    SCOPE = "scope", "Out of the crawl's scope"
    EXCLUDED = "excluded", "Matches an exclude pattern"
    ROBOTS = "robots", "Disallowed by robots.txt"
    MAX_PAGES = "max-pages", "The crawl reached its page limit"
    MAX_BYTES = "max-bytes", "The crawl reached its byte limit"
