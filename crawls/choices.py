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
