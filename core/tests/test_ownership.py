"""Users (issue 21, item 4): a user who is not staff but holds ``crawls.add_crawl`` sees,
searches, replays and downloads only the captures of the crawls they added; staff holding the
view permissions see all; with PUBLIC_ARCHIVE on, everyone also sees what is marked public
(SnapshotQuerySet.visible_to, CrawlQuerySet.visible_to, core/web/access.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from core.folder.wacz import WACZ_NAME
from core.models import Snapshot
from core.services.search import search_snapshot_ids
from core.services.tokens import token_create
from core.tests.test_pages import indexed
from core.tests.test_removal import sealed_snapshot
from core.tests.users import keeper, permissions
from crawls.models import Crawl

pytestmark = pytest.mark.django_db

WORD = "palimpsest"


@pytest.fixture(autouse=True)
def own_data_dir(data_dir: Path, settings) -> Path:
    settings.PUBLIC_ARCHIVE = False
    return data_dir


def contributor(username: str):
    """An active user who is not staff and may add crawls (crawls.add_crawl)."""
    user = get_user_model().objects.create_user(username)
    user.user_permissions.set(permissions("crawls.add_crawl"))
    return user


def added_by(snapshot: Snapshot, user, **fields) -> Snapshot:
    Crawl.objects.filter(pk=snapshot.crawl_id).update(created_by=user, **fields)
    return Snapshot.objects.select_related("crawl").get(pk=snapshot.pk)


@pytest.fixture
def ada():
    return contributor("ada")


@pytest.fixture
def grace():
    return contributor("grace")


@pytest.fixture
def adas(ada) -> Snapshot:
    """Ada's sealed capture, with its files and a search row holding WORD."""
    return added_by(sealed_snapshot(), ada)


@pytest.fixture
def graces(grace) -> Snapshot:
    """Grace's capture, found by the same word."""
    return added_by(indexed("https://b.example/", f"Grace's {WORD}", f"A {WORD} page."), grace)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bearer(user) -> Client:
    return Client(headers={"Authorization": f"Bearer {token_create(username=user.username)[1]}"})


# --- the querysets -------------------------------------------------------------------------------


def test_each_contributor_sees_their_own_and_staff_see_all(ada, grace, adas, graces) -> None:
    staff = keeper()

    assert list(Snapshot.objects.visible_to(ada)) == [adas]
    assert list(Snapshot.objects.visible_to(grace)) == [graces]
    assert set(Snapshot.objects.visible_to(staff)) == {adas, graces}
    assert list(Crawl.objects.visible_to(ada)) == [adas.crawl]
    assert set(Crawl.objects.visible_to(staff)) == {adas.crawl, graces.crawl}


def test_a_user_without_the_add_permission_sees_nothing(adas) -> None:
    plain = get_user_model().objects.create_user("plain")

    assert not Snapshot.objects.visible_to(plain).exists()
    assert not Crawl.objects.visible_to(plain).exists()


def test_public_ones_are_seen_by_everyone_only_when_asked_for(ada, adas, graces) -> None:
    added_by(graces, graces.crawl.created_by, public=True)
    anonymous = Client().get("/").wsgi_request.user

    assert list(Snapshot.objects.visible_to(anonymous, with_public=True)) == [graces]
    assert not Snapshot.objects.visible_to(anonymous).exists()
    assert set(Snapshot.objects.visible_to(ada, with_public=True)) == {adas, graces}


# --- pages, search and files ---------------------------------------------------------------------


def test_a_contributor_lists_and_searches_only_their_own(ada, adas, graces) -> None:
    mine = indexed("https://a.example/mine", f"Ada's {WORD}", f"Another {WORD}.")
    added_by(mine, ada)
    client = signed_in(ada)

    index = client.get("/").content.decode()
    search = client.get("/", {"q": WORD}).content.decode()

    assert str(adas.pk) in index and str(mine.pk) in index and str(graces.pk) not in index
    assert str(mine.pk) in search and str(graces.pk) not in search
    assert search_snapshot_ids(WORD, within=Snapshot.objects.visible_to(ada)) == [mine.pk]
    assert set(search_snapshot_ids(WORD)) == {mine.pk, graces.pk}


def test_a_contributor_cannot_open_another_users_capture(grace, adas) -> None:
    client = signed_in(grace)
    url = adas.url

    pages = {
        "snapshot": client.get(reverse("core:snapshot", args=[adas.pk])),
        "file": client.get(reverse("core:snapshot_file", args=[adas.pk, "title/title.txt"])),
        "manifest": client.get(
            reverse("core:snapshot_file", args=[adas.pk, "manifest-sha256.txt"])
        ),
        "timeline": client.get(reverse("core:url_timeline", kwargs={"url": url})),
        "diff": client.get(
            reverse("core:url_diff", kwargs={"url": url, "before": adas.pk, "after": adas.pk})
        ),
        "timegate": client.get(reverse("core:timegate", kwargs={"url": url})),
        "memento": client.get(reverse("core:memento", kwargs={"url": url, "timestamp": "2024"})),
        "timemap": client.get(reverse("core:timemap", kwargs={"url": url})),
        "crawl": client.get(reverse("crawls:progress", args=[adas.crawl_id])),
        "progress": client.get(reverse("crawls:progress_fragment", args=[adas.crawl_id])),
    }

    assert {name: r.status_code for name, r in pages.items()} == dict.fromkeys(pages, 404)
    owner = signed_in(adas.crawl.created_by)
    assert owner.get(reverse("core:snapshot", args=[adas.pk])).status_code == 200
    file = reverse("core:snapshot_file", args=[adas.pk, "title/title.txt"])
    assert owner.get(file).status_code == 200
    assert owner.get(reverse("core:timemap", kwargs={"url": url})).status_code == 200


def test_only_a_reader_of_the_capture_is_handed_its_replay_and_view_links(
    grace, adas, settings
) -> None:
    """Replay and view links are capabilities (core/web/origins.py, viewing.py): the snapshot
    page is the only place that hands them out, so a user it refuses never holds one."""
    (adas.output_dir / WACZ_NAME).write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip
    page = reverse("core:snapshot", args=[adas.pk])

    theirs = signed_in(adas.crawl.created_by).get(page, HTTP_HOST="localhost")
    refused = signed_in(grace).get(page, HTTP_HOST="localhost")

    assert theirs.status_code == 200
    assert "/view/" in theirs.content.decode() and "/replay/" in theirs.content.decode()
    assert refused.status_code == 404
    assert "/view/" not in refused.content.decode()
    assert "/replay/" not in refused.content.decode()


# --- the API -------------------------------------------------------------------------------------


def test_the_api_gives_a_contributor_only_their_own(ada, grace, adas, graces) -> None:
    client = bearer(grace)

    snapshots = client.get("/api/v1/snapshots").json()["items"]
    crawls = client.get("/api/v1/crawls").json()["items"]
    results = client.get("/api/v1/results").json()["items"]
    one = client.get(f"/api/v1/snapshots/{adas.pk}")
    crawl = client.get(f"/api/v1/crawls/{adas.crawl_id}")
    captures = client.get(f"/api/v1/urls/{adas.url}/captures")
    filtered = client.get("/api/v1/results", {"snapshot": str(adas.pk)}).json()["items"]

    assert [item["id"] for item in snapshots] == [str(graces.pk)]
    assert [item["id"] for item in crawls] == [graces.crawl_id]
    assert all(item["snapshot_id"] == str(graces.pk) for item in results)
    assert one.status_code == 404 and crawl.status_code == 404
    assert captures.status_code == 404
    assert filtered == []
    mine = bearer(ada)
    assert mine.get(f"/api/v1/snapshots/{adas.pk}").status_code == 200
    assert [item["id"] for item in mine.get("/api/v1/snapshots").json()["items"]] == [str(adas.pk)]
    assert mine.get(f"/api/v1/urls/{adas.url}/captures").status_code == 200


def test_a_contributor_adds_through_the_api_but_changes_nothing(grace, adas) -> None:
    client = bearer(grace)
    body = json.dumps({"urls": ["https://example.com/"]})

    added = client.post("/api/v1/crawls", body, content_type="application/json")
    held = client.post(f"/api/v1/crawls/{adas.crawl_id}/hold", "{}", "application/json")
    removed = client.delete(f"/api/v1/snapshots/{adas.pk}")

    assert added.status_code == 201
    assert Crawl.objects.get(pk=added.json()["id"]).created_by == grace
    assert held.status_code == 403 and removed.status_code == 403
    assert Snapshot.objects.filter(pk=adas.pk).exists()


def test_staff_see_every_users_capture(adas, graces) -> None:
    staff = keeper()
    client = signed_in(staff)

    index = client.get("/").content.decode()
    listed = bearer(staff).get("/api/v1/snapshots").json()["items"]

    assert str(adas.pk) in index and str(graces.pk) in index
    assert {item["id"] for item in listed} == {str(adas.pk), str(graces.pk)}
    assert client.get(reverse("core:snapshot", args=[graces.pk])).status_code == 200


# --- PUBLIC_ARCHIVE ------------------------------------------------------------------------------


def test_a_public_archive_shows_visitors_only_what_is_marked_public(adas, graces, settings) -> None:
    settings.PUBLIC_ARCHIVE = True
    added_by(graces, graces.crawl.created_by, public=True)
    visitor = Client()

    index = visitor.get("/").content.decode()
    search = visitor.get("/", {"q": WORD}).content.decode()

    assert str(graces.pk) in index and str(adas.pk) not in index
    assert str(graces.pk) in search
    assert visitor.get(reverse("core:snapshot", args=[graces.pk])).status_code == 200
    assert visitor.get(reverse("core:snapshot", args=[adas.pk])).status_code == 404
    file = reverse("core:snapshot_file", args=[adas.pk, "title/title.txt"])
    assert visitor.get(file).status_code == 404


def test_the_admin_marks_crawls_public_and_private(adas, graces, admin_client: Client) -> None:
    ids = [str(adas.crawl_id), str(graces.crawl_id)]
    changelist = reverse("admin:crawls_crawl_changelist")

    admin_client.post(changelist, {"action": "mark_public", "_selected_action": ids})
    public = set(Crawl.objects.filter(public=True).values_list("pk", flat=True))
    admin_client.post(changelist, {"action": "mark_private", "_selected_action": ids[:1]})

    assert public == {adas.crawl_id, graces.crawl_id}
    assert list(Crawl.objects.filter(public=True).values_list("pk", flat=True)) == [graces.crawl_id]


def test_a_user_without_the_change_permission_cannot_mark_a_crawl_public(adas) -> None:
    client = signed_in(keeper("viewer"))
    viewer = get_user_model().objects.get(username="viewer")
    viewer.user_permissions.set(permissions("crawls.view_crawl"))
    changelist = reverse("admin:crawls_crawl_changelist")

    client.post(changelist, {"action": "mark_public", "_selected_action": [str(adas.crawl_id)]})

    assert not Crawl.objects.filter(public=True).exists()
