"""Removing snapshots and crawls (core/services/removal.py, ``manage.py remove``): rows, folders,
and the refusals while anything of them runs."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from model_bakery import baker

from core.choices import CopyStatus, ResultStatus, SnapshotStatus
from core.models import ArchiveResult, FixityCheck, Snapshot, StorageCopy, Tag
from core.services.crawls import crawl_hold
from core.services.fixity import snapshot_audit
from core.services.removal import RemovalRefused, crawl_remove, snapshot_remove
from core.services.snapshots import snapshot_check_results
from core.tests.test_services import finished_snapshot, make_crawl, make_result, make_snapshot
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    return tmp_path


def sealed_snapshot() -> Snapshot:
    snapshot = finished_snapshot()
    snapshot_check_results(snapshot=snapshot)
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    snapshot.crawl.seal(report={})
    snapshot.crawl.save()
    return snapshot


def remove(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("remove", "--yes", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_removing_with_delete_takes_the_rows_and_the_folder(data_dir: Path) -> None:
    snapshot = sealed_snapshot()
    snapshot_audit(snapshot=snapshot)
    folder = snapshot.output_dir
    assert folder.is_dir() and FixityCheck.objects.exists()

    snapshot_remove(snapshot_id=snapshot.pk, delete_files=True)

    assert not Snapshot.objects.exists()
    assert not ArchiveResult.objects.exists() and not FixityCheck.objects.exists()
    assert not folder.exists()
    assert list((data_dir / "trash").iterdir()) == []


def test_removing_without_delete_keeps_the_folder() -> None:
    snapshot = sealed_snapshot()

    snapshot_remove(snapshot_id=snapshot.pk)

    assert not Snapshot.objects.exists()
    assert (snapshot.output_dir / "index.json").is_file()


def test_a_failed_delete_puts_the_folder_back(monkeypatch) -> None:
    snapshot = sealed_snapshot()
    monkeypatch.setattr(Snapshot, "delete", lambda self: (_ for _ in ()).throw(OSError("disk")))

    with pytest.raises(OSError):
        snapshot_remove(snapshot_id=snapshot.pk, delete_files=True)

    assert Snapshot.objects.filter(pk=snapshot.pk).exists()
    assert (snapshot.output_dir / "index.json").is_file()


def test_an_unfinished_snapshot_of_an_active_crawl_is_refused_until_the_crawl_is_held() -> None:
    crawl = make_crawl("http://a.example/\nhttp://b.example/")
    snapshot = make_snapshot("http://a.example/", crawl=crawl, depth=0)

    with pytest.raises(RemovalRefused, match=f"hold the crawl first \\(manage.py hold {crawl.pk}"):
        snapshot_remove(snapshot_id=snapshot.pk)
    crawl_hold(crawl_id=crawl.pk)
    snapshot_remove(snapshot_id=snapshot.pk)

    assert not Snapshot.objects.exists()
    # Releasing the crawl starts it from its seeds again: the removed one is no longer there.
    assert Crawl.objects.get(pk=crawl.pk).seed_list() == ["http://b.example/"]


def test_a_running_extractor_or_upload_refuses_the_removal() -> None:
    snapshot = sealed_snapshot()
    soon = timezone.now() + timedelta(seconds=60)
    result = snapshot.results.get(extractor="wget")
    ArchiveResult.objects.filter(pk=result.pk).update(status=ResultStatus.STARTED, retry_at=soon)

    with pytest.raises(RemovalRefused, match=r"extractors are running \(wget\)"):
        snapshot_remove(snapshot_id=snapshot.pk)

    ArchiveResult.objects.filter(pk=result.pk).update(status=ResultStatus.SUCCEEDED, retry_at=None)
    baker.make(
        StorageCopy, snapshot=snapshot, target="s3", status=CopyStatus.STARTED, retry_at=soon
    )
    with pytest.raises(RemovalRefused, match="it is being copied to s3"):
        snapshot_remove(snapshot_id=snapshot.pk)


def test_a_crawl_is_removed_whole_once_sealed_or_held() -> None:
    snapshot = sealed_snapshot()
    crawl_id = snapshot.crawl_id

    assert crawl_remove(crawl_id=crawl_id, delete_files=True) == 1

    assert not Crawl.objects.filter(pk=crawl_id).exists()
    assert not snapshot.output_dir.exists()


def test_tags_go_with_the_last_crawl_or_snapshot_that_carries_them() -> None:
    snapshot = sealed_snapshot()  # its crawl and it carry "news"
    kept = baker.make(Tag, name="kept")
    sealed_crawl = baker.make(Crawl, status=CrawlStatus.SEALED, seeds="http://b.example/")
    sealed_crawl.tags.add(kept)
    other = make_snapshot(
        "http://b.example/", SnapshotStatus.SEALED, crawl=sealed_crawl, tags=[kept]
    )
    snapshot.tags.add(kept)

    crawl_remove(crawl_id=snapshot.crawl_id)

    assert list(Tag.objects.values_list("name", flat=True)) == ["kept"]  # "news" went with it
    snapshot_remove(snapshot_id=other.pk)
    assert Tag.objects.filter(name="kept").exists()  # its crawl still carries it
    crawl_remove(crawl_id=other.crawl_id)
    assert not Tag.objects.exists()


def test_an_active_crawl_is_refused() -> None:
    crawl = make_crawl()
    make_snapshot(crawl=crawl)

    with pytest.raises(RemovalRefused, match="is started: hold it first"):
        crawl_remove(crawl_id=crawl.pk)

    assert Snapshot.objects.exists()


# --- the command -------------------------------------------------------------------------------


def test_remove_command_reports_each_snapshot() -> None:
    snapshot = sealed_snapshot()
    other = make_snapshot("http://b.example/", crawl=make_crawl("http://b.example/"))
    make_result(other, "wget")

    with pytest.raises(CommandError, match=r"^1 of 2 snapshots not removed$"):
        call_command(
            "remove", "--yes", "--delete", str(snapshot.pk), str(other.pk),
            stdout=(out := StringIO()), stderr=(err := StringIO()),
        )  # fmt: skip

    assert out.getvalue() == f"Removed snapshot {snapshot.pk}.\n"
    assert err.getvalue().startswith(f"snapshot {other.pk}: it is started and its crawl")
    assert not snapshot.output_dir.exists()


def test_remove_command_removes_a_crawl() -> None:
    snapshot = sealed_snapshot()

    out, _ = remove("--crawl", str(snapshot.crawl_id))

    assert out == f"Removed crawl {snapshot.crawl_id} and its 1 snapshots.\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Say what to remove"),
        (("--crawl", "1", "00000000-0000-0000-0000-000000000000"), "Say what to remove"),
        (("--crawl", "999"), "no crawl 999"),
        (("nonsense",), "'nonsense' is not a snapshot id"),
    ],
)
def test_remove_command_refuses_readably(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        remove(*args)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--crawl", "999"), "^no crawl 999$"),
        (("nonsense",), "'nonsense' is not a snapshot id"),
        ((str(uuid.UUID(int=7)),), f"^no snapshot {uuid.UUID(int=7)}$"),
    ],
)
def test_remove_names_what_does_not_exist_before_it_asks(args, message: str) -> None:
    """Without --yes, "Remove crawl 999? Add --yes to confirm" would send the user to confirm
    the removal of nothing."""
    with pytest.raises(CommandError, match=message):
        call_command("remove", *args, stdout=StringIO())


def test_remove_asks_before_it_removes_anything() -> None:
    snapshot = sealed_snapshot()

    with pytest.raises(CommandError, match="Add --yes to confirm"):
        call_command("remove", str(snapshot.pk), stdout=StringIO())

    assert Snapshot.objects.filter(pk=snapshot.pk).exists()


# --- the admin's "remove with files" actions ---------------------------------------------------


def test_the_admin_asks_before_it_removes_snapshots_and_their_folders(admin_client) -> None:
    snapshot = sealed_snapshot()
    busy = make_snapshot("http://busy.example/", status=SnapshotStatus.STARTED)
    make_result(busy, "title", status=ResultStatus.STARTED, retry_at=timezone.now() + timedelta(60))
    changelist = reverse("admin:core_snapshot_changelist")
    chosen = {"action": "remove_files", "_selected_action": [str(snapshot.pk), str(busy.pk)]}

    asked = admin_client.post(changelist, chosen)

    assert asked.status_code == 200
    assert b"Yes, remove them and delete their folders" in asked.content
    assert Snapshot.objects.count() == 2  # nothing happens before the answer

    done = admin_client.post(changelist, {**chosen, "confirmed": "yes"}, follow=True)

    shown = [str(message) for message in done.context["messages"]]
    assert shown[0] == "1 snapshot removed, with the folders."
    assert shown[1].startswith(f"Kept: snapshot {busy.pk}: ")
    assert list(Snapshot.objects.all()) == [busy]
    assert not snapshot.output_dir.exists()


def test_the_admin_removes_a_held_crawl_and_refuses_an_active_one(admin_client) -> None:
    sealed = sealed_snapshot()
    active = make_crawl("http://active.example/")  # started
    changelist = reverse("admin:crawls_crawl_changelist")
    chosen = {
        "action": "remove_files",
        "_selected_action": [sealed.crawl_id, active.pk],
        "confirmed": "yes",
    }

    done = admin_client.post(changelist, chosen, follow=True)

    shown = [str(message) for message in done.context["messages"]]
    assert shown[0] == "1 crawl removed, with the folders."
    assert shown[1].startswith("Kept: ") and "hold it first" in shown[1]
    assert list(Crawl.objects.all()) == [active]
    assert not sealed.output_dir.exists()


def test_the_crawl_admin_retries_the_failed_results_of_selected_crawls(admin_client) -> None:
    snapshot = sealed_snapshot()  # its favicon failed
    changelist = reverse("admin:crawls_crawl_changelist")

    done = admin_client.post(
        changelist,
        {"action": "retry_failed", "_selected_action": [snapshot.crawl_id]},
        follow=True,
    )

    assert [str(m) for m in done.context["messages"]] == ["1 failed result(s) queued again."]
    favicon = snapshot.results.get(extractor="favicon")
    assert favicon.status == ResultStatus.QUEUED
    assert Crawl.objects.get().status == "started"  # reopened until the retry is done
