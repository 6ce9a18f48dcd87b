"""The archive's pages and its full-text search: the index (paginated, few queries), search by
title, URL, tag and page text on SQLite's FTS5 or PostgreSQL, one snapshot's page, and who may
read them (PUBLIC_ARCHIVE)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from model_bakery import baker

from core.choices import SnapshotStatus
from core.models import Snapshot, SnapshotText
from core.services.search import search_snapshot_ids, search_words, snapshot_index_text
from core.services.snapshots import snapshot_check_results
from core.tests.test_services import finished_snapshot, make_crawl
from core.tests.users import staff_with
from crawls.models import Crawl

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.PUBLIC_ARCHIVE = False
    return tmp_path


@pytest.fixture
def staff_client() -> Client:
    client = Client()
    client.force_login(staff_with("keeper", "core.view_snapshot"))  # a reader
    return client


def indexed(url: str, title: str = "", text: str = "", tags: tuple[str, ...] = ()) -> Snapshot:
    """A sealed snapshot whose page text is ``text`` (as htmltotext would have saved it)."""
    crawl = make_crawl(url)
    snapshot = baker.make(
        Snapshot, crawl=crawl, url=url, title=title, status=SnapshotStatus.SEALED, retry_at=None
    )
    for name in tags:
        snapshot.tags.create(name=name)
    if text:
        path = snapshot.output_dir / "htmltotext" / "output.txt"
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
    snapshot_index_text(snapshot=snapshot)
    return snapshot


# --- search --------------------------------------------------------------------------------------


def test_sealing_a_snapshot_puts_its_page_text_in_the_index() -> None:
    snapshot = finished_snapshot()
    readable = snapshot.output_dir / "readability" / "content.txt"
    readable.parent.mkdir(parents=True)
    readable.write_text("Parchment and vellum were the writing surfaces of medieval books.")

    snapshot_check_results(snapshot=snapshot)

    row = SnapshotText.objects.get(snapshot=snapshot)
    assert "medieval books" in row.text
    assert row.url == "http://a.example/ http a example"
    assert row.tags == "news"
    assert search_snapshot_ids("medieval") == [snapshot.pk]


def test_every_word_must_match_in_title_url_tags_or_text() -> None:
    json_page = indexed("https://docs.example/json.html", "json — JSON encoder", "JSONDecoder")
    csv_page = indexed("https://docs.example/csv.html", "csv — CSV files", "dialect sniffer")
    tagged = indexed("https://blog.example/post", "A post", "nothing here", tags=("reading",))

    assert search_snapshot_ids("json") == [json_page.pk]
    assert search_snapshot_ids("csv dialect") == [csv_page.pk]
    assert search_snapshot_ids("csv json") == []
    assert set(search_snapshot_ids("docs.example")) == {csv_page.pk, json_page.pk}
    assert search_snapshot_ids("reading") == [tagged.pk]


def test_a_word_finds_the_words_it_begins() -> None:
    page = indexed("https://a.example/", "Archiving the web", "preservation")

    assert search_snapshot_ids("archiv") == [page.pk]
    assert search_snapshot_ids("preserv") == [page.pk]
    assert search_snapshot_ids("chiving") == []


def test_case_does_not_matter_nor_on_sqlite_accents() -> None:
    page = indexed("https://a.example/", "Café Müller", "")

    assert search_snapshot_ids("CAFÉ") == [page.pk]
    if connection.vendor == "sqlite":  # FTS5's remove_diacritics; PostgreSQL's 'simple' keeps them
        assert search_snapshot_ids("cafe muller") == [page.pk]


@pytest.mark.parametrize("query", ['"', "a AND OR NOT", "*", "NEAR(", "col:umn", "-x", "'; DROP"])
def test_what_people_type_is_never_a_syntax_error(query: str) -> None:
    indexed("https://a.example/", "AND OR NOT near x column drop", "")

    assert isinstance(search_snapshot_ids(query), list)


def test_a_query_without_words_finds_nothing() -> None:
    indexed("https://a.example/", "Anything", "")

    assert search_words(" -- !! ") == []
    assert search_snapshot_ids(" -- !! ") == []


def test_indexing_again_replaces_the_row() -> None:
    page = indexed("https://a.example/", "Old title", "")
    page.title = "New title"
    page.save(update_fields=["title"])

    snapshot_index_text(snapshot=page)

    assert SnapshotText.objects.count() == 1
    assert search_snapshot_ids("new") == [page.pk]
    assert search_snapshot_ids("old") == []


def test_removing_a_snapshot_removes_it_from_search() -> None:
    page = indexed("https://a.example/", "Gone soon", "")

    page.delete()

    assert search_snapshot_ids("gone") == []


# --- the pages -----------------------------------------------------------------------------------


def test_the_index_lists_snapshots_newest_first_with_few_queries(
    staff_client: Client, django_assert_max_num_queries
) -> None:
    for index in range(3):
        indexed(f"https://a.example/{index}", f"Page {index}", "")

    with django_assert_max_num_queries(8):  # session, user, count, page, results, tags
        response = staff_client.get("/")

    assert response.status_code == 200
    titles = [row["snapshot"].title for row in response.context["rows"]]
    assert titles == ["Page 2", "Page 1", "Page 0"]


def test_the_index_pages_fifty_at_a_time(staff_client: Client) -> None:
    crawl = make_crawl()
    baker.make(Snapshot, crawl=crawl, _quantity=51, _fill_optional=["url"])

    first = staff_client.get("/")
    second = staff_client.get("/?page=2")

    assert len(first.context["rows"]) == 50
    assert len(second.context["rows"]) == 1
    assert "page 1 of 2" in first.content.decode()


def test_searching_from_the_index(staff_client: Client) -> None:
    indexed("https://a.example/one", "Vellum and parchment", "")
    indexed("https://a.example/two", "Paper", "")

    response = staff_client.get("/?q=parchment")

    assert [row["snapshot"].title for row in response.context["rows"]] == ["Vellum and parchment"]
    assert "1 snapshot matches “parchment”" in response.content.decode()


def test_past_the_search_limit_the_page_says_it_shows_the_best(
    staff_client: Client, monkeypatch
) -> None:
    monkeypatch.setattr("core.services.search.MAX_RESULTS", 2)
    for n in range(3):
        indexed(f"https://a.example/{n}", f"Parchment {n}", "")

    response = staff_client.get("/?q=parchment")

    assert len(response.context["rows"]) == 2
    assert "The best 2 of the snapshots that match “parchment”" in response.content.decode()


def test_a_snapshot_page_shows_its_outputs_and_proofs(staff_client: Client) -> None:
    snapshot = finished_snapshot()
    snapshot_check_results(snapshot=snapshot)

    response = staff_client.get(f"/snapshot/{snapshot.pk}/?view=files")

    page = response.content.decode()
    assert response.status_code == 200
    assert f"/archive/{snapshot.pk}/title/title.txt" in page
    assert f"/archive/{snapshot.pk}/manifest-sha256.txt" in page
    assert f"/snapshot/{snapshot.pk}/wacz/" in page
    assert "attempts exhausted (3): HTTP 503" in page  # favicon's failure, with its reason


def test_a_snapshot_page_does_not_read_its_crawls_seeds(staff_client: Client) -> None:
    """A crawl's seed list and what its input said of each seed grow with the crawl (a
    bookmarks export of 100,000 links): a view of one of its pages reads neither."""
    snapshot = finished_snapshot()
    snapshot_check_results(snapshot=snapshot)

    with CaptureQueriesContext(connection) as queries:
        response = staff_client.get(f"/snapshot/{snapshot.pk}/?view=files")

    assert response.status_code == 200
    assert f"/crawl/{snapshot.crawl_id}/" in response.content.decode()  # its crawl, linked
    assert not [query["sql"] for query in queries.captured_queries if "seed" in query["sql"]]


def test_the_snapshot_page_says_whether_its_proofs_hold(staff_client: Client) -> None:
    snapshot = finished_snapshot()
    snapshot_check_results(snapshot=snapshot)
    snapshot.refresh_from_db()
    verified = staff_client.get(f"/snapshot/{snapshot.pk}/").content.decode()
    manifest = snapshot.output_dir / "manifest-sha256.txt"
    manifest.write_text(manifest.read_text() + "0" * 64 + "  added/after/sealing.txt\n")
    tampered = staff_client.get(f"/snapshot/{snapshot.pk}/").content.decode()

    assert "signature verified" in verified and "proofs do not hold" not in verified
    assert "proofs do not hold" in tampered
    assert "manifest-sha256.txt is not the manifest sealed" in tampered
    assert "signature does not match manifest-sha256.txt" in tampered


def test_an_unknown_snapshot_is_not_found(staff_client: Client) -> None:
    assert staff_client.get("/snapshot/00000000-0000-0000-0000-000000000000/").status_code == 404


# --- who may read --------------------------------------------------------------------------------


def test_by_default_visitors_are_sent_to_sign_in() -> None:
    page = indexed("https://a.example/", "Private", "")

    for path in ["/", f"/snapshot/{page.pk}/"]:
        response = Client().get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")


def test_a_public_archive_is_open_to_anyone(settings) -> None:
    settings.PUBLIC_ARCHIVE = True
    snapshot = finished_snapshot()
    snapshot_check_results(snapshot=snapshot)
    Crawl.objects.filter(pk=snapshot.crawl_id).update(public=True)  # marked public
    client = Client()

    assert client.get("/").status_code == 200
    assert client.get(f"/snapshot/{snapshot.pk}/").status_code == 200
    served = client.get(f"/archive/{snapshot.pk}/title/title.txt")
    assert served.status_code == 200
    assert served["Content-Security-Policy"].startswith("sandbox")


def test_the_search_command_lists_matches_and_rebuilds_the_index() -> None:
    page = indexed("https://a.example/", "Illuminated manuscripts", "")
    SnapshotText.objects.all().delete()
    out = StringIO()

    call_command("search", "illuminated", stdout=out)
    assert out.getvalue() == "0 match(es).\n"

    out = StringIO()
    call_command("search", "--rebuild", "illuminated", stdout=out)
    assert out.getvalue().splitlines() == [
        "1 sealed snapshot(s) indexed.",
        f"{page.pk}  Illuminated manuscripts",
        "    https://a.example/",
        "1 match(es).",
    ]
    with pytest.raises(CommandError, match="Say what to look for"):
        call_command("search", stdout=StringIO())
