"""Crawl schedules: create one, run the due ones as new crawls (DESIGN.md §5).

A periodic huey task (crawls/tasks.py) calls ``schedules_run_due`` every minute. Each run moves
the schedule's ``next_run_at`` with one compare-and-set before the crawl is created, in the same
transaction, so two consumers (or two machines) never run a schedule twice, and a crash between
the two leaves neither.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from core.services.crawls import (
    DEFAULT_OPTIONS,
    CrawlOptions,
    check_crawl_options,
    crawl_create,
)
from crawls.inputs import read_input
from crawls.models import POLITENESS_FIELDS, Crawl, CrawlSchedule, cron_next
from crawls.seeds import InputError, decode_input

logger = logging.getLogger(__name__)


def schedule_create(
    *,
    cron: str,
    data: bytes,
    source_name: str,
    parser: str = "auto",
    strict: bool = False,
    options: CrawlOptions = DEFAULT_OPTIONS,
    created_by=None,
) -> CrawlSchedule:
    """Create a schedule that crawls ``data`` (read as crawl_create reads it) with ``options``
    whenever ``cron`` comes round; its first run is the next such time.

    Raises InputError (nothing saved) for an invalid cron expression and whatever crawl_create
    would refuse: the input is read now, so a schedule never fails on its first run for it.
    """
    try:
        next_run_at = cron_next(cron, timezone.now())
    except ValueError as error:
        raise InputError(str(error)) from None
    checked = check_crawl_options(options)
    read_input(data, source=source_name, parser=parser, strict=strict)
    schedule = CrawlSchedule.objects.create(
        cron=" ".join(cron.split()),
        source=decode_input(data, source=source_name),
        parser=parser,
        depth=options.depth,
        any_host=options.any_host,
        tags=",".join(checked.tags),
        priority=options.priority,
        profile=checked.profile,
        persona=checked.persona,
        notify_webhook=checked.notify_webhook,
        notify_email=checked.notify_email,
        behaviour_seconds=checked.behaviour_seconds,
        scroll_page_limit=checked.scroll_page_limit,
        only_changes=options.only_changes,
        **{name: getattr(options, name) for name in POLITENESS_FIELDS},
        next_run_at=next_run_at,
        created_by=created_by,
    )
    logger.info("schedule %s created: %s, first run %s", schedule.pk, cron, next_run_at)
    return schedule


def schedules_run_due(*, now: datetime | None = None) -> list[Crawl]:
    """Run every enabled schedule that is due at ``now`` once; return the crawls made."""
    now = now or timezone.now()
    crawls = []
    for schedule in CrawlSchedule.objects.due(now):
        crawl = schedule_run(schedule=schedule, now=now)
        if crawl is not None:
            crawls.append(crawl)
    return crawls


def schedule_run(*, schedule: CrawlSchedule, now: datetime | None = None) -> Crawl | None:
    """Queue one crawl of ``schedule`` and move its next run past ``now``; return the crawl.

    Return None when another process ran it since ``schedule`` was read (its ``next_run_at``
    moved), or when its input no longer makes a crawl (a tag or profile rule changed): the
    reason is kept in ``last_error`` and the schedule tries again at its next time.
    """
    now = now or timezone.now()
    next_run_at = cron_next(schedule.cron, now)
    with transaction.atomic():
        moved = CrawlSchedule.objects.filter(
            pk=schedule.pk, next_run_at=schedule.next_run_at
        ).update(next_run_at=next_run_at, last_run_at=now, last_error="")
        if not moved:
            return None
        try:
            with transaction.atomic():
                crawl = _crawl_of(schedule)
        except InputError as error:
            CrawlSchedule.objects.filter(pk=schedule.pk).update(last_error=str(error))
            logger.error("schedule %s made no crawl: %s", schedule.pk, error)
            return None
    schedule.refresh_from_db()
    logger.info("schedule %s queued crawl %s; next run %s", schedule.pk, crawl.pk, next_run_at)
    return crawl


def schedule_run_now(*, schedule: CrawlSchedule) -> Crawl:
    """Queue a crawl of ``schedule`` now, out of turn (its next run stays); return it. Raises
    InputError when its input no longer makes a crawl."""
    crawl = _crawl_of(schedule)
    CrawlSchedule.objects.filter(pk=schedule.pk).update(last_run_at=crawl.created_at)
    return crawl


def _crawl_of(schedule: CrawlSchedule) -> Crawl:
    return crawl_create(
        data=schedule.source.encode(),
        source_name=f"schedule-{schedule.pk}",
        parser=schedule.parser,
        options=_options_of(schedule),
        created_by=schedule.created_by,
        schedule=schedule,
    )


def _options_of(schedule: CrawlSchedule) -> CrawlOptions:
    """The options ``schedule`` keeps, as a person gives them (checked again by each crawl)."""
    return CrawlOptions(
        depth=schedule.depth,
        any_host=schedule.any_host,
        tags=(schedule.tags,) if schedule.tags else (),
        priority=schedule.priority,
        profile=schedule.profile.name if schedule.profile else "",
        notify_webhook=schedule.notify_webhook,
        notify_email=schedule.notify_email,
        behaviour_seconds=schedule.behaviour_seconds,
        scroll_page_limit=schedule.scroll_page_limit,
        only_changes=schedule.only_changes,
        **schedule.politeness_options(),
        persona=schedule.persona.name if schedule.persona else "",
    )


def schedule_remove(*, schedule_id: int) -> None:
    """Delete schedule ``schedule_id`` (its crawls stay). Raises CrawlSchedule.DoesNotExist."""
    CrawlSchedule.objects.get(pk=schedule_id).delete()
