"""Crawl schedules: cron expressions, runs without duplicates, missed runs made up once, the
huey task, ``manage.py schedule`` and the admin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from django_huey import get_queue

from core.services.crawls import CrawlOptions
from core.services.profiles import profile_save
from core.services.schedules import schedule_create, schedule_run, schedules_run_due
from crawls.models import Crawl, CrawlSchedule, cron_next
from crawls.seeds import InputError
from crawls.tasks import schedules_run

pytestmark = pytest.mark.django_db

HOURLY = "0 * * * *"
SEEDS = b"https://example.com/\nhttps://example.org/news"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.TIME_ZONE = "UTC"
    return tmp_path


def hourly(**options) -> CrawlSchedule:
    return schedule_create(
        cron=HOURLY, data=SEEDS, source_name="urls.txt", options=CrawlOptions(**options)
    )


def make_due(schedule: CrawlSchedule, ago: timedelta) -> CrawlSchedule:
    """Pretend the schedule's next run was ``ago`` in the past (Vellum was down meanwhile)."""
    CrawlSchedule.objects.filter(pk=schedule.pk).update(next_run_at=timezone.now() - ago)
    schedule.refresh_from_db()
    return schedule


# --- cron expressions --------------------------------------------------------------------------


def test_cron_next_is_the_next_matching_minute_after_the_given_time() -> None:
    after = datetime(2026, 11, 24, 21, 59, 30, tzinfo=UTC)

    assert cron_next(HOURLY, after) == datetime(2026, 11, 24, 22, 0, tzinfo=UTC)
    assert cron_next("30 2 * * 1", after) == datetime(2026, 11, 30, 2, 30, tzinfo=UTC)
    # Strictly after: a run at 22:00 plans the next one for 23:00.
    on_time = datetime(2026, 11, 24, 22, 0, tzinfo=UTC)
    assert cron_next(HOURLY, on_time) == datetime(2026, 11, 24, 23, 0, tzinfo=UTC)


@pytest.mark.parametrize("expression", ["61 * * * *", "* * * *", "@hourly", "0 * * * * *", ""])
def test_an_invalid_cron_expression_is_refused_with_an_example(expression: str) -> None:
    with pytest.raises(ValueError, match=r"invalid cron expression .*e\.g\. '0 \* \* \* \*'"):
        cron_next(expression, timezone.now())


# --- creating ----------------------------------------------------------------------------------


def test_a_new_schedule_first_runs_at_the_next_cron_time() -> None:
    before = timezone.now()
    profile_save(name="quick", steps=["title", "outlinks"])

    schedule = hourly(depth=1, tags=["news, daily"], priority=5, profile="quick")

    assert schedule.next_run_at == cron_next(HOURLY, before)
    assert schedule.last_run_at is None
    assert (schedule.depth, schedule.tags, schedule.priority) == (1, "news,daily", 5)
    assert schedule.profile.name == "quick"
    assert schedule.source == SEEDS.decode()
    assert not Crawl.objects.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "every hour"}, "invalid cron expression 'every hour'"),
        ({"data": b"not a url"}, "no URL"),
        ({"options": CrawlOptions(depth=11)}, "depth must be between 0 and 10"),
        ({"options": CrawlOptions(profile="missing")}, "unknown profile 'missing'"),
        ({"options": CrawlOptions(tags=["\x00"])}, "invalid tag"),
    ],
)
def test_a_schedule_that_could_not_run_is_refused_and_nothing_saved(options, message) -> None:
    arguments = {"cron": HOURLY, "data": SEEDS, "source_name": "urls.txt", **options}

    with pytest.raises(InputError, match=message):
        schedule_create(**arguments)
    assert not CrawlSchedule.objects.exists()


# --- running -----------------------------------------------------------------------------------


def test_nothing_runs_before_the_next_run_time() -> None:
    hourly()

    assert schedules_run_due() == []
    assert not Crawl.objects.exists()


def test_a_due_schedule_queues_a_crawl_of_its_seeds_with_its_options() -> None:
    profile_save(name="quick", steps=["title", "outlinks"])
    schedule = make_due(hourly(depth=1, tags=["news"], profile="quick"), timedelta(minutes=1))
    now = timezone.now()

    (crawl,) = schedules_run_due(now=now)

    assert crawl.seed_list() == ["https://example.com/", "https://example.org/news"]
    assert (crawl.depth, crawl.profile.name, crawl.schedule_id) == (1, "quick", schedule.pk)
    assert list(crawl.tags.values_list("name", flat=True)) == ["news"]
    schedule.refresh_from_db()
    assert schedule.last_run_at == now
    assert schedule.next_run_at == cron_next(HOURLY, now)


def test_runs_missed_while_vellum_was_down_run_once_not_once_each() -> None:
    schedule = make_due(hourly(), timedelta(hours=5))  # five hourly runs missed

    made = schedules_run_due()
    again = schedules_run_due()

    assert len(made) == 1
    assert again == []
    assert Crawl.objects.filter(schedule=schedule).count() == 1
    schedule.refresh_from_db()
    assert schedule.next_run_at > timezone.now()


def test_a_schedule_run_by_another_process_meanwhile_is_not_run_twice() -> None:
    """Two consumers read the same due schedule; the compare-and-set lets only one run it."""
    schedule = make_due(hourly(), timedelta(minutes=1))
    stale_copy = CrawlSchedule.objects.get(pk=schedule.pk)

    first = schedule_run(schedule=schedule)
    second = schedule_run(schedule=stale_copy)

    assert first is not None
    assert second is None
    assert Crawl.objects.count() == 1


def test_a_disabled_schedule_does_not_run() -> None:
    schedule = make_due(hourly(), timedelta(minutes=1))
    CrawlSchedule.objects.filter(pk=schedule.pk).update(enabled=False)

    assert schedules_run_due() == []


def test_a_run_whose_input_no_longer_makes_a_crawl_records_why_and_waits_for_its_next_time():
    schedule = make_due(hourly(), timedelta(minutes=1))
    CrawlSchedule.objects.filter(pk=schedule.pk).update(source="no urls at all")

    assert schedules_run_due() == []

    schedule.refresh_from_db()
    assert "no URL" in schedule.last_error
    assert schedule.next_run_at > timezone.now()
    assert not Crawl.objects.exists()


def test_the_huey_task_runs_every_minute_and_runs_due_schedules() -> None:
    queue = get_queue("default")
    any_minute = datetime(2026, 11, 24, 13, 37)

    due_tasks = queue.read_periodic(any_minute)
    assert any(isinstance(task, schedules_run.task_class) for task in due_tasks)
    make_due(hourly(), timedelta(minutes=1))
    assert schedules_run.call_local() == 1
    assert Crawl.objects.count() == 1


# --- manage.py schedule ------------------------------------------------------------------------


def run(*args: str) -> str:
    out = StringIO()
    call_command("schedule", *args, stdout=out)
    return out.getvalue()


def test_schedule_add_list_run_and_remove() -> None:
    out = run("add", HOURLY, "https://example.com/", "--tag", "news")
    schedule = CrawlSchedule.objects.get()
    assert out.startswith(f"Schedule {schedule.pk} added: '0 * * * *', first run 20")

    listing = run("list")
    assert f"{schedule.pk:>4}  0 * * * *" in listing
    assert "last never  0 crawl(s)  https://example.com/" in listing

    assert run("run") == "No schedule is due.\n"
    make_due(schedule, timedelta(minutes=3))
    crawl_line = run("run")
    crawl = Crawl.objects.get()
    assert crawl_line == f"Schedule {schedule.pk}: crawl {crawl.pk} queued.\n"
    assert "1 crawl(s)" in run("list")

    assert run("remove", str(schedule.pk)) == f"Schedule {schedule.pk} removed (its crawls stay).\n"
    assert not CrawlSchedule.objects.exists()
    assert Crawl.objects.filter(pk=crawl.pk, schedule=None).exists()


def test_schedule_add_names_a_bad_cron_or_url() -> None:
    with pytest.raises(CommandError, match="invalid cron expression '61 \\* \\* \\* \\*'"):
        run("add", "61 * * * *", "https://example.com/")
    with pytest.raises(CommandError, match="only http and https URLs"):
        run("add", HOURLY, "ftp://example.com/")
    assert not CrawlSchedule.objects.exists()


def test_schedule_remove_reports_unknown_ids() -> None:
    with pytest.raises(CommandError, match="1 of 1 schedules not found"):
        run("remove", "404")


# --- admin ---------------------------------------------------------------------------------------


def test_the_admin_adds_a_schedule_and_plans_its_first_run(admin_client) -> None:
    form = {
        "cron": "*/15 * * * *",
        "enabled": "on",
        "source": "https://example.com/",
        "parser": "auto",
        "depth": "0",
        "tags": "",
        "priority": "0",
        "profile": "",
        "notify_webhook": "",
        "notify_email": "",
    }
    before = timezone.now()

    response = admin_client.post(reverse("admin:crawls_crawlschedule_add"), form)

    assert response.status_code == 302
    schedule = CrawlSchedule.objects.get()
    assert schedule.next_run_at == cron_next("*/15 * * * *", before)
    assert schedule.created_by.username == "admin"

    bad = {**form, "cron": "every day"}
    response = admin_client.post(reverse("admin:crawls_crawlschedule_add"), bad)
    assert response.status_code == 200
    assert "invalid cron expression" in response.content.decode()
    bad_input = {**form, "source": "nothing to archive here"}
    response = admin_client.post(reverse("admin:crawls_crawlschedule_add"), bad_input)
    assert "no URL" in response.content.decode()
    assert CrawlSchedule.objects.count() == 1


def test_a_schedule_whose_options_no_longer_pass_can_be_turned_off_not_on(
    admin_client, settings
) -> None:
    """Its profile (here the default steps) no longer finds links for its depth: it cannot be
    saved enabled, and can be saved disabled (it runs nothing then)."""
    settings.EXTRACTORS = ["headers", "wget", "title"]
    schedule = CrawlSchedule.objects.create(
        cron="0 * * * *", source="https://example.com/", depth=1, next_run_at=timezone.now()
    )
    change = reverse("admin:crawls_crawlschedule_change", args=[schedule.pk])
    form = {"cron": "0 * * * *", "source": "https://example.com/", "parser": "auto",
            "depth": "1", "tags": "", "priority": "0", "profile": "", "notify_webhook": "",
            "notify_email": ""}  # fmt: skip

    refused = admin_client.post(change, {**form, "enabled": "on"})
    turned_off = admin_client.post(change, form)

    assert "the default steps (EXTRACTORS) do not run it" in refused.content.decode()
    assert turned_off.status_code == 302
    assert CrawlSchedule.objects.get(pk=schedule.pk).enabled is False


def test_the_admin_runs_a_schedule_now_without_moving_its_next_run(admin_client) -> None:
    schedule = hourly()
    changelist = reverse("admin:crawls_crawlschedule_changelist")

    admin_client.post(changelist, {"action": "run_now", "_selected_action": [schedule.pk]})

    assert Crawl.objects.get().schedule == schedule
    next_run_at = schedule.next_run_at
    schedule.refresh_from_db()
    assert schedule.next_run_at == next_run_at
    assert schedule.last_run_at is not None
