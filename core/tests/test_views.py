"""Serving snapshot files (core/web/files.py): staff only, sandboxed, never outside the folder."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from model_bakery import baker

from core.models import Snapshot
from core.tests.users import staff_with

pytestmark = pytest.mark.django_db

PAGE = b"<html><script>fetch('/admin/')</script><title>Archived</title></html>"


@pytest.fixture(autouse=True)
def static_root(settings) -> None:
    """whitenoise wants STATIC_ROOT to exist."""
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # whitenoise wants it


@pytest.fixture
def data_dir(settings, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    settings.DATA_DIR = data
    settings.ARCHIVE_DIR = data / "archive"
    (data / "archive").mkdir(parents=True)
    (data / "secret_key").write_text("do not serve me")
    return data


@pytest.fixture
def snapshot(data_dir: Path) -> Snapshot:
    """A snapshot whose folder holds a page, a title and a WARC."""
    snapshot = baker.make(Snapshot, url="http://a.example/")
    files = {
        "wget/a.example/index.html": PAGE,
        "title/title.txt": b"Archived\n",
        "wget/warc/archive.warc.gz": b"\x1f\x8b\x08 compressed",
    }
    for name, data in files.items():
        path = snapshot.output_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return snapshot


def file_url(snapshot: Snapshot, relative: str) -> str:
    return reverse("core:snapshot_file", args=[snapshot.pk, relative])


def raw_url(snapshot_id, relative: str) -> str:
    """The URL with ``relative`` exactly as given (reverse() would quote it)."""
    return f"/archive/{snapshot_id}/{relative}"


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_anonymous_is_sent_to_sign_in(client: Client, snapshot: Snapshot) -> None:
    url = file_url(snapshot, "title/title.txt")

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("core:login"))
    assert "next=" in response["Location"]


def test_a_user_who_is_not_staff_is_refused(client: Client, snapshot: Snapshot) -> None:
    client.force_login(baker.make("auth.User", is_staff=False))

    response = client.get(file_url(snapshot, "title/title.txt"))

    assert response.status_code == 403


def test_staff_without_the_view_permission_is_refused(client: Client, snapshot: Snapshot) -> None:
    client.force_login(staff_with("clerk", "crawls.change_crawl"))
    refused = client.get(file_url(snapshot, "title/title.txt"))
    # May add, so let in, but reads only the crawls they added: not this one.
    client.force_login(staff_with("adder", "crawls.add_crawl"))
    not_theirs = client.get(file_url(snapshot, "title/title.txt"))
    client.force_login(staff_with("reader", "core.view_snapshot"))
    allowed = client.get(file_url(snapshot, "title/title.txt"))

    assert refused.status_code == 403
    assert not_theirs.status_code == 404
    assert allowed.status_code == 200


def test_staff_gets_the_file_sandboxed(admin_client: Client, snapshot: Snapshot) -> None:
    # An archived page goes to its signed view link (core/web/viewing.py), where its own
    # requisites load and nothing else does.
    response = admin_client.get(file_url(snapshot, "wget/a.example/index.html"), follow=True)

    assert response.redirect_chain[0][0].startswith("/view/")
    assert response.status_code == 200
    assert body(response) == PAGE
    assert response["Content-Type"].startswith("text/html")
    assert "sandbox" in response["Content-Security-Policy"]
    assert "allow-same-origin" not in response["Content-Security-Policy"]
    assert "allow-scripts" not in response["Content-Security-Policy"]
    assert response["X-Content-Type-Options"] == "nosniff"


def test_a_compressed_file_is_served_as_bytes(admin_client: Client, snapshot: Snapshot) -> None:
    response = admin_client.get(file_url(snapshot, "wget/warc/archive.warc.gz"))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert "Content-Encoding" not in response
    assert body(response) == b"\x1f\x8b\x08 compressed"


def test_the_manifests_signature_is_served_as_bytes(
    admin_client: Client, snapshot: Snapshot
) -> None:
    """64 raw bytes of Ed25519, not the OpenPGP signature mimetypes takes a .sig for."""
    signature = bytes(range(64))
    (snapshot.output_dir / "manifest-sha256.txt.sig").write_bytes(signature)

    response = admin_client.get(file_url(snapshot, "manifest-sha256.txt.sig"))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert body(response) == signature


@pytest.mark.parametrize(
    "relative",
    [
        "../../secret_key",
        "title/../../../secret_key",
        "%2e%2e/%2e%2e/secret_key",
        "..%2f..%2fsecret_key",
        "%2E%2E%2F%2E%2E%2Fsecret_key",
        "/etc/passwd",
        "..",
    ],
)
def test_traversal_out_of_the_folder_is_not_found(
    admin_client: Client, snapshot: Snapshot, relative: str
) -> None:
    response = admin_client.get(raw_url(snapshot.pk, relative))

    assert response.status_code == 404
    assert b"do not serve me" not in response.content


@pytest.mark.parametrize("relative", ["title/../title/title.txt", "title/%2e%2e/title/title.txt"])
def test_dot_dot_that_stays_inside_reaches_the_view(
    admin_client: Client, snapshot: Snapshot, relative: str
) -> None:
    """The paths above do reach the view: only its containment check refuses them."""
    response = admin_client.get(raw_url(snapshot.pk, relative))

    assert response.status_code == 200
    assert body(response) == b"Archived\n"


def test_another_snapshots_file_is_not_reachable_through_this_one(
    admin_client: Client, snapshot: Snapshot
) -> None:
    other = baker.make(Snapshot, crawl=snapshot.crawl, url="http://b.example/")
    (other.output_dir / "title").mkdir(parents=True)
    (other.output_dir / "title/title.txt").write_text("other")

    response = admin_client.get(raw_url(snapshot.pk, f"../{other.pk}/title/title.txt"))

    assert response.status_code == 404
    assert admin_client.get(file_url(other, "title/title.txt")).status_code == 200


def test_a_symlink_pointing_outside_is_not_found(
    admin_client: Client, snapshot: Snapshot, data_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside.txt").write_text("outside")
    (snapshot.output_dir / "title" / "escape.txt").symlink_to(tmp_path / "outside.txt")
    (snapshot.output_dir / "key").symlink_to(data_dir / "secret_key")
    (snapshot.output_dir / "up").symlink_to(tmp_path, target_is_directory=True)

    for relative in ("title/escape.txt", "key", "up/outside.txt"):
        response = admin_client.get(file_url(snapshot, relative))
        assert response.status_code == 404, relative


def test_a_snapshot_folder_that_is_a_symlink_outside_data_dir_is_not_served(
    admin_client: Client, data_dir: Path, tmp_path: Path
) -> None:
    snapshot = baker.make(Snapshot, url="http://a.example/")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "title").mkdir(parents=True)
    (elsewhere / "title/title.txt").write_text("not in DATA_DIR")
    snapshot.output_dir.symlink_to(elsewhere, target_is_directory=True)

    assert admin_client.get(file_url(snapshot, "title/title.txt")).status_code == 404


@pytest.mark.parametrize(
    "relative", ["title/nope.txt", "nothing/at/all", "title", "title/", "wget/warc"]
)
def test_missing_files_and_directories_are_not_found(
    admin_client: Client, snapshot: Snapshot, relative: str
) -> None:
    assert admin_client.get(raw_url(snapshot.pk, relative)).status_code == 404


def test_an_unknown_snapshot_is_not_found(admin_client: Client, snapshot: Snapshot) -> None:
    response = admin_client.get(raw_url(uuid.uuid4(), "title/title.txt"))

    assert response.status_code == 404


def test_a_snapshot_without_a_folder_is_not_found(admin_client: Client, data_dir: Path) -> None:
    snapshot = baker.make(Snapshot, url="http://a.example/")

    assert admin_client.get(file_url(snapshot, "title/title.txt")).status_code == 404


def test_a_malformed_snapshot_id_is_not_found(admin_client: Client, snapshot: Snapshot) -> None:
    assert admin_client.get("/archive/not-a-uuid/title/title.txt").status_code == 404


@pytest.mark.parametrize("relative", ["a%00b", "title/%00", "%00/../title/title.txt"])
def test_a_name_with_a_nul_byte_is_not_found_not_a_crash(
    admin_client: Client, snapshot: Snapshot, relative: str
) -> None:
    """``GET /archive/<id>/a%00b`` was a 500 (ValueError: embedded null byte)."""
    response = admin_client.get(raw_url(snapshot.pk, relative))

    assert response.status_code == 404
