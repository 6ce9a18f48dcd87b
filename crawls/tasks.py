"""Side work on huey for crawls (DESIGN.md §5): scheduled crawls, and notifications when a
crawl seals.

The schedules are looked at every minute: a crawl schedule due by then runs once, including
one whose runs were missed while the consumer was down (core/services/schedules.py).

Tasks take ids and plain data, never model instances. A webhook that is down is tried again
with the same backoff as extractors (orchestrator/retries.py), honouring Retry-After, up to
NOTIFY_MAX_ATTEMPTS deliveries; every attempt is logged.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django_huey import db_periodic_task, db_task
from huey import crontab

from core.extractors.errors import Outcome
from core.services.schedules import schedules_run_due
from crawls.models import Crawl
from crawls.notifications import (
    crawl_payload,
    deliver_webhook,
    emails_for,
    send_report_email,
    webhooks_for,
)
from orchestrator.retries import backoff_delay, exhausted

logger = logging.getLogger(__name__)


@db_task()
def crawl_notify(crawl_id: int) -> None:
    """Send crawl ``crawl_id``'s report to its webhooks (one task each) and by email."""
    crawl = Crawl.objects.prefetch_related("tags").filter(pk=crawl_id).first()
    if crawl is None:
        return  # removed since it sealed
    payload = crawl_payload(crawl)
    for url in webhooks_for(crawl):
        webhook_send(url, payload, 1)
    addresses = emails_for(crawl)
    if addresses:
        try:
            send_report_email(crawl, addresses)
        except OSError as error:  # smtplib's errors are OSErrors
            logger.error("crawl %s: report email to %s failed: %s", crawl_id, addresses, error)
        else:
            logger.info("crawl %s: report emailed to %s", crawl_id, ", ".join(addresses))


@db_task()
def webhook_send(url: str, payload: dict, attempt: int) -> None:
    """POST ``payload`` to ``url``; after a temporary failure, schedule attempt + 1."""
    delivery = deliver_webhook(url, payload, timeout=settings.NOTIFY_TIMEOUT)
    crawl_id = payload["crawl"]["id"]
    if delivery.outcome is Outcome.SUCCEEDED:
        logger.info("crawl %s: webhook %s: %s", crawl_id, url, delivery.detail)
        return
    temporary = delivery.outcome is Outcome.TEMPORARY
    if temporary and not exhausted(attempt, settings.NOTIFY_MAX_ATTEMPTS):
        delay = backoff_delay(attempt, delivery.retry_after)
        logger.warning(
            "crawl %s: webhook %s: %s; attempt %d of %d again in %.1f s",
            crawl_id, url, delivery.detail, attempt + 1, settings.NOTIFY_MAX_ATTEMPTS, delay,
        )  # fmt: skip
        webhook_send.schedule((url, payload, attempt + 1), delay=delay)
        return
    logger.error(
        "crawl %s: webhook %s given up after %d attempts: %s", crawl_id, url, attempt,
        delivery.detail,
    )  # fmt: skip


@db_periodic_task(crontab())
def schedules_run() -> int:
    """Queue a crawl for every crawl schedule due now; return how many."""
    crawls = schedules_run_due()
    if crawls:
        logger.info("schedules: %d crawl(s) queued", len(crawls))
    return len(crawls)
