"""Receivers of what crawls announce (crawls/signals.py), connected when the app is ready.

They live apart from crawls/tasks.py so that every process (the orchestrator, each actor, every
management command) does not import huey, and with it the Redis and PostgreSQL clients, only to
connect them: the tasks are imported when a sealed crawl first asks to be notified.
"""

from __future__ import annotations

from django.dispatch import receiver

from crawls.models import Crawl
from crawls.signals import notification_due


@receiver(notification_due, dispatch_uid="crawls.receivers.queue_notification")
def queue_notification(sender, *, crawl: Crawl, **kwargs) -> None:
    """Queue ``crawl_notify`` for a crawl that sealed and asks to be notified (a queue that
    cannot be reached raises; core/services/crawls.py logs it)."""
    from crawls.tasks import crawl_notify  # see the module's docstring

    crawl_notify(crawl.pk)
