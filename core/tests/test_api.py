"""The REST API (/api/v1/): token and session authentication, adding crawls from URLs or a
file's text, listing and filtering, one record with its outputs, hold/release/retry/remove,
status and the queue, errors as JSON, the OpenAPI schema, and ``manage.py token``."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.models import ApiToken, ArchiveResult, Snapshot, Tag
from core.services.tokens import token_create, token_revoke
from core.tests.test_removal import sealed_snapshot
from core.tests.users import keeper, staff_with
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.models import queue_held

pytestmark = pytest.mark.django_db

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>News</title><id>urn:x</id>
<updated>2026-11-01T00:00:00Z</updated>
<entry><title>First post</title><link href="https://example.com/first"/><id>urn:1</id>
<updated>2026-11-01T00:00:00Z</updated><category term="blog"/></entry>
</feed>"""


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    return tmp_path


@pytest.fixture
def user():
    """A staff user holding every permission the API asks for (test_permissions.py checks who
    else may do what)."""
    return keeper("reader", password="pw")


@pytest.fixture
def api(user) -> Client:
    """A client that sends a fresh token of ``user`` with every request."""
    _token, key = token_create(username=user.username)
    return Client(headers={"Authorization": f"Bearer {key}"})


def post(client: Client, path: str, body: dict | None = None):
    return client.post(f"/api/v1{path}", body or {}, content_type="application/json")


# --- authentication ------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "Bearer nope", "Bearer vlm_wrong", "Basic abc"])
def test_without_a_valid_token_or_session_every_endpoint_answers_401(header) -> None:
    client = Client(headers={"Authorization": header} if header else {})

    for path in ["/api/v1/crawls", "/api/v1/snapshots", "/api/v1/results", "/api/v1/status"]:
        response = client.get(path)
        assert response.status_code == 401, path
        assert response.json() == {"detail": "Unauthorized"}


def test_a_revoked_token_or_an_inactive_user_no_longer_opens_it(user) -> None:
    token, key = token_create(username=user.username)
    client = Client(headers={"Authorization": f"Bearer {key}"})
    assert client.get("/api/v1/status").status_code == 200

    token_revoke(token_id=token.pk)
    assert client.get("/api/v1/status").status_code == 401

    _, other = token_create(username=user.username)
    user.is_active = False
    user.save()
    assert (
        Client(headers={"Authorization": f"Bearer {other}"}).get("/api/v1/status").status_code
        == 401
    )


def test_the_token_is_stored_only_as_its_hash_and_its_use_is_recorded(api, user) -> None:
    token = ApiToken.objects.get(user=user)
    assert len(token.key_sha256) == 64 and token.prefix.startswith("vlm_")
    assert token.last_used_at is None

    api.get("/api/v1/status")

    token.refresh_from_db()
    assert token.last_used_at is not None


def test_a_signed_in_session_works_and_changes_need_its_csrf_token(user) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    assert client.get("/api/v1/status").status_code == 200
    refused = post(client, "/crawls", {"urls": ["https://example.com/"]})
    assert refused.status_code == 403
    assert not Crawl.objects.exists()


# --- adding and reading crawls -------------------------------------------------------------------


def test_past_the_rate_limit_calls_get_429_with_retry_after(api, monkeypatch) -> None:
    from django.core.cache import cache

    from archive.api import API_THROTTLE

    cache.clear()
    monkeypatch.setattr(API_THROTTLE, "num_requests", 2)
    answers = [api.get("/api/v1/status") for _ in range(3)]

    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert answers[2].json() == {"detail": "Too many requests."}
    assert 0 < int(answers[2]["Retry-After"]) <= 60  # API_RATE counts per minute


def test_adding_urls_makes_a_crawl_of_the_caller(api, user) -> None:
    response = post(api, "/crawls", {"urls": ["https://example.com/", "https://example.org/"],
                                     "depth": 1, "tags": ["news"], "priority": 5})  # fmt: skip

    assert response.status_code == 201
    body = response.json()
    assert body["seeds"] == ["https://example.com/", "https://example.org/"]
    assert (body["status"], body["depth"], body["tags"], body["priority"]) == (
        CrawlStatus.QUEUED,
        1,
        ["news"],
        5,
    )
    assert Crawl.objects.get(pk=body["id"]).created_by == user


def test_adding_a_feeds_text_keeps_its_titles_and_tags(api) -> None:
    response = post(api, "/crawls", {"input": ATOM.decode()})

    body = response.json()
    assert response.status_code == 201
    assert body["input_report"]["format"] == "feed"
    crawl = Crawl.objects.get(pk=body["id"])
    assert crawl.seed_details == {
        "https://example.com/first": {"title": "First post", "tags": ["blog"]}
    }


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({"urls": ["ftp://example.com/"]}, 400, "only http and https URLs can be archived"),
        ({"urls": ["https://example.com/"], "depth": 11}, 400, "depth must be between 0 and 10"),
        ({"urls": ["https://example.com/"], "profile": "nope"}, 400, "unknown profile 'nope'"),
        ({}, 400, "give urls (a list) or input (a file's text): exactly one of them"),
        ({"input": "no links here"}, 400, "no URL"),
    ],
)
def test_bad_input_is_a_400_that_says_what_is_wrong(api, body, status, detail) -> None:
    response = post(api, "/crawls", body)

    assert response.status_code == status
    assert detail in response.json()["detail"]
    assert not Crawl.objects.exists()


def test_a_body_of_the_wrong_shape_is_a_422(api) -> None:
    response = post(api, "/crawls", {"urls": "https://example.com/", "depth": "deep"})

    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)


@pytest.mark.parametrize("body", ["[null, null]", "5", '"text"'])
def test_a_body_that_is_not_a_json_object_is_a_400(api, body: str) -> None:
    response = api.post("/api/v1/queue/hold", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"detail": "the request body must be a JSON object"}
    assert api.get("/api/v1/status").json()["queue"]["held"] is False


DEEP = "[" * 50_000 + "]" * 50_000  # once a RecursionError in the JSON decoder: a 500


@pytest.mark.parametrize("body", [DEEP, '{"urls": ' + DEEP + "}", '{"tags": ' + DEEP + "}"])
def test_a_body_nested_too_deeply_is_a_400_saying_so(api, body: str) -> None:
    response = api.post("/api/v1/crawls", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"detail": "the request body is nested too deeply"}
    assert not Crawl.objects.exists()


def test_an_input_nested_too_deeply_is_a_400_saying_so(api) -> None:
    response = post(api, "/crawls", {"input": DEEP, "parser": "json"})

    assert response.status_code == 400
    assert response.json() == {"detail": "api input is JSON nested too deeply"}
    assert not Crawl.objects.exists()


@pytest.mark.parametrize("sep", ["\n", "\r\n", "\t", "\x00", "\x85"])
def test_one_urls_element_is_one_url_never_two(api, sep: str) -> None:
    """An element holding a newline once became two seeds."""
    urls = ["https://c.example/", f"http://a.example/{sep}http://b.example/"]

    response = post(api, "/crawls", {"urls": urls})

    assert response.status_code == 400
    assert response.json() == {"detail": "urls[1] holds a line break or other control character"}
    assert not Crawl.objects.exists()


def test_tags_past_the_limit_are_a_400_and_make_no_tag(api, settings) -> None:
    settings.MAX_TAGS_PER_REQUEST = 3
    many = post(api, "/crawls", {"urls": ["https://example.com/"], "tags": ["a", "b", "c,d"]})
    feed = post(api, "/crawls", {"input": json.dumps(
        [{"url": f"https://example.com/{n}", "tags": [f"t{n}"]} for n in range(4)]
    )})  # fmt: skip

    for response in (many, feed):
        assert response.status_code == 400
        assert response.json() == {
            "detail": "4 different tags: one request may name at most 3 (MAX_TAGS_PER_REQUEST)"
        }
    assert not Crawl.objects.exists() and not Tag.objects.exists()
    exactly = post(api, "/crawls", {"urls": ["https://example.com/"], "tags": ["a", "b", "c"]})
    assert exactly.status_code == 201 and Tag.objects.count() == 3


@pytest.mark.parametrize("path", ["/crawls", "/snapshots", "/results"])
def test_a_page_number_past_any_archive_is_a_422_not_a_crash(api, path: str) -> None:
    """A page that large once overflowed SQLite's OFFSET (found by test_api_schema.py)."""
    response = api.get(f"/api/v1{path}?page=47480021038583971840")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "page"]


@pytest.mark.parametrize("crawl", ["0", "-3", "199122223680020611072"])
def test_a_crawl_filter_that_can_name_no_crawl_is_a_422_not_a_crash(api, crawl: str) -> None:
    """One past 64 bits once overflowed SQLite's INTEGER (found by test_api_schema.py)."""
    response = api.get(f"/api/v1/snapshots?crawl={crawl}")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "crawl"]


def test_crawls_are_listed_newest_first_paginated_and_filtered(api, django_assert_max_num_queries):
    for index in range(3):
        post(api, "/crawls", {"urls": [f"https://example.com/{index}"], "tags": [f"t{index}"]})
    held = Crawl.objects.order_by("pk").first()
    held.hold()
    held.save()

    with django_assert_max_num_queries(6):  # auth, count, page, tags, profiles: not one per crawl
        listing = api.get("/api/v1/crawls").json()
    assert listing["count"] == 3
    assert [item["seeds"][0] for item in listing["items"]] == [
        "https://example.com/2", "https://example.com/1", "https://example.com/0"
    ]  # fmt: skip
    assert [c["id"] for c in api.get("/api/v1/crawls?status=held").json()["items"]] == [held.pk]
    assert api.get("/api/v1/crawls?tag=t1").json()["count"] == 1


def test_an_unknown_crawl_is_a_404_naming_it(api) -> None:
    response = api.get("/api/v1/crawls/404")

    assert response.status_code == 404
    assert response.json() == {"detail": "no crawl 404"}


def test_hold_release_retry_and_remove_a_crawl(api) -> None:
    snapshot = sealed_snapshot()  # its favicon failed
    crawl_id = snapshot.crawl_id

    held = post(api, f"/crawls/{crawl_id}/hold", {"reason": "later"})
    assert held.status_code == 409  # a sealed crawl cannot be held
    assert "not allowed" in held.json()["detail"]

    retried = post(api, f"/crawls/{crawl_id}/retry")
    assert retried.json() == {"queued": 1}
    assert api.get(f"/api/v1/crawls/{crawl_id}").json()["status"] == CrawlStatus.STARTED

    held = post(api, f"/crawls/{crawl_id}/hold", {"reason": "later"}).json()
    assert (held["status"], held["hold_reason"]) == (CrawlStatus.HELD, "later")
    released = post(api, f"/crawls/{crawl_id}/release").json()
    assert (released["status"], released["hold_reason"]) == (CrawlStatus.QUEUED, "")

    refused = api.delete(f"/api/v1/crawls/{crawl_id}")
    assert refused.status_code == 409 and "hold it first" in refused.json()["detail"]
    post(api, f"/crawls/{crawl_id}/hold")
    assert api.delete(f"/api/v1/crawls/{crawl_id}?delete_files=true").status_code == 204
    assert not Crawl.objects.exists()
    assert not snapshot.output_dir.exists()


# --- snapshots and results -----------------------------------------------------------------------


def test_a_snapshot_comes_with_its_results_and_the_urls_of_their_files(api) -> None:
    snapshot = sealed_snapshot()

    body = api.get(f"/api/v1/snapshots/{snapshot.pk}").json()

    assert body["status"] == SnapshotStatus.SEALED
    assert body["manifest"] == f"/archive/{snapshot.pk}/manifest-sha256.txt"
    results = {result["extractor"]: result for result in body["results"]}
    assert results["title"]["files"] == [f"/archive/{snapshot.pk}/title/title.txt"]
    assert results["favicon"]["status"] == ResultStatus.FAILED
    staff = Client()
    staff.force_login(staff_with("file-reader", "core.view_snapshot"))
    manifest = staff.get(body["manifest"])
    assert manifest.status_code == 200  # the URL names the file that is served
    assert b"title/title.txt" in b"".join(manifest.streaming_content)


def test_snapshots_and_results_are_filtered(api) -> None:
    snapshot = sealed_snapshot()
    other = baker.make(Snapshot, url="https://other.example/", status=SnapshotStatus.QUEUED)

    by_crawl = api.get(f"/api/v1/snapshots?crawl={snapshot.crawl_id}").json()
    by_url = api.get("/api/v1/snapshots?url_contains=OTHER").json()
    failed = api.get("/api/v1/results?status=failed").json()
    of_one = api.get(f"/api/v1/results?snapshot={snapshot.pk}&extractor=title").json()

    assert [item["id"] for item in by_crawl["items"]] == [str(snapshot.pk)]
    assert [item["id"] for item in by_url["items"]] == [str(other.pk)]
    assert [item["extractor"] for item in failed["items"]] == ["favicon"]
    assert of_one["count"] == 1


def test_retry_rearchive_and_remove_a_snapshot(api) -> None:
    snapshot = sealed_snapshot()

    assert post(api, f"/snapshots/{snapshot.pk}/retry", {"extractor": "title"}).json() == {
        "queued": 0
    }
    assert post(api, f"/snapshots/{snapshot.pk}/retry").json() == {"queued": 1}
    busy = post(api, f"/snapshots/{snapshot.pk}/rearchive")
    assert busy.status_code == 409  # started again by the retry: not final

    ArchiveResult.objects.filter(snapshot=snapshot).delete()
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.FAILED)
    again = post(api, f"/snapshots/{snapshot.pk}/rearchive")
    assert again.status_code == 200 and again.json()["status"] == SnapshotStatus.QUEUED

    refused = api.delete(f"/api/v1/snapshots/{snapshot.pk}")
    assert refused.status_code == 409
    assert api.delete("/api/v1/snapshots/00000000-0000-0000-0000-000000000000").status_code == 404


# --- status, the queue, the schema ---------------------------------------------------------------


def test_status_and_holding_the_whole_queue(api) -> None:
    post(api, "/crawls", {"urls": ["https://example.com/"]})

    status = api.get("/api/v1/status").json()
    assert status["counts"]["crawl"]["queued"] == 1
    assert status["queue"] == {"held": False, "reason": "", "held_since": None}
    assert set(status["disk_guard"]) == {"path", "used_percent", "hold_percent", "held"}

    held = post(api, "/queue/hold", {"reason": "moving storage"}).json()
    assert (held["held"], held["reason"]) == (True, "moving storage")
    assert queue_held()
    assert post(api, "/queue/hold").status_code == 409
    assert post(api, "/queue/release").json()["held"] is False


def test_the_openapi_schema_lists_every_endpoint_and_the_bearer_scheme() -> None:
    schema = Client().get("/api/v1/openapi.json").json()

    expected = {
        "/api/v1/crawls",
        "/api/v1/crawls/{crawl_id}/hold",
        "/api/v1/snapshots/{snapshot_id}",
        "/api/v1/results",
        "/api/v1/status",
        "/api/v1/queue/hold",
    }
    assert expected <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"


# --- manage.py token -----------------------------------------------------------------------------


def test_token_create_list_and_revoke(user) -> None:
    out, err = StringIO(), StringIO()
    call_command("token", "create", "reader", "--name", "backup script", stdout=out, stderr=err)
    key = out.getvalue().strip()
    token = ApiToken.objects.get()
    assert key.startswith(token.prefix) and "shown once" in err.getvalue()
    assert (
        Client(headers={"Authorization": f"Bearer {key}"}).get("/api/v1/status").status_code == 200
    )

    listing = StringIO()
    call_command("token", "list", stdout=listing)
    assert f"{token.prefix}…  reader  last used" in listing.getvalue()
    assert key not in listing.getvalue()

    call_command("token", "revoke", str(token.pk), stdout=StringIO())
    assert (
        Client(headers={"Authorization": f"Bearer {key}"}).get("/api/v1/status").status_code == 401
    )
    with pytest.raises(CommandError, match="no user 'ghost'"):
        call_command("token", "create", "ghost", stdout=StringIO(), stderr=StringIO())


def test_the_docs_page_uses_vellums_own_swagger_files_not_a_cdn() -> None:
    """Offline, and no third-party script runs beside a signed-in session."""
    html = Client().get("/api/v1/docs").content.decode()

    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "cdn." not in html


def test_a_path_no_route_matches_is_a_json_404(api) -> None:
    # A line break in the archived URL of /urls/<url>/captures matches no route at all.
    response = api.get("/api/v1/urls/https://a.example/%0Aline/captures")
    page = Client().get("/no-such-page/")

    assert response.status_code == 404
    assert response.json() == {"detail": "no such API path"}
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
