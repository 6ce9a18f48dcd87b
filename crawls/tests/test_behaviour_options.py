"""A crawl's behaviour options (``behaviour_seconds``, ``scroll_page_limit``): their checks, and
how ``manage.py add``, ``schedule add``, the REST API, the add page and the schedule admin carry
them to the Crawl, whose snapshots hand them to the rendering extractors. What they do to a
page in Chromium is tested in core/tests/test_behaviours.py."""

from __future__ import annotations

import io
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from model_bakery import baker

from core.extractors.behaviours import (
    FROM_SETTINGS,
    BehaviourOptions,
    behaviour_budget,
    behaviour_options,
)
from core.models import Snapshot
from core.services.crawls import CrawlOptions, check_crawl_options, crawl_create
from core.services.schedules import schedule_create, schedule_run
from core.services.tokens import token_create
from core.tests.test_cli import SEED, lines, manage
from core.tests.users import keeper, staff_with
from crawls.models import Crawl, CrawlSchedule
from crawls.seeds import InputError

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.TIME_ZONE = "UTC"
    return tmp_path


# --- the checks ----------------------------------------------------------------------------------

BAD_OPTIONS = [
    ({"behaviour_seconds": "abc"}, "behaviour seconds must be a number of seconds (0: no "
                                   "behaviours), not 'abc'"),
    ({"behaviour_seconds": "-1"}, "behaviour seconds must be between 0 and 300, not -1"),
    ({"behaviour_seconds": -0.5}, "behaviour seconds must be between 0 and 300, not -0.5"),
    ({"behaviour_seconds": 301}, "behaviour seconds must be between 0 and 300, not 301"),
    ({"behaviour_seconds": "nan"}, "behaviour seconds must be a number of seconds"),
    ({"behaviour_seconds": float("inf")}, "behaviour seconds must be a number of seconds"),
    ({"behaviour_seconds": True}, "behaviour seconds must be a number of seconds"),
    ({"scroll_page_limit": "many"}, "scroll pages must be a whole number of pages, not 'many'"),
    ({"scroll_page_limit": "2.5"}, "scroll pages must be a whole number of pages, not '2.5'"),
    ({"scroll_page_limit": 2.5}, "scroll pages must be a whole number of pages, not 2.5"),
    ({"scroll_page_limit": -1}, "scroll pages must be between 0 and 1000, not -1"),
    ({"scroll_page_limit": "1001"}, "scroll pages must be between 0 and 1000, not 1001"),
]  # fmt: skip


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_bad_behaviour_options_are_refused_naming_what_is_wrong(options, message) -> None:
    with pytest.raises(InputError) as raised:
        check_crawl_options(CrawlOptions(**options))

    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("given", "seconds", "pages"),
    [
        ({}, None, None),
        ({"behaviour_seconds": "", "scroll_page_limit": " "}, None, None),
        ({"behaviour_seconds": "0", "scroll_page_limit": "0"}, 0.0, 0),
        ({"behaviour_seconds": " 2.5 ", "scroll_page_limit": " 40 "}, 2.5, 40),
        ({"behaviour_seconds": 300, "scroll_page_limit": 1000}, 300.0, 1000),
    ],
)
def test_behaviour_options_are_read_as_numbers_and_empty_means_the_setting(
    given, seconds, pages
) -> None:
    checked = check_crawl_options(CrawlOptions(**given))

    assert (checked.behaviour_seconds, checked.scroll_page_limit) == (seconds, pages)


def test_a_crawl_keeps_its_behaviour_options_and_its_snapshots_hand_them_on() -> None:
    crawl = crawl_create(
        data=b"https://example.com/",
        source_name="urls.txt",
        options=CrawlOptions(behaviour_seconds="0", scroll_page_limit=25),
    )
    snapshot = baker.make(Snapshot, crawl=crawl, url="https://example.com/")

    crawl.refresh_from_db()
    assert (crawl.behaviour_seconds, crawl.scroll_page_limit) == (0, 25)
    claimed = Snapshot.objects.select_related("crawl").get(pk=snapshot.pk)
    assert behaviour_options(claimed) == BehaviourOptions(seconds=0, page_limit=25)


def test_a_crawl_without_behaviour_options_leaves_them_to_the_settings(settings) -> None:
    settings.BEHAVIOUR_SECONDS, settings.SCROLL_PAGE_LIMIT = 7, 3
    crawl = crawl_create(data=b"https://example.com/", source_name="urls.txt")
    snapshot = baker.make(Snapshot, crawl=crawl, url="https://example.com/")

    options = behaviour_options(snapshot)

    assert options == BehaviourOptions()
    assert (options.resolved_seconds(), options.resolved_page_limit()) == (7, 3)
    assert crawl.behaviour_summary() == (
        "at most 7 s (BEHAVIOUR_SECONDS), 3 scroll pages (SCROLL_PAGE_LIMIT)"
    )


def test_an_object_with_only_a_url_gets_the_settings() -> None:
    """A benchmark passes the extractors a plain object (core/extractors/base.py, HasURL)."""
    assert behaviour_options(SimpleNamespace(url="https://example.com/")) is FROM_SETTINGS


def test_a_crawls_seconds_replace_the_setting_within_a_quarter_of_what_is_left(settings) -> None:
    settings.BEHAVIOUR_SECONDS = 10

    assert behaviour_budget(time.monotonic() + 600, 30) == pytest.approx(30, abs=0.1)
    assert behaviour_budget(time.monotonic() + 60, 30) == pytest.approx(15, abs=0.1)
    assert behaviour_budget(time.monotonic() + 600, 0) == 0
    assert behaviour_budget(time.monotonic() + 600, None) == pytest.approx(10, abs=0.1)


@pytest.mark.parametrize(
    ("seconds", "pages", "summary"),
    [
        (0, None, "off"),
        (0, 5, "off"),
        (30, 5, "at most 30 s, 5 scroll pages"),
        (2.5, None, "at most 2.5 s, 10 scroll pages (SCROLL_PAGE_LIMIT)"),
    ],
)
def test_the_summary_says_what_the_crawls_pages_get(settings, seconds, pages, summary) -> None:
    settings.SCROLL_PAGE_LIMIT = 10
    crawl = baker.prepare(Crawl, behaviour_seconds=seconds, scroll_page_limit=pages)

    assert crawl.behaviour_summary() == summary


def test_with_the_setting_at_0_and_nothing_set_the_summary_says_the_setting_is_why(
    settings,
) -> None:
    settings.BEHAVIOUR_SECONDS = 0

    assert baker.prepare(Crawl).behaviour_summary() == "off (BEHAVIOUR_SECONDS)"


# --- manage.py add and schedule add --------------------------------------------------------------


def add(*args: str) -> str:
    out = io.StringIO()
    call_command("add", *args, stdout=out)
    return out.getvalue()


def test_add_carries_the_behaviour_options_to_the_crawl() -> None:
    add("--behaviour-seconds", "2.5", "--scroll-pages", "40", SEED)

    crawl = Crawl.objects.get()
    assert (crawl.behaviour_seconds, crawl.scroll_page_limit) == (2.5, 40)


def test_add_without_them_leaves_them_to_the_settings() -> None:
    add(SEED)

    assert Crawl.objects.values_list("behaviour_seconds", "scroll_page_limit").get() == (
        None,
        None,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--behaviour-seconds", "ten"], "behaviour seconds must be a number of seconds"),
        (["--behaviour-seconds", "-3"], "behaviour seconds must be between 0 and 300, not -3"),
        (["--behaviour-seconds", "1e9"], "behaviour seconds must be between 0 and 300"),
        (["--scroll-pages", "lots"], "scroll pages must be a whole number of pages, not 'lots'"),
        (["--scroll-pages", "5000"], "scroll pages must be between 0 and 1000, not 5000"),
    ],
)
def test_add_refuses_bad_behaviour_options_in_one_line(args, message) -> None:
    with pytest.raises(CommandError) as raised:
        add(*args, SEED)

    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert not Crawl.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_add_shows_a_bad_behaviour_option_as_one_line_without_a_traceback() -> None:
    done = manage("add", "--behaviour-seconds", "-1", "--scroll-pages", "3", SEED)

    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert lines(done.stderr) == [
        "CommandError: behaviour seconds must be between 0 and 300, not -1"
    ]
    assert not Crawl.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_add_in_a_process_of_its_own_keeps_the_options() -> None:
    done = manage("add", "--behaviour-seconds", "0", "--scroll-pages", "12", SEED)

    assert done.returncode == 0, done.stderr
    assert Crawl.objects.values_list("behaviour_seconds", "scroll_page_limit").get() == (0, 12)


def test_schedule_add_keeps_the_options_and_each_run_gives_them_to_its_crawl() -> None:
    out = io.StringIO()
    call_command(
        "schedule", "add", "0 * * * *", "https://example.com/",
        "--behaviour-seconds", "45", "--scroll-pages", "2", stdout=out,
    )  # fmt: skip
    schedule = CrawlSchedule.objects.get()
    assert (schedule.behaviour_seconds, schedule.scroll_page_limit) == (45, 2)
    CrawlSchedule.objects.filter(pk=schedule.pk).update(
        next_run_at=timezone.now() - timedelta(minutes=1)
    )
    schedule.refresh_from_db()

    crawl = schedule_run(schedule=schedule)

    assert crawl is not None
    assert (crawl.behaviour_seconds, crawl.scroll_page_limit) == (45, 2)


def test_schedule_add_refuses_bad_behaviour_options() -> None:
    with pytest.raises(CommandError, match="scroll pages must be between 0 and 1000, not -2"):
        call_command("schedule", "add", "0 * * * *", "https://example.com/", "--scroll-pages", "-2")
    assert not CrawlSchedule.objects.exists()


def test_a_schedule_with_no_options_makes_crawls_that_follow_the_settings() -> None:
    schedule = schedule_create(
        cron="0 * * * *", data=b"https://example.com/", source_name="urls.txt"
    )
    CrawlSchedule.objects.filter(pk=schedule.pk).update(
        next_run_at=timezone.now() - timedelta(minutes=1)
    )
    schedule.refresh_from_db()

    crawl = schedule_run(schedule=schedule)

    assert (crawl.behaviour_seconds, crawl.scroll_page_limit) == (None, None)


# --- the REST API --------------------------------------------------------------------------------


@pytest.fixture
def api() -> Client:
    _token, key = token_create(username=keeper("reader", password="pw").username)
    return Client(headers={"Authorization": f"Bearer {key}"})


def test_the_api_carries_the_options_and_shows_them(api: Client) -> None:
    response = api.post(
        "/api/v1/crawls",
        {"urls": ["https://example.com/"], "behaviour_seconds": 0, "scroll_page_limit": 25},
        content_type="application/json",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["behaviour_seconds"], body["scroll_page_limit"]) == (0, 25)
    crawl = Crawl.objects.get(pk=body["id"])
    assert (crawl.behaviour_seconds, crawl.scroll_page_limit) == (0, 25)
    shown = api.get(f"/api/v1/crawls/{crawl.pk}").json()
    assert (shown["behaviour_seconds"], shown["scroll_page_limit"]) == (0, 25)


def test_the_api_leaves_them_to_the_settings_when_not_given(api: Client) -> None:
    response = api.post(
        "/api/v1/crawls", {"urls": ["https://example.com/"]}, content_type="application/json"
    )

    body = response.json()
    assert (body["behaviour_seconds"], body["scroll_page_limit"]) == (None, None)


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ('{"behaviour_seconds": -1}', 400, "behaviour seconds must be between 0 and 300, not -1"),
        ('{"behaviour_seconds": 1000}', 400, "behaviour seconds must be between 0 and 300"),
        ('{"behaviour_seconds": NaN}', 400, "behaviour seconds must be a number of seconds"),
        ('{"scroll_page_limit": 1001}', 400, "scroll pages must be between 0 and 1000, not 1001"),
        ('{"behaviour_seconds": "soon"}', 422, None),
        ('{"scroll_page_limit": 2.5}', 422, None),
    ],
)
def test_the_api_refuses_bad_options(api: Client, body: str, status: int, detail) -> None:
    payload = '{"urls": ["https://example.com/"], ' + body[1:]

    response = api.post("/api/v1/crawls", payload, content_type="application/json")

    assert response.status_code == status, response.content
    if detail:
        assert detail in response.json()["detail"]
    assert not Crawl.objects.exists()


# --- the add page, the crawl's pages and the schedule admin -------------------------------------


@pytest.fixture
def signed_in() -> Client:
    client = Client()
    client.force_login(staff_with("adder", "crawls.add_crawl", "crawls.view_crawl"))
    return client


def add_form(**fields) -> dict:
    return {"urls": "https://example.com/", "parser": "auto", "depth": "0", "tags": "",
            "profile": "", "behaviour_seconds": "", "scroll_page_limit": "", **fields}  # fmt: skip


def test_the_add_page_offers_the_options_with_their_help(signed_in: Client) -> None:
    page = signed_in.get("/add/").content.decode()

    assert 'name="behaviour_seconds"' in page and 'name="scroll_page_limit"' in page
    assert "0: none; empty: the server&#x27;s setting (BEHAVIOUR_SECONDS)" in page
    assert "Empty: the server&#x27;s setting (SCROLL_PAGE_LIMIT)" in page


def test_the_add_page_carries_the_options_and_the_crawl_page_shows_them(
    signed_in: Client,
) -> None:
    response = signed_in.post("/add/", add_form(behaviour_seconds="30", scroll_page_limit="5"))

    crawl = Crawl.objects.get()
    assert response.status_code == 302
    assert (crawl.behaviour_seconds, crawl.scroll_page_limit) == (30, 5)
    page = signed_in.get(f"/crawl/{crawl.pk}/").content.decode()
    assert "behaviours at most 30 s, 5 scroll pages" in page


def test_the_add_page_left_empty_leaves_them_to_the_settings(signed_in: Client) -> None:
    signed_in.post("/add/", add_form())

    crawl = Crawl.objects.get()
    assert (crawl.behaviour_seconds, crawl.scroll_page_limit) == (None, None)
    assert "behaviours" not in signed_in.get(f"/crawl/{crawl.pk}/").content.decode()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"behaviour_seconds": "-1"}, "greater than or equal to 0"),
        ({"behaviour_seconds": "301"}, "less than or equal to 300"),
        ({"behaviour_seconds": "later"}, "Enter a number."),
        ({"behaviour_seconds": "nan"}, "Enter a number."),
        ({"scroll_page_limit": "1001"}, "less than or equal to 1000"),
        ({"scroll_page_limit": "1.5"}, "Enter a whole number."),
    ],
)
def test_the_add_page_refuses_bad_options_with_the_reason(signed_in, fields, message) -> None:
    response = signed_in.post("/add/", add_form(**fields))

    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Crawl.objects.exists()


def test_the_crawl_admin_shows_the_behaviours(admin_client) -> None:
    crawl = baker.make(Crawl, seeds=SEED, behaviour_seconds=0)

    page = admin_client.get(reverse("admin:crawls_crawl_change", args=[crawl.pk]))

    assert page.status_code == 200
    assert "behaviours" in page.content.decode().lower()
    assert ">off<" in page.content.decode()


def schedule_form(**fields) -> dict:
    return {"cron": "0 * * * *", "enabled": "on", "source": "https://example.com/",
            "parser": "auto", "depth": "0", "tags": "", "priority": "0", "profile": "",
            "notify_webhook": "", "notify_email": "", "behaviour_seconds": "",
            "scroll_page_limit": "", **fields}  # fmt: skip


def test_the_schedule_admin_keeps_the_options_and_checks_them(admin_client) -> None:
    add_url = reverse("admin:crawls_crawlschedule_add")

    refused = admin_client.post(add_url, schedule_form(behaviour_seconds="-4"))
    too_many = admin_client.post(add_url, schedule_form(scroll_page_limit="2000"))
    assert "behaviour seconds must be between 0 and 300, not -4" in refused.content.decode()
    assert "scroll pages must be between 0 and 1000, not 2000" in too_many.content.decode()
    assert not CrawlSchedule.objects.exists()

    saved = admin_client.post(add_url, schedule_form(behaviour_seconds="12", scroll_page_limit="4"))

    assert saved.status_code == 302
    schedule = CrawlSchedule.objects.get()
    assert (schedule.behaviour_seconds, schedule.scroll_page_limit) == (12, 4)
