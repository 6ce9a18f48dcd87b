"""The add page (paste URLs or upload a file, with depth, tags and profile) and a crawl's live
progress page and its htmx fragment."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot
from core.services.profiles import profile_save
from core.tests.users import staff_with
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db

RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>Blog</title>
<item><title>Hello</title><link>https://blog.example/hello</link><category>greetings</category></item>
</channel></rss>"""


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.SOURCES_DIR = tmp_path / "sources"
    return tmp_path


@pytest.fixture
def user():
    """Staff who may add crawls and see them (core/tests/test_permissions.py: everyone else)."""
    return staff_with("reader", "crawls.add_crawl", "crawls.view_crawl")


@pytest.fixture
def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form(**fields) -> dict:
    return {"urls": "", "parser": "auto", "depth": "0", "tags": "", "profile": "", **fields}


def test_visitors_are_sent_to_sign_in() -> None:
    for path in ["/add/", "/crawl/1/", "/crawl/1/progress/"]:
        response = Client().get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_pasted_urls_become_a_crawl_with_its_options(signed_in: Client, user) -> None:
    profile_save(name="quick", steps=["title", "outlinks"])

    response = signed_in.post(
        "/add/",
        form(urls="https://example.com/\nhttps://example.org/", depth="1", tags="web, news",
             profile="quick"),
    )  # fmt: skip

    crawl = Crawl.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/crawl/{crawl.pk}/"
    assert crawl.seed_list() == ["https://example.com/", "https://example.org/"]
    assert (crawl.depth, crawl.profile.name, crawl.created_by) == (1, "quick", user)
    assert sorted(crawl.tags.values_list("name", flat=True)) == ["news", "web"]


def test_an_uploaded_feed_keeps_its_titles_and_its_bad_entries_are_shown(signed_in) -> None:
    upload = SimpleUploadedFile("blog.xml", RSS, content_type="application/rss+xml")

    response = signed_in.post("/add/", {**form(), "file": upload}, follow=True)

    crawl = Crawl.objects.get()
    assert crawl.input_report["format"] == "feed"
    assert crawl.seed_details["https://blog.example/hello"]["title"] == "Hello"
    assert "1 URL read as feed" in response.content.decode()


def test_a_partly_bad_paste_names_what_was_left_out(signed_in: Client) -> None:
    response = signed_in.post(
        "/add/", form(urls="https://ok.example/\nftp://no.example/"), follow=True
    )

    page = response.content.decode()
    assert "1 entry left out" in page
    assert "pasted text line 2: &#x27;ftp://no.example/&#x27;: only http and https URLs" in page


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "Paste URLs or choose a file (one of them)."),
        ({"urls": "no links at all"}, "no URL"),
        ({"urls": "https://a.example/", "depth": "11"}, "less than or equal to 10"),
        ({"urls": "https://a.example/", "profile": "missing"}, "Select a valid choice"),
    ],
)
def test_bad_input_shows_the_form_again_with_the_reason(signed_in, fields, message) -> None:
    response = signed_in.post("/add/", form(**fields))

    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Crawl.objects.exists()


def test_the_form_needs_its_csrf_token(user) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    assert client.post("/add/", form(urls="https://a.example/")).status_code == 403
    assert not Crawl.objects.exists()


# --- progress ------------------------------------------------------------------------------------


def started_crawl() -> Crawl:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="https://a.example/")
    for index in range(3):
        snapshot = baker.make(
            Snapshot, crawl=crawl, url=f"https://a.example/{index}", status=SnapshotStatus.STARTED
        )
        baker.make(
            ArchiveResult, snapshot=snapshot, extractor="title", status=ResultStatus.SUCCEEDED
        )
        baker.make(ArchiveResult, snapshot=snapshot, extractor="wget", status=ResultStatus.QUEUED)
    return crawl


def test_the_progress_page_polls_while_the_crawl_runs(signed_in, django_assert_max_num_queries):
    crawl = started_crawl()

    page = signed_in.get(f"/crawl/{crawl.pk}/").content.decode()
    # session, user, its permissions (own and groups'), crawl, snapshots, results, counts
    with django_assert_max_num_queries(10):
        fragment = signed_in.get(f"/crawl/{crawl.pk}/progress/").content.decode()

    assert 'src="/static/vendor/htmx/htmx.min.js"' in page
    assert f'hx-get="/crawl/{crawl.pk}/progress/"' in fragment
    assert 'hx-trigger="every 2s"' in fragment
    assert "snapshots: started 3" in fragment
    assert "results: queued 3, succeeded 3" in fragment
    assert fragment.count('class="mark succeeded"') == 3


def test_polling_the_progress_never_reads_the_seeds(signed_in: Client) -> None:
    """Polled every 2 s, the fragment reads neither what grows with the crawl (its seed list,
    what the input said of each seed) nor does the page, but to name a crawl's one seed."""
    crawl = started_crawl()
    Crawl.objects.filter(pk=crawl.pk).update(
        seed_details={"https://a.example/": {"title": "Given", "tags": []}}
    )

    with CaptureQueriesContext(connection) as polled:
        fragment = signed_in.get(f"/crawl/{crawl.pk}/progress/").content.decode()
    with CaptureQueriesContext(connection) as shown:
        page = signed_in.get(f"/crawl/{crawl.pk}/").content.decode()

    assert "snapshots: started 3" in fragment
    assert "Saving <code>https://a.example/</code>" in page  # its one seed
    assert not [query["sql"] for query in polled.captured_queries if "seed" in query["sql"]]
    assert not [q["sql"] for q in shown.captured_queries if "seed_details" in q["sql"]]
    # The seed list is read only where it holds one seed.
    (seeds_read,) = [q["sql"] for q in shown.captured_queries if '"seeds"' in q["sql"]]
    assert "NOT" in seeds_read and "LIKE" in seeds_read
    Crawl.objects.filter(pk=crawl.pk).update(seeds="https://a.example/\nhttps://b.example/")
    assert "Saving" not in signed_in.get(f"/crawl/{crawl.pk}/").content.decode()


def test_a_sealed_crawls_progress_stops_polling(signed_in: Client) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.SEALED, seeds="https://a.example/")

    fragment = signed_in.get(f"/crawl/{crawl.pk}/progress/").content.decode()

    assert "hx-trigger" not in fragment
    assert "sealed" in fragment


def test_an_unknown_crawl_is_not_found(signed_in: Client) -> None:
    assert signed_in.get("/crawl/404/").status_code == 404


def test_json_nested_too_deeply_is_a_400_saying_so(signed_in: Client) -> None:
    """50,000 nested arrays once exhausted the JSON decoder's recursion (a 500)."""
    deep = "[" * 50_000 + "]" * 50_000

    response = signed_in.post("/add/", form(urls=deep))

    assert response.status_code == 400
    assert "nested too deeply" in response.content.decode()
    assert not Crawl.objects.exists()
