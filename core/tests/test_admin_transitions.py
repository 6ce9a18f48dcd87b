"""The admin's transition buttons (core/admin/transitions.py): shown for the transitions a
record's state allows, each made through its service, refused without the change permission."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot
from core.tests.test_services import make_crawl, make_result, make_snapshot
from crawls.models import Crawl, CrawlStatus

pytestmark = pytest.mark.django_db

BUTTON = 'name="_fsm_transition_to" value="{}"'


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    return tmp_path


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com"))
    return client


def change_url(obj) -> str:
    opts = obj._meta
    return f"/admin/{opts.app_label}/{opts.model_name}/{obj.pk}/change/"


def press(client: Client, obj, transition: str, **data):
    return client.post(change_url(obj), {"_fsm_transition_to": transition, **data}, follow=True)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def sealed_snapshot_with_a_failure() -> tuple[Snapshot, ArchiveResult]:
    snapshot = make_snapshot(status=SnapshotStatus.SEALED)
    make_result(snapshot, "title", ResultStatus.SUCCEEDED, retry_at=None)
    failed = make_result(snapshot, "wget", ResultStatus.FAILED, retry_at=None, error="boom")
    Crawl.objects.filter(pk=snapshot.crawl_id).update(status=CrawlStatus.SEALED)
    return snapshot, failed


def test_a_sealed_snapshot_offers_retry_and_rearchive(admin_client: Client) -> None:
    snapshot, _failed = sealed_snapshot_with_a_failure()
    html = admin_client.get(change_url(snapshot)).content.decode()
    assert html.count(BUTTON.format("rearchive")) == 2  # above and below the record
    assert BUTTON.format("retry_failed") in html
    assert BUTTON.format("seal") not in html  # the actors' transitions get no button


def test_a_snapshot_in_progress_offers_no_button(admin_client: Client) -> None:
    snapshot = make_snapshot(status=SnapshotStatus.STARTED)
    assert "_fsm_transition_to" not in admin_client.get(change_url(snapshot)).content.decode()


def test_retry_failed_runs_the_failed_results_again_through_the_service(
    admin_client: Client,
) -> None:
    snapshot, failed = sealed_snapshot_with_a_failure()
    response = press(admin_client, snapshot, "retry_failed")
    snapshot.refresh_from_db()
    failed.refresh_from_db()
    assert response.redirect_chain[-1][0] == change_url(snapshot)
    assert snapshot.status == SnapshotStatus.STARTED
    assert failed.status == ResultStatus.QUEUED
    assert Crawl.objects.get(pk=snapshot.crawl_id).status == CrawlStatus.STARTED  # reopened
    assert messages_of(response)[0].startswith("1 failed result(s) queued again")


def test_rearchive_keeps_the_earlier_run(admin_client: Client) -> None:
    snapshot, _failed = sealed_snapshot_with_a_failure()
    (snapshot.output_dir / "title").mkdir(parents=True)
    (snapshot.output_dir / "title" / "title.txt").write_text("before\n")
    response = press(admin_client, snapshot, "rearchive")
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.QUEUED
    assert set(snapshot.results.values_list("status", flat=True)) == {ResultStatus.QUEUED}
    kept = list((snapshot.output_dir / "history").glob("*/title/title.txt"))
    assert [path.read_text() for path in kept] == ["before\n"]
    assert "earlier run is kept in history/" in messages_of(response)[0]


def test_a_button_pressed_after_the_state_moved_on_says_so(admin_client: Client) -> None:
    snapshot, _failed = sealed_snapshot_with_a_failure()
    page = admin_client.get(change_url(snapshot))  # the button is shown...
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.STARTED)  # ...then
    response = press(admin_client, snapshot, "rearchive")
    snapshot.refresh_from_db()
    assert BUTTON.format("rearchive") in page.content.decode()
    assert snapshot.status == SnapshotStatus.STARTED
    assert messages_of(response) == ["Re-archive: not possible while started."]


def test_only_transitions_with_a_service_can_be_pressed(admin_client: Client) -> None:
    snapshot = make_snapshot(status=SnapshotStatus.FINALIZING)
    response = admin_client.post(change_url(snapshot), {"_fsm_transition_to": "seal"})
    snapshot.refresh_from_db()
    assert response.status_code == 400
    assert snapshot.status == SnapshotStatus.FINALIZING


def test_staff_without_the_change_permission_cannot_press(admin_client: Client) -> None:
    snapshot, _failed = sealed_snapshot_with_a_failure()
    viewer = get_user_model().objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_snapshot"))
    client = Client()
    client.force_login(viewer)
    page = client.get(change_url(snapshot))
    response = client.post(change_url(snapshot), {"_fsm_transition_to": "rearchive"})
    snapshot.refresh_from_db()
    assert page.status_code == 200
    assert response.status_code == 403
    assert snapshot.status == SnapshotStatus.SEALED


def test_hold_asks_for_a_reason_then_release_resumes_the_crawl(admin_client: Client) -> None:
    crawl = make_crawl()
    html = admin_client.get(change_url(crawl)).content.decode()
    asked = press(admin_client, crawl, "hold")
    form_url = f"/admin/crawls/crawl/{crawl.pk}/transition/hold/"
    held = admin_client.post(form_url, {"reason": "moving storage"}, follow=True)
    crawl.refresh_from_db()
    held_status, reason = crawl.status, crawl.hold_reason
    released = press(admin_client, crawl, "release")
    crawl.refresh_from_db()

    assert BUTTON.format("hold") in html and BUTTON.format("release") not in html
    assert asked.redirect_chain[-1][0] == form_url and b'name="reason"' in asked.content
    assert (held_status, reason) == (CrawlStatus.HELD, "moving storage")
    assert BUTTON.format("release") in held.content.decode()
    assert crawl.status == CrawlStatus.QUEUED and crawl.hold_reason == ""
    assert messages_of(released) == [f"Crawl {crawl.pk} released: it resumes where it stopped."]


def test_a_failed_result_can_be_retried_from_its_page(admin_client: Client) -> None:
    _snapshot, failed = sealed_snapshot_with_a_failure()
    assert BUTTON.format("retry") in admin_client.get(change_url(failed)).content.decode()
    response = press(admin_client, failed, "retry")
    failed.refresh_from_db()
    assert failed.status == ResultStatus.QUEUED
    assert messages_of(response) == ["wget: 1 result(s) queued again."]
