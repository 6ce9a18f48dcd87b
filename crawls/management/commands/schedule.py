"""``manage.py schedule add|list|remove|run``: crawls repeated on a cron schedule.

The huey consumer (supervisord's ``huey`` program) runs due schedules every minute; ``schedule
run`` does the same once, now (for a system cron, or to see what is due).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from core.management.database import require_migrated_database
from core.services.schedules import schedule_create, schedule_remove, schedules_run_due
from crawls.management.crawl_input import (
    add_crawl_arguments,
    add_politeness_arguments,
    crawl_keywords,
    read_crawl_input,
)
from crawls.models import CrawlSchedule
from crawls.seeds import InputError


class Command(BaseCommand):
    help = (
        "Re-crawl seeds on a cron schedule: each run queues a new crawl of the same input, with "
        "the same options. Runs missed while Vellum was down are made up once."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="Schedule URLs, a file or stdin.")
        add.add_argument(
            "cron", help="Five cron fields in quotes, e.g. '0 * * * *' (hourly), '30 2 * * 1'."
        )
        add_crawl_arguments(add)
        add_politeness_arguments(add)
        actions.add_parser("list", help="Every schedule with its next and last run.")
        remove = actions.add_parser("remove", help="Delete schedules (their crawls stay).")
        remove.add_argument("ids", nargs="+", type=int, metavar="ID")
        actions.add_parser("run", help="Queue a crawl for each schedule due now.")

    def handle(self, *args, action: str, **options):
        require_migrated_database()
        getattr(self, f"_{action}")(**options)

    def _add(self, *, cron: str, urls: list[str], file, depth: int, **options) -> None:
        data, source_name = read_crawl_input(urls, file)
        try:
            schedule = schedule_create(
                cron=cron,
                data=data,
                source_name=source_name,
                **crawl_keywords(options, source_name, depth),
            )
        except InputError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"Schedule {schedule.pk} added: '{schedule.cron}', first run "
            f"{_when(schedule.next_run_at)}. The huey consumer runs it (supervisord, or "
            "manage.py djangohuey)."
        )

    def _list(self, **options) -> None:
        schedules = list(CrawlSchedule.objects.select_related("profile"))
        if not schedules:
            self.stdout.write("No schedules (manage.py schedule add CRON URL ...).")
            return
        for schedule in schedules:
            state = "" if schedule.enabled else " [disabled]"
            state += " [only changes]" if schedule.only_changes else ""
            last = _when(schedule.last_run_at) if schedule.last_run_at else "never"
            crawls = schedule.crawls.count()
            self.stdout.write(
                f"{schedule.pk:>4}  {schedule.cron:<15} next {_when(schedule.next_run_at)}  "
                f"last {last}  {crawls} crawl(s){state}  {_first_line(schedule.source)}"
            )
            if schedule.last_error:
                self.stdout.write(f"      last run made no crawl: {schedule.last_error}")

    def _remove(self, *, ids: list[int], **options) -> None:
        missing = 0
        for schedule_id in ids:
            try:
                schedule_remove(schedule_id=schedule_id)
            except CrawlSchedule.DoesNotExist:
                missing += 1
                self.stderr.write(f"schedule {schedule_id}: no such schedule")
            else:
                self.stdout.write(f"Schedule {schedule_id} removed (its crawls stay).")
        if missing:
            raise CommandError(f"{missing} of {len(ids)} schedules not found")

    def _run(self, **options) -> None:
        crawls = schedules_run_due()
        for crawl in crawls:
            self.stdout.write(f"Schedule {crawl.schedule_id}: crawl {crawl.pk} queued.")
        if not crawls:
            self.stdout.write("No schedule is due.")


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M %Z")


def _first_line(source: str) -> str:
    lines = [line for line in source.strip().splitlines() if line.strip()]
    more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    return (lines[0][:60] if lines else "") + more
