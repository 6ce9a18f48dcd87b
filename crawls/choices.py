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
