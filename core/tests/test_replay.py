"""Replay on a host of its own (core/web/origins.py): signed links, what the replay host serves and
refuses, one host per snapshot (or a cleared shared host), its Content-Security-Policy, cookies
kept off it, and the snapshot page's link to it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from django.core import signing
from django.test import Client
from model_bakery import baker

from core.choices import SnapshotStatus
from core.folder.wacz import WACZ_NAME
from core.models import Snapshot
from core.tests.users import staff_with
from core.web.origins import (
    CONTAINMENT_CSP,
    TOKEN_SALT,
    ReplayLinkError,
    replay_url,
    sign_link,
    snapshot_id_from_link,
)
from crawls.models import Crawl

pytestmark = pytest.mark.django_db

REPLAY_PARENT = "replay.localhost:8000"  # the default replay host: *.replay.localhost
APP_HOST = "127.0.0.1:8000"
WACZ_BYTES = b"PK\x03\x04 a WACZ is a ZIP file"


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.PUBLIC_ARCHIVE = False
    settings.REPLAY_HOST = ""
    return tmp_path


@pytest.fixture
def snapshot() -> Snapshot:
    """A sealed snapshot with a WACZ."""
    crawl = baker.make(Crawl, seeds="https://example.com/")
    snapshot = baker.make(
        Snapshot, crawl=crawl, url="https://example.com/", status=SnapshotStatus.SEALED
    )
    snapshot.output_dir.mkdir(parents=True)
    (snapshot.output_dir / WACZ_NAME).write_bytes(WACZ_BYTES)
    return snapshot


@pytest.fixture
def staff_client() -> Client:
    client = Client()
    client.force_login(staff_with("keeper", "core.view_snapshot"))  # a reader
    return client


def host_of(snapshot: Snapshot) -> str:
    """The snapshot's own replay host (with the default REPLAY_HOST)."""
    return f"{snapshot.pk.hex}.{REPLAY_PARENT}"


def replay_get(path: str, host: str = REPLAY_PARENT, **headers) -> object:
    return Client().get(path, HTTP_HOST=host, **headers)


def test_a_link_names_its_snapshot(snapshot: Snapshot) -> None:
    assert snapshot_id_from_link(sign_link(snapshot.pk)) == snapshot.pk


@pytest.mark.parametrize(
    "token",
    [
        "not-a-token",
        signing.dumps("0195d2a0-0000-7000-8000-00000000000a", salt="another purpose"),
        signing.dumps("not a uuid", salt=TOKEN_SALT),
    ],
    # Signed tokens carry the time they were made: ids of their own keep the test's name the
    # same in every process (pytest-xdist's workers must collect the same tests).
    ids=["malformed", "another-salt", "not-a-uuid"],
)
def test_forged_or_malformed_links_are_refused(token: str) -> None:
    with pytest.raises(ReplayLinkError, match="not valid"):
        snapshot_id_from_link(token)


def test_an_old_link_has_expired(settings, snapshot: Snapshot) -> None:
    token = sign_link(snapshot.pk)
    settings.REPLAY_LINK_MAX_AGE = -1  # any link is older than that
    with pytest.raises(ReplayLinkError, match="expired"):
        snapshot_id_from_link(token)


def test_the_replay_page_loads_replaywebpage_with_the_snapshots_wacz(snapshot: Snapshot) -> None:
    token = sign_link(snapshot.pk)
    response = replay_get(f"/replay/{token}/", host_of(snapshot))
    html = response.content.decode()
    assert response.status_code == 200
    assert '<script src="/replay/lib/ui.js">' in html
    assert f'source="/replay/{token}/snapshot.wacz"' in html
    assert 'url="https://example.com/"' in html
    assert 'replayBase="/replay/"' in html


def test_the_replay_host_serves_the_wacz_and_replaywebpages_files(snapshot: Snapshot) -> None:
    host, token = host_of(snapshot), sign_link(snapshot.pk)
    wacz = replay_get(f"/replay/{token}/snapshot.wacz", host)
    worker = replay_get("/replay/sw.js", host)
    front = replay_get("/replay/lib/ui.js", host)
    app = replay_get(f"/replay/?source=http://{host}/replay/{token}/snapshot.wacz", host)
    assert wacz.status_code == 200 and b"".join(wacz.streaming_content) == WACZ_BYTES
    assert worker.status_code == 200 and worker["Content-Type"] == "text/javascript"
    assert front.status_code == 200 and b"".join(front.streaming_content).strip()
    assert app.status_code == 200 and b"<replay-app-main>" in app.content


def test_a_bad_link_or_a_snapshot_without_wacz_is_not_found(snapshot: Snapshot) -> None:
    (snapshot.output_dir / WACZ_NAME).unlink()
    missing = replay_get(f"/replay/{sign_link(snapshot.pk)}/", host_of(snapshot))
    forged = replay_get("/replay/forged:token/snapshot.wacz", host_of(snapshot))
    assert missing.status_code == 404 and b"no WACZ" in missing.content
    assert forged.status_code == 404 and b"not valid" in forged.content


@pytest.mark.parametrize("path", ["/admin/", "/", "/api/v1/status", "/add/", "/keys.json"])
def test_the_replay_host_serves_nothing_of_the_app(path: str) -> None:
    response = replay_get(path)
    assert response.status_code == 404
    assert b"only replays archived pages" in response.content


def test_the_apps_host_serves_no_replay(snapshot: Snapshot, staff_client: Client) -> None:
    for path in [f"/replay/{sign_link(snapshot.pk)}/", "/replay/sw.js", "/replay/"]:
        response = staff_client.get(path, HTTP_HOST=APP_HOST)
        assert response.status_code == 404, path
        assert b"replay host" in response.content


def test_cookies_never_reach_the_replay_host_nor_come_from_it(
    snapshot: Snapshot, staff_client: Client
) -> None:
    """Even a session cookie that reached the replay host (a cookie set for a parent domain
    would) is dropped before the app could read it, and the replay host sets none."""
    session = staff_client.cookies["sessionid"].value
    response = Client().get(
        f"/replay/{sign_link(snapshot.pk)}/",
        HTTP_HOST=host_of(snapshot),
        HTTP_COOKIE=f"sessionid={session}; csrftoken=abc",
    )
    assert response.status_code == 200
    assert response.cookies == {}
    assert response.wsgi_request.COOKIES == {}
    assert not response.wsgi_request.user.is_authenticated


def test_the_snapshot_page_links_to_its_replay_on_the_replay_host(
    snapshot: Snapshot, staff_client: Client
) -> None:
    html = staff_client.get(f"/snapshot/{snapshot.pk}/", HTTP_HOST=APP_HOST).content.decode()
    prefix = f'href="http://{host_of(snapshot)}/replay/'
    assert prefix in html
    token = html.split(prefix, 1)[1].split("/", 1)[0]
    assert snapshot_id_from_link(token) == snapshot.pk


def test_a_configured_replay_host_is_used_on_any_host(settings, rf, snapshot: Snapshot) -> None:
    settings.REPLAY_HOST = "replay.archive.example"
    request = rf.get("/", HTTP_HOST="archive.example", secure=True)
    assert replay_url(request, snapshot.pk).startswith("https://replay.archive.example/replay/")


def test_a_public_host_without_a_replay_host_gets_no_replay_and_says_why(
    settings, snapshot: Snapshot, staff_client: Client
) -> None:
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "archive.example"]
    html = staff_client.get(f"/snapshot/{snapshot.pk}/", HTTP_HOST="archive.example").content
    assert b"/replay/" not in html
    assert b"set REPLAY_HOST" in html


def test_a_snapshot_without_wacz_has_no_replay_link(
    snapshot: Snapshot, staff_client: Client
) -> None:
    (snapshot.output_dir / WACZ_NAME).unlink()
    html = staff_client.get(f"/snapshot/{snapshot.pk}/", HTTP_HOST=APP_HOST).content
    assert b"/replay/" not in html


@pytest.fixture
def other(snapshot: Snapshot) -> Snapshot:
    """A second sealed snapshot with a WACZ."""
    other = baker.make(Snapshot, crawl=snapshot.crawl, url="https://example.org/")
    other.output_dir.mkdir(parents=True)
    (other.output_dir / WACZ_NAME).write_bytes(WACZ_BYTES)
    return other


def test_a_snapshots_host_serves_no_other_snapshots_link(snapshot: Snapshot, other: Snapshot):
    token = sign_link(other.pk)
    for path in [f"/replay/{token}/", f"/replay/{token}/snapshot.wacz"]:
        for host in [host_of(snapshot), REPLAY_PARENT]:
            response = replay_get(path, host)
            assert response.status_code == 404, (path, host)
            assert b"another replay host" in response.content
    assert replay_get(f"/replay/{token}/", host_of(other)).status_code == 200


@pytest.mark.parametrize(
    "source",
    [
        "",
        "https://evil.example/hostile.wacz",
        "http://127.0.0.1:8000/replay/TOKEN/snapshot.wacz",  # the right path on another host
        "/replay/TOKEN/",
        "/replay/TOKEN/snapshot.wacz?x=1",
        "/replay/forged:token/snapshot.wacz",
        "/replay/OTHER/snapshot.wacz",  # another snapshot's link, on this snapshot's host
    ],
)
def test_the_app_page_refuses_any_source_but_its_own_link(
    snapshot: Snapshot, other: Snapshot, source: str
) -> None:
    source = source.replace("TOKEN", sign_link(snapshot.pk)).replace("OTHER", sign_link(other.pk))
    response = replay_get(f"/replay/?source={quote(source)}", host_of(snapshot))
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")


def test_every_replay_answer_keeps_to_the_replay_origin(snapshot: Snapshot) -> None:
    host, token = host_of(snapshot), sign_link(snapshot.pk)
    for path in [f"/replay/{token}/", "/replay/sw.js", "/replay/lib/ui.js", "/replay/nothing"]:
        policy = replay_get(path, host)["Content-Security-Policy"]
        assert "connect-src 'self' data: blob:;" in policy and "frame-src 'self';" in policy
        assert "default-src 'self';" in policy
    assert replay_get(f"/replay/{token}/snapshot.wacz", host)["Content-Security-Policy"] == (
        "default-src 'none'; sandbox"
    )


def test_the_worker_is_replaywebpages_with_the_containment_policy(snapshot: Snapshot) -> None:
    worker = replay_get("/replay/sw.js", host_of(snapshot)).content.decode()
    imported = replay_get("/replay/lib/rwp-sw.js", host_of(snapshot))
    assert 'importScripts("./lib/rwp-sw.js");' in worker
    policy = json.loads(re.search(r'const VELLUM_CSP = (".*");', worker)[1])  # a JS string
    assert policy == CONTAINMENT_CSP and "connect-src 'self' data: blob:" in policy
    assert imported.status_code == 200 and b"".join(imported.streaming_content).strip()


@pytest.mark.parametrize("path", ["/replay/lib/rwp-sw.js", "/replay/lib/ui.js"])
def test_no_file_but_vellums_worker_may_register_as_a_service_worker(
    snapshot: Snapshot, path: str
) -> None:
    # A replayed page that registered ReplayWeb.page's bare worker would answer later pages
    # without Vellum's containment policy; the browser says when it asks for a worker script.
    as_worker = replay_get(path, host_of(snapshot), HTTP_SERVICE_WORKER="script")
    as_script = replay_get(path, host_of(snapshot))
    vellums = replay_get("/replay/sw.js", host_of(snapshot), HTTP_SERVICE_WORKER="script")

    assert as_worker.status_code == 404
    assert as_script.status_code == 200
    assert vellums.status_code == 200


def test_only_a_shared_replay_host_clears_the_site_data(settings, snapshot: Snapshot) -> None:
    token = sign_link(snapshot.pk)
    own = replay_get(f"/replay/{token}/", host_of(snapshot))
    settings.REPLAY_HOST = "replay.archive.example"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "replay.archive.example"]
    shared = replay_get(f"/replay/{token}/", "replay.archive.example")
    assert own.status_code == shared.status_code == 200
    assert "Clear-Site-Data" not in own
    assert shared["Clear-Site-Data"] == '"storage"'


def test_a_wildcard_replay_host_gives_each_snapshot_its_own(settings, rf, snapshot: Snapshot):
    settings.REPLAY_HOST = "*.replay.archive.example"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, ".replay.archive.example"]
    request = rf.get("/", HTTP_HOST="archive.example", secure=True)
    url = replay_url(request, snapshot.pk)
    assert url.startswith(f"https://{snapshot.pk.hex}.replay.archive.example/replay/")
    token = url.split("/")[4]
    page = replay_get(f"/replay/{token}/", f"{snapshot.pk.hex}.replay.archive.example")
    assert page.status_code == 200
