"""Admin actions ask for the user's model permissions (core/admin/permissions.py): a staff
member who may only view sees the exports, never an action that changes or removes records."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from core.choices import SnapshotStatus
from core.models import Snapshot
from core.tests.test_services import make_crawl, make_snapshot

pytestmark = pytest.mark.django_db

SNAPSHOTS = "/admin/core/snapshot/"
# Every action of each list, and those a view-only user keeps (reading, not changing).
ACTIONS = {
    SNAPSHOTS: {"retry_failed", "rearchive", "verify_fixity", "restore_damaged",
                "export_bagit", "export_wacz", "remove_files"},
    "/admin/crawls/crawl/": {"hold_crawls", "release_crawls", "retry_failed", "export_wacz",
                             "remove_files"},
    "/admin/core/storagecopy/": {"copy_again"},
    "/admin/core/apitoken/": {"revoke"},
    "/admin/crawls/crawlschedule/": {"run_now"},
}  # fmt: skip
READ_ONLY_ACTIONS = {"export_bagit", "export_wacz"}


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    return tmp_path


def staff_client(*codenames: str, superuser: bool = False) -> Client:
    users = get_user_model().objects
    if superuser:
        user = users.create_superuser("root", "root@example.com")
    else:
        user = users.create_user("staff", is_staff=True)
        user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def actions_offered(client: Client, path: str) -> set[str]:
    response = client.get(path)
    assert response.status_code == 200
    form = response.context["action_form"]  # None when no action is left
    return {name for name, _label in form.fields["action"].choices} if form else set()


@pytest.mark.parametrize("path", list(ACTIONS))
def test_a_superuser_is_offered_every_action(path: str) -> None:
    assert actions_offered(staff_client(superuser=True), path) >= ACTIONS[path]


@pytest.mark.parametrize("path", list(ACTIONS))
def test_a_view_only_user_is_offered_only_the_exports(path: str) -> None:
    model = path.rstrip("/").rsplit("/", 1)[1]
    client = staff_client(f"view_{model}")

    offered = actions_offered(client, path)

    assert offered & ACTIONS[path] == ACTIONS[path] & READ_ONLY_ACTIONS


def test_changing_without_deleting_offers_the_transitions_but_not_removal() -> None:
    client = staff_client("view_snapshot", "change_snapshot")

    offered = actions_offered(client, SNAPSHOTS)

    assert {"retry_failed", "rearchive", "verify_fixity", "restore_damaged"} <= offered
    assert "remove_files" not in offered


def test_a_view_only_user_posting_removal_removes_nothing(data_dir: Path) -> None:
    snapshot = make_snapshot(crawl=make_crawl(), status=SnapshotStatus.SEALED)
    folder = snapshot.output_dir
    folder.mkdir(parents=True)
    (folder / "index.json").write_text("{}")
    client = staff_client("view_snapshot")

    client.post(
        SNAPSHOTS,
        {"action": "remove_files", "confirmed": "yes", "_selected_action": [snapshot.pk]},
    )

    assert Snapshot.objects.filter(pk=snapshot.pk).exists()
    assert (folder / "index.json").exists()


def test_with_the_delete_permission_removal_goes_ahead(data_dir: Path) -> None:
    snapshot = make_snapshot(crawl=make_crawl(), status=SnapshotStatus.SEALED)
    client = staff_client("view_snapshot", "delete_snapshot")

    client.post(
        SNAPSHOTS,
        {"action": "remove_files", "confirmed": "yes", "_selected_action": [snapshot.pk]},
    )

    assert not Snapshot.objects.filter(pk=snapshot.pk).exists()
