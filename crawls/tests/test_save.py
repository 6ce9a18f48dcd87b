"""Saving in one click (issue 21, item 3): ``/save/<url>`` from a signed-in session or with
``?token=``, ``POST /api/v1/save``, and a repeat within SAVE_DEDUP_MINUTES landing on the first
save (core/services/saves.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from model_bakery import baker

from core.choices import SnapshotStatus
from core.models import Snapshot
from core.services.personas import persona_save
from core.services.saves import url_save
from core.services.tokens import token_create
from core.tests.users import permissions
from crawls.models import Crawl, Profile, SaveDefaults

pytestmark = pytest.mark.django_db

PAGE = "https://example.com/article"
COOKIES = "# Netscape HTTP Cookie File\nexample.com\tFALSE\t/\tFALSE\t0\tsession\tabc123\n"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.SAVE_DEDUP_MINUTES = 10
    return tmp_path


def contributor(username: str = "ada"):
    """An active user who is not staff and may add crawls (crawls.add_crawl)."""
    user = get_user_model().objects.create_user(username)
    user.user_permissions.set(permissions("crawls.add_crawl"))
    return user


@pytest.fixture
def user():
    return contributor()


@pytest.fixture
def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_save_queues_the_url_for_its_user_and_opens_the_crawls_live_page(
    signed_in: Client, user
) -> None:
    response = signed_in.get(f"/save/{PAGE}")

    crawl = Crawl.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/crawl/{crawl.pk}/"
    assert crawl.seed_list() == [PAGE]
    assert crawl.created_by == user
    assert crawl.status == "queued" and crawl.depth == 0 and crawl.profile is None
    progress = signed_in.get(response["Location"])
    assert progress.status_code == 200
    assert PAGE in progress.content.decode() and "hx-get" in progress.content.decode()


def test_a_second_save_within_the_window_lands_on_the_first(signed_in: Client) -> None:
    first = signed_in.get(f"/save/{PAGE}")
    second = signed_in.get(f"/save/{PAGE}")

    assert second.status_code == 302
    assert second["Location"] == first["Location"]
    assert Crawl.objects.count() == 1


def test_a_save_after_the_window_queues_the_url_again(signed_in: Client) -> None:
    first = signed_in.get(f"/save/{PAGE}")
    Crawl.objects.update(created_at=timezone.now() - timedelta(minutes=11))

    second = signed_in.get(f"/save/{PAGE}")

    assert second["Location"] != first["Location"]
    assert Crawl.objects.count() == 2


def test_a_window_of_zero_queues_every_save(signed_in: Client, settings) -> None:
    settings.SAVE_DEDUP_MINUTES = 0

    signed_in.get(f"/save/{PAGE}")
    signed_in.get(f"/save/{PAGE}")

    assert Crawl.objects.count() == 2


def test_a_failed_capture_does_not_swallow_the_next_save(user) -> None:
    first = url_save(url=PAGE, created_by=user)
    baker.make(Snapshot, crawl=first.crawl, url=PAGE, status=SnapshotStatus.FAILED)

    again = url_save(url=PAGE, created_by=user)

    assert not again.repeat and again.crawl != first.crawl


def test_a_repeat_of_a_page_captured_in_a_larger_crawl_opens_that_capture(
    signed_in: Client, user
) -> None:
    crawl = baker.make(Crawl, seeds=f"https://example.com/\n{PAGE}", created_by=user)
    snapshot = baker.make(Snapshot, crawl=crawl, url=PAGE, status=SnapshotStatus.SEALED)

    with CaptureQueriesContext(connection) as queries:
        response = signed_in.get(f"/save/{PAGE}")

    assert response["Location"] == f"/snapshot/{snapshot.pk}/"
    assert Crawl.objects.count() == 1
    # The larger crawl's seed list and seed details (they grow with it) are not read.
    selects = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert not [sql for sql in selects if '"crawls_crawl"."seed' in sql.split(" FROM ")[0]]


def test_another_users_save_is_never_the_one_landed_on(signed_in: Client) -> None:
    theirs = url_save(url=PAGE, created_by=contributor("grace"))

    response = signed_in.get(f"/save/{PAGE}")

    assert response["Location"] != f"/crawl/{theirs.crawl.pk}/"
    assert Crawl.objects.count() == 2


def test_the_query_string_belongs_to_the_url_but_the_token(user) -> None:
    key = token_create(username=user.username)[1]

    response = Client().get(f"/save/https://example.com/search?q=vellum&token={key}&page=2")

    crawl = Crawl.objects.get()
    assert response.status_code == 302
    assert crawl.seed_list() == ["https://example.com/search?q=vellum&page=2"]
    assert crawl.created_by == user


def test_a_web_vellum_link_and_an_encoded_url_are_saved_as_the_url(signed_in: Client) -> None:
    signed_in.get("/save/web+vellum:https%3A%2F%2Fexample.com%2Fshared%3Fid%3D7")

    assert Crawl.objects.get().seed_list() == ["https://example.com/shared?id=7"]


def test_a_url_that_cannot_be_archived_is_refused_saying_why(signed_in: Client) -> None:
    response = signed_in.get("/save/ftp://example.com/file")

    assert response.status_code == 400
    assert "ftp" in response.content.decode()
    assert not Crawl.objects.exists()


def test_visitors_are_sent_to_sign_in_and_back() -> None:
    response = Client().get(f"/save/{PAGE}")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/save/")
    assert not Crawl.objects.exists()


def test_a_bad_token_and_a_user_without_the_permission_are_refused() -> None:
    plain = get_user_model().objects.create_user("plain")
    key = token_create(username=plain.username)[1]

    forged = Client().get(f"/save/{PAGE}?token=vlm_forged")
    unpermitted = Client().get(f"/save/{PAGE}?token={key}")

    assert forged.status_code == 403 and "token" in forged.content.decode()
    assert unpermitted.status_code == 403 and "staff" in unpermitted.content.decode()
    assert not Crawl.objects.exists()


def test_an_embedded_request_queues_nothing(signed_in: Client) -> None:
    response = signed_in.get(f"/save/{PAGE}", headers={"Sec-Fetch-Dest": "image"})

    assert response.status_code == 403
    assert not Crawl.objects.exists()


def test_the_add_page_offers_the_bookmarklet_and_the_share_target(signed_in: Client) -> None:
    page = signed_in.get("/add/").content.decode()

    assert "javascript:void(location.href='http://testserver/save/'" in page
    assert 'registerProtocolHandler("web+vellum", "http://testserver/save/%s")' in page


# --- POST /api/v1/save -----------------------------------------------------------------------


def api(user) -> Client:
    return Client(headers={"Authorization": f"Bearer {token_create(username=user.username)[1]}"})


def save_call(client: Client, url: str):
    return client.post("/api/v1/save", json.dumps({"url": url}), content_type="application/json")


def test_the_api_saves_and_a_repeat_answers_with_the_first(user) -> None:
    client = api(user)

    first = save_call(client, PAGE)
    second = save_call(client, PAGE)

    assert first.status_code == 201
    assert first.json()["repeat"] is False
    assert first.json()["crawl"]["seeds"] == [PAGE]
    assert first.json()["page"] == f"/crawl/{first.json()['crawl']['id']}/"
    assert second.status_code == 200
    assert second.json()["repeat"] is True
    assert second.json()["crawl"]["id"] == first.json()["crawl"]["id"]
    assert Crawl.objects.get().created_by == user


def test_the_api_refuses_a_bad_url_saying_why(user) -> None:
    response = save_call(api(user), "javascript:alert(1)")

    assert response.status_code == 400
    assert "detail" in response.json()
    assert not Crawl.objects.exists()


def test_a_user_signs_in_and_out_on_vellums_own_pages(user) -> None:
    user.set_password("a long enough passphrase")
    user.save()
    client = Client()

    signed = client.post(
        "/login/?next=/add/", {"username": "ada", "password": "a long enough passphrase",
                               "next": "/add/"}
    )  # fmt: skip
    header = client.get("/add/").content.decode()
    client.post("/logout/")

    assert signed.status_code == 302 and signed["Location"] == "/add/"
    assert "Sign out" in header
    assert client.get("/add/")["Location"].startswith("/login/")


def test_signing_in_on_the_sign_in_page_itself_opens_the_archive(user) -> None:
    """The header's "Sign in" and signing out lead to /login/ with no ``next``: signing in
    there opens the archive's index (Django's default, /accounts/profile/, is no page here)."""
    user.set_password("a long enough passphrase")
    user.save()
    client = Client()

    signed = client.post("/login/", {"username": "ada", "password": "a long enough passphrase"})

    assert signed.status_code == 302 and signed["Location"] == "/"
    assert client.get(signed["Location"]).status_code == 200  # a contributor reads its own


def test_a_save_runs_with_the_users_own_profile_and_persona(user, signed_in: Client) -> None:
    profile = Profile.objects.create(name="quick", steps=["headers", "title"])
    persona = persona_save(name="reader", cookies=COOKIES)
    SaveDefaults.objects.create(user=user, profile=profile, persona=persona)
    other = contributor("bob")

    mine = url_save(url=PAGE, created_by=user).crawl
    theirs = url_save(url=PAGE, created_by=other).crawl
    by_link = signed_in.get("/save/https://example.com/other")

    assert (mine.profile, mine.persona) == (profile, persona)
    assert (theirs.profile, theirs.persona) == (None, None)  # no defaults: as add does
    assert by_link.status_code == 302
    linked = Crawl.objects.get(seeds="https://example.com/other")
    assert (linked.profile, linked.persona) == (profile, persona)


def test_save_defaults_left_empty_save_as_add_does(user) -> None:
    SaveDefaults.objects.create(user=user)

    crawl = url_save(url=PAGE, created_by=user).crawl

    assert (crawl.profile, crawl.persona) == (None, None)
