"""Who may do what (core/web/permissions.py): every operation of the API's own OpenAPI schema, every
view of crawls/urls.py and every archive page of core/urls.py, called by each kind of user,
against the rule tables below, which state the admin's rules (core/admin/permissions.py):
reading needs view, adding a crawl add, a state change change, a removal delete, all as an
active staff user; superusers hold every permission. Where a rule is marked OWN, a user holding
``crawls.add_crawl`` (staff or not) is let in too, and reads only what they added (here: nothing,
the snapshot acted on is nobody's). A refused call changes nothing in the database nor in
DATA_DIR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from archive.api import api
from core import urls as core_urls
from core.models import ApiToken, Snapshot
from core.services.tokens import token_create
from core.tests.test_removal import sealed_snapshot
from core.tests.users import permissions, staff_with
from crawls import urls as crawl_urls
from crawls.models import Crawl
from orchestrator.models import queue_held

pytestmark = pytest.mark.django_db

# A rule that also lets in a user holding crawls.add_crawl, for their own records.
OWN = "own"

# What each operation of the API needs, as the admin's matching action does.
API_RULES = {
    ("GET", "/api/v1/crawls"): ("crawls.view_crawl", OWN),
    ("POST", "/api/v1/crawls"): ("crawls.add_crawl", OWN),
    ("POST", "/api/v1/save"): ("crawls.add_crawl", OWN),
    ("GET", "/api/v1/crawls/{crawl_id}"): ("crawls.view_crawl", OWN),
    ("POST", "/api/v1/crawls/{crawl_id}/hold"): "crawls.change_crawl",
    ("POST", "/api/v1/crawls/{crawl_id}/release"): "crawls.change_crawl",
    ("POST", "/api/v1/crawls/{crawl_id}/retry"): "crawls.change_crawl",
    ("DELETE", "/api/v1/crawls/{crawl_id}"): "crawls.delete_crawl",
    ("GET", "/api/v1/snapshots"): ("core.view_snapshot", OWN),
    ("GET", "/api/v1/snapshots/{snapshot_id}"): ("core.view_snapshot", OWN),
    ("POST", "/api/v1/snapshots/{snapshot_id}/retry"): "core.change_snapshot",
    ("POST", "/api/v1/snapshots/{snapshot_id}/rearchive"): "core.change_snapshot",
    ("DELETE", "/api/v1/snapshots/{snapshot_id}"): "core.delete_snapshot",
    ("GET", "/api/v1/results"): ("core.view_archiveresult", OWN),
    ("GET", "/api/v1/urls/{url}/captures"): ("core.view_snapshot", OWN),
    ("GET", "/api/v1/status"): "orchestrator.view_queuestate",
    ("POST", "/api/v1/queue/hold"): "orchestrator.change_queuestate",
    ("POST", "/api/v1/queue/release"): "orchestrator.change_queuestate",
}
# The bodies and query strings that make each call do its work when allowed.
BODIES = {
    ("POST", "/api/v1/crawls"): {"urls": ["https://example.com/"], "tags": ["new"]},
    ("POST", "/api/v1/save"): {"url": "https://example.com/saved"},
    ("POST", "/api/v1/crawls/{crawl_id}/hold"): {"reason": "checking"},
    ("POST", "/api/v1/queue/hold"): {"reason": "checking"},
}
QUERIES = {"DELETE": "?delete_files=true"}

# The views of crawls/urls.py (each by method) and what they need.
VIEW_RULES = {
    ("GET", "crawls:add"): ("crawls.add_crawl", OWN),
    ("POST", "crawls:add"): ("crawls.add_crawl", OWN),
    ("GET", "crawls:save"): ("crawls.add_crawl", OWN),
    ("GET", "crawls:progress"): ("crawls.view_crawl", OWN),
    ("GET", "crawls:progress_fragment"): ("crawls.view_crawl", OWN),
}

# Each kind of user: the permissions a staff user holds ("*": a superuser), or how it is refused.
KINDS = {
    "anonymous": None,
    "non-staff": "non-staff",
    "non-staff, add": "non-staff, add",
    "inactive": "inactive",
    "staff, no permissions": set(),
    "staff, view only": {
        "crawls.view_crawl",
        "core.view_snapshot",
        "core.view_archiveresult",
        "orchestrator.view_queuestate",
    },
    "staff, add only": {"crawls.add_crawl"},
    "staff, change": {
        "crawls.change_crawl",
        "core.change_snapshot",
        "orchestrator.change_queuestate",
    },
    "staff, delete": {"crawls.delete_crawl", "core.delete_snapshot"},
    "superuser": "*",
}


def operations(schema: dict) -> list[tuple[str, str]]:
    """``(method, path)`` of every operation of an OpenAPI schema."""
    return [(method.upper(), path) for path, ops in schema["paths"].items() for method in ops]


# The schema that /api/v1/openapi.json serves, read at collection time (before any test's
# settings allow the test client's host); the first test checks that it is the one served.
OPERATIONS = operations(api.get_openapi_schema())


@pytest.fixture(autouse=True)
def own_data_dir(data_dir: Path) -> Path:
    """Every test here has a DATA_DIR of its own (conftest.py's data_dir)."""
    return data_dir


@pytest.fixture
def sealed() -> Snapshot:
    """A sealed snapshot with its folder, in a sealed crawl: every operation can act on it."""
    return sealed_snapshot()


def make_user(kind: str):
    """The user of ``kind`` (KINDS), or None for anonymous."""
    perms = KINDS[kind]
    if perms is None:
        return None
    if perms == "*":
        return get_user_model().objects.create_superuser("root", "root@example.com")
    if perms == "non-staff":
        return get_user_model().objects.create_user("member")
    if perms == "non-staff, add":
        user = get_user_model().objects.create_user("contributor")
        user.user_permissions.set(permissions("crawls.add_crawl"))
        return user
    if perms == "inactive":
        return staff_with("gone", *KINDS["staff, view only"], is_active=False)
    return staff_with("staff", *sorted(perms))


def holds(kind: str, perm: str) -> bool:
    perms = KINDS[kind]
    return perms == "*" or (isinstance(perms, set) and perm in perms)


def allowed(kind: str, rule: str | tuple[str, str]) -> bool:
    """Whether a user of ``kind`` is let in by ``rule`` (a permission, or (permission, OWN))."""
    perm, own = rule if isinstance(rule, tuple) else (rule, "")
    contributor = kind == "non-staff, add" or holds(kind, "crawls.add_crawl")
    return holds(kind, perm) or (own == OWN and contributor)


def reads_all(kind: str, perm: str) -> bool:
    """Whether a user of ``kind`` reads every record (staff holding ``perm``), not only the
    records they added."""
    return KINDS[kind] != "non-staff, add" and holds(kind, perm)


def api_client(kind: str) -> Client:
    """A client sending the token of a user of ``kind`` (none for anonymous). An inactive
    user's token was made while it was active."""
    user = make_user(kind)
    if user is None:
        return Client()
    if not user.is_active:
        user.is_active = True
        user.save()
        key = token_create(username=user.username)[1]
        user.is_active = False
        user.save()
    else:
        key = token_create(username=user.username)[1]
    return Client(headers={"Authorization": f"Bearer {key}"})


def db_state() -> dict[str, list[tuple]]:
    """Every row of every table but the tokens' (whose last use is recorded) and the sessions',
    as tuples of column values by model label; the many-to-many tables too (auto-created
    models). values_list rather than Django's serializers: this runs twice a test, and the
    file took 68.0 s instead of 73.6 s on PostgreSQL."""
    skipped = {ApiToken, apps.get_model("sessions", "Session")}
    models = [model for model in apps.get_models(include_auto_created=True) if model not in skipped]
    return {model._meta.label: list(model.objects.order_by("pk").values_list()) for model in models}


def disk_state(root: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(path.relative_to(root)), path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
    )


def call_api(client: Client, method: str, path: str, snapshot: Snapshot):
    url = path.format(crawl_id=snapshot.crawl_id, snapshot_id=snapshot.pk, url=snapshot.url)
    url += QUERIES.get(method, "")
    body = BODIES.get((method, path))
    if body is None:
        return client.generic(method, url)
    return client.generic(method, url, json.dumps(body), content_type="application/json")


def test_the_rule_table_names_every_operation_of_the_schema() -> None:
    served = operations(Client().get("/api/v1/openapi.json").json())
    assert sorted(served) == sorted(OPERATIONS) == sorted(API_RULES)
    for path in api.get_openapi_schema()["paths"].values():
        for operation in path.values():
            assert "403" in operation["responses"]


def test_the_rule_table_names_every_view_of_crawls_urls() -> None:
    names = {f"crawls:{pattern.name}" for pattern in crawl_urls.urlpatterns}
    assert names == {name for _method, name in VIEW_RULES}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_every_api_operation_obeys_the_admins_rules(
    kind: str, method: str, path: str, sealed: Snapshot, data_dir: Path
) -> None:
    client = api_client(kind)
    before = (db_state(), disk_state(data_dir))

    response = call_api(client, method, path, sealed)

    if allowed(kind, API_RULES[(method, path)]):
        assert response.status_code not in (401, 403), response.content
        assert response.status_code < 500, response.content
        return
    expected = 401 if kind in ("anonymous", "inactive") else 403
    assert response.status_code == expected, response.content
    assert "detail" in response.json()
    assert (db_state(), disk_state(data_dir)) == before


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("method", "name"), list(VIEW_RULES))
def test_every_crawl_view_obeys_the_admins_rules(
    kind: str, method: str, name: str, sealed: Snapshot, data_dir: Path
) -> None:
    client = Client()
    user = make_user(kind)
    if user is not None:
        client.force_login(user)  # an inactive user's session opens nothing (ModelBackend)
    kwargs = {
        "crawls:add": {},
        "crawls:save": {"url": "https://example.com/saved"},
    }.get(name, {"crawl_id": sealed.crawl_id})
    url = reverse(name, kwargs=kwargs)
    before = (db_state(), disk_state(data_dir))

    if method == "POST":
        response = client.post(url, {"urls": "https://example.com/", "parser": "auto",
                                     "depth": "0", "tags": "new", "profile": ""})  # fmt: skip
    else:
        response = client.get(url)

    rule = VIEW_RULES[(method, name)]
    if allowed(kind, rule):
        if name.startswith("crawls:progress") and not reads_all(kind, rule[0]):
            assert response.status_code == 404  # not their crawl
            return
        assert response.status_code in (200, 302), response.content
        if response.status_code == 302:
            assert response["Location"].startswith("/crawl/")  # the new crawl, not sign-in
        return
    if kind in ("anonymous", "inactive"):
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")
    else:
        assert response.status_code == 403
    assert (db_state(), disk_state(data_dir)) == before


# --- the issue's reproductions -------------------------------------------------------------------


def test_a_non_staff_token_cannot_add_a_crawl_nor_hold_the_queue(sealed: Snapshot) -> None:
    client = api_client("non-staff")

    added = call_api(client, "POST", "/api/v1/crawls", sealed)
    held = call_api(client, "POST", "/api/v1/queue/hold", sealed)

    assert added.status_code == 403 and "staff" in added.json()["detail"]
    assert Crawl.objects.count() == 1  # the sealed snapshot's own
    assert held.status_code == 403
    assert not queue_held()


def test_a_view_only_token_cannot_hold_nor_remove_a_crawl_with_its_files(sealed: Snapshot) -> None:
    client = api_client("staff, view only")
    crawl_id, folder = sealed.crawl_id, sealed.output_dir

    held = client.post(f"/api/v1/crawls/{crawl_id}/hold", {}, content_type="application/json")
    removed = client.delete(f"/api/v1/crawls/{crawl_id}?delete_files=true")

    assert held.status_code == 403
    assert held.json() == {"detail": "permission crawls.change_crawl is needed"}
    assert removed.status_code == 403
    assert removed.json() == {"detail": "permission crawls.delete_crawl is needed"}
    assert Crawl.objects.filter(pk=crawl_id).exists() and Snapshot.objects.filter(pk=sealed.pk)
    assert folder.is_dir() and (folder / "title/title.txt").is_file()
    assert client.get(f"/api/v1/crawls/{crawl_id}").status_code == 200  # what it may do


def test_a_staff_session_obeys_the_same_rules_as_a_token(sealed: Snapshot) -> None:
    client = Client()
    client.force_login(staff_with("staff", "crawls.view_crawl"))

    assert client.get("/api/v1/crawls").status_code == 200
    assert client.get("/api/v1/snapshots").status_code == 403
    assert client.post("/api/v1/queue/hold", {}, content_type="application/json").status_code == 403


# --- the archive's own pages (core/urls.py) ------------------------------------------------------

# The pages that show what was archived need what the admin's snapshot list needs.
READER_VIEWS = {
    "core:index": {},
    "core:snapshot": {"snapshot_id": "{snapshot_id}"},
    "core:snapshot_file": {"snapshot_id": "{snapshot_id}", "path": "title/title.txt"},
    "core:snapshot_wacz": {"snapshot_id": "{snapshot_id}"},
    "core:url_timeline": {"url": "{url}"},
    "core:url_diff": {"url": "{url}", "before": "{snapshot_id}", "after": "{snapshot_id}"},
    "core:memento": {"url": "{url}", "timestamp": "2024"},
    "core:timegate": {"url": "{url}"},
    "core:timemap": {"url": "{url}"},
}
# What they answer a reader allowed in, when not 200: a redirect to the capture found.
READER_REDIRECTS = {"core:memento", "core:timegate"}
# Open to anyone, on purpose: replay answers on its own host to a signed link (a capability,
# core/web/origins.py) and never sees the app's session; the public keys are what verifies a
# snapshot's signature without Vellum. A view link serves one snapshot's files to its page's
# sandboxed frames, to whoever holds the signed link the page hands a reader (core/web/viewing.py).
OPEN_VIEWS = {
    "core:view_file",
    "core:replay_app",
    "core:replay_asset",
    "core:replay_worker",
    "core:replay_page",
    "core:replay_wacz",
    "core:public_key",
    "core:public_keys",
    "core:login",  # signing in and out
    "core:logout",
}


def test_every_route_of_core_urls_is_in_one_table() -> None:
    names = {f"core:{pattern.name}" for pattern in core_urls.urlpatterns}
    assert names == set(READER_VIEWS) | OPEN_VIEWS


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("name", list(READER_VIEWS))
def test_every_archive_page_needs_the_view_permission(
    kind: str, name: str, sealed: Snapshot, settings
) -> None:
    settings.PUBLIC_ARCHIVE = False
    client = Client()
    user = make_user(kind)
    if user is not None:
        client.force_login(user)
    kwargs = {
        key: value.format(snapshot_id=sealed.pk, url=sealed.url)
        for key, value in READER_VIEWS[name].items()
    }

    response = client.get(reverse(name, kwargs=kwargs))

    if allowed(kind, ("core.view_snapshot", OWN)) and not reads_all(kind, "core.view_snapshot"):
        # Let in, but the snapshot is not theirs: the index lists nothing, the rest is a 404.
        expected = 200 if name == "core:index" else 404
        assert response.status_code == expected, response
        if name == "core:index":
            assert str(sealed.pk) not in response.content.decode()
        return
    if allowed(kind, "core.view_snapshot"):
        if name in READER_REDIRECTS:
            assert response.status_code == 302, response
            assert response["Location"].endswith(reverse("core:snapshot", args=[sealed.pk]))
            return
        assert response.status_code == 200, response
    elif kind in ("anonymous", "inactive"):
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")
    else:
        assert response.status_code == 403


def test_a_public_archive_opens_its_public_pages_to_anyone(sealed: Snapshot, settings) -> None:
    settings.PUBLIC_ARCHIVE = True
    page = reverse("core:snapshot", args=[sealed.pk])

    private = Client().get(page).status_code
    Crawl.objects.filter(pk=sealed.crawl_id).update(public=True)

    assert private == 404
    assert Client().get(page).status_code == 200


def test_a_refused_page_says_which_permission_is_missing() -> None:
    client = Client()
    client.force_login(staff_with("clerk", "crawls.view_crawl"))

    response = client.get(reverse("crawls:add"))

    assert response.status_code == 403
    assert "permission crawls.add_crawl is needed" in response.content.decode()


def test_a_user_who_is_not_staff_is_told_what_would_let_them_in() -> None:
    """Not staff, no permission: the refusal names both ways in (staff, or crawls.add_crawl
    to add and read back one's own), and the header offers no Add it would refuse."""
    client = Client()
    client.force_login(get_user_model().objects.create_user("visitor"))
    adder = Client()
    adder.force_login(get_user_model().objects.create_user("adder"))
    get_user_model().objects.get(username="adder").user_permissions.set(
        permissions("crawls.add_crawl")
    )

    refused = client.get(reverse("core:index"))
    allowed = adder.get(reverse("core:index"))

    assert refused.status_code == 403
    page = refused.content.decode()
    assert "needs a staff account" in page and "the permission crawls.add_crawl" in page
    assert "only staff users may use this" not in page
    assert f'href="{reverse("crawls:add")}"' not in page
    assert allowed.status_code == 200
    assert f'href="{reverse("crawls:add")}"' in allowed.content.decode()
    # Its empty index says it holds nothing of theirs, and where to add (not a command line).
    assert "Nothing of yours archived yet" in allowed.content.decode()
    assert "manage.py add" not in allowed.content.decode()
