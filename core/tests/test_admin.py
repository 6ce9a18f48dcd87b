"""The admin (core/admin.py, crawls/admin.py): every page renders, states show as badges with
links to output files, and nothing is edited by hand (status changes only by transitions)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from model_bakery import baker

from core.admin_display import file_url
from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot, Tag
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def own_data_dir(settings, tmp_path: Path) -> None:
    """A DATA_DIR of the test's own (settings_for_tests.py serves static files unhashed)."""
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # whitenoise wants it


class Archive:
    """A sealed crawl: one sealed snapshot with outputs on disk, one failed snapshot."""

    def __init__(self) -> None:
        self.tag = baker.make(Tag, name="newsroom")
        self.crawl = baker.make(
            Crawl,
            status=CrawlStatus.SEALED,
            seeds="http://good.example/\nhttp://bad.example/",
            tags=[self.tag],
            retry_at=None,
            report={
                "snapshots": {"sealed": 1, "failed": 1},
                "failures": [
                    {
                        "url": "http://good.example/",
                        "extractor": "favicon",
                        "error": "HTTP 404 from http://good.example/favicon.ico",
                    }
                ],
            },
        )
        self.good = baker.make(
            Snapshot,
            crawl=self.crawl,
            url="http://good.example/",
            title="Good Page Title",
            status=SnapshotStatus.SEALED,
            tags=[self.tag],
            retry_at=None,
        )
        self.bad = baker.make(
            Snapshot,
            crawl=self.crawl,
            url="http://bad.example/",
            status=SnapshotStatus.FAILED,
            error="finalizing failed: disk full",
            retry_at=None,
        )
        self.wget_files = ["wget/good.example/index.html", "wget/warc/archive.warc.gz"]
        self.wget = baker.make(
            ArchiveResult,
            snapshot=self.good,
            extractor="wget",
            status=ResultStatus.SUCCEEDED,
            output="good.example/index.html",
            output_files=self.wget_files,
            output_size=40,
            cmd=["/usr/bin/wget", "--no-verbose", "http://good.example/"],
            cmd_version="GNU Wget 1.21.3",
            exit_code=0,
            attempts=1,
        )
        self.title = baker.make(
            ArchiveResult,
            snapshot=self.good,
            extractor="title",
            status=ResultStatus.SUCCEEDED,
            output="Good Page Title",
            output_files=["title/title.txt"],
            attempts=1,
        )
        self.favicon = baker.make(
            ArchiveResult,
            snapshot=self.good,
            extractor="favicon",
            status=ResultStatus.FAILED,
            error="HTTP 404 from http://good.example/favicon.ico",
            attempts=1,
        )
        self.bad_wget = baker.make(
            ArchiveResult,
            snapshot=self.bad,
            extractor="wget",
            status=ResultStatus.SKIPPED,
            error="wget not found",
        )
        for name in [*self.wget_files, "title/title.txt", "index.json"]:
            path = self.good.output_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"content of {name}")


@pytest.fixture
def archive() -> Archive:
    return Archive()


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def badge(status: str) -> str:
    return f'class="vellum-badge vellum-{status}"'


def href(url: str) -> str:
    return f'href="{url}"'


# --- crawls --------------------------------------------------------------------------------------


def test_crawl_changelist(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:crawls_crawl_changelist"))

    assert "http://good.example/ (+1)" in html
    assert badge("sealed") in html
    assert "2 / 2" in html  # snapshots done
    assert "newsroom" in html


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("?status__exact=sealed", True),
        ("?status__exact=held", False),
        ("?q=good.example", True),
        ("?q=nowhere.example", False),
        ("?tags__id__exact={tag}", True),
    ],
)
def test_crawl_changelist_filters(
    admin_client: Client, archive: Archive, query: str, shown: bool
) -> None:
    html = page(
        admin_client, reverse("admin:crawls_crawl_changelist") + query.format(tag=archive.tag.pk)
    )

    assert ("http://good.example/ (+1)" in html) is shown


def test_crawl_change_page_shows_the_report(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:crawls_crawl_change", args=[archive.crawl.pk]))

    assert badge("sealed") in html
    assert "HTTP 404 from http://good.example/favicon.ico" in html
    snapshots = reverse("admin:core_snapshot_changelist") + f"?crawl__id__exact={archive.crawl.pk}"
    assert href(snapshots) in html
    assert "2 snapshots" in html


# --- snapshots -----------------------------------------------------------------------------------


def test_snapshot_changelist(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:core_snapshot_changelist"))

    assert "http://good.example/" in html
    assert "http://bad.example/" in html
    assert badge("sealed") in html
    assert badge("failed") in html
    assert badge("succeeded") in html  # the results column
    assert badge("skipped") in html
    assert href(file_url(archive.good, "wget/good.example/index.html")) in html
    assert 'title="finalizing failed: disk full"' in html


@pytest.mark.parametrize(
    ("query", "good", "bad"),
    [
        ("?status__exact=failed", False, True),
        ("?status__exact=sealed", True, False),
        ("?results__extractor=favicon", True, False),
        ("?q=Good+Page", True, False),
        ("?q=bad.example", False, True),
        ("?tags__id__exact={tag}", True, False),
        ("?crawl__id__exact={crawl}", True, True),
    ],
)
def test_snapshot_changelist_filters(
    admin_client: Client, archive: Archive, query: str, good: bool, bad: bool
) -> None:
    query = query.format(tag=archive.tag.pk, crawl=archive.crawl.pk)

    html = page(admin_client, reverse("admin:core_snapshot_changelist") + query)

    assert ('href="http://good.example/"' in html) is good
    assert ('href="http://bad.example/"' in html) is bad


def test_snapshot_change_page_links_every_file(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:core_snapshot_change", args=[archive.good.pk]))

    for name in [*archive.wget_files, "title/title.txt", "index.json"]:
        assert href(file_url(archive.good, name)) in html
    assert badge("sealed") in html
    assert badge("failed") in html  # the favicon result inline
    assert "GNU Wget 1.21.3" in html
    assert "newsroom" in html


def test_snapshot_change_page_without_a_folder(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:core_snapshot_change", args=[archive.bad.pk]))

    assert badge("failed") in html
    assert "finalizing failed: disk full" in html


def test_linked_files_are_served(admin_client: Client, archive: Archive) -> None:
    response = admin_client.get(file_url(archive.good, "wget/good.example/index.html"))

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"content of wget/good.example/index.html"


# --- archive results -----------------------------------------------------------------------------


def test_result_changelist(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:core_archiveresult_changelist"))

    for status in ("succeeded", "failed", "skipped"):
        assert badge(status) in html
    assert href(file_url(archive.good, "wget/good.example/index.html")) in html
    assert "HTTP 404 from http://good.example/favicon.ico" in html
    assert "Good Page Title" in html


@pytest.mark.parametrize(
    ("query", "extractors"),
    [
        ("?status__exact=failed", {"favicon"}),
        ("?status__exact=skipped", {"wget"}),
        ("?extractor__exact=wget", {"wget"}),
        ("?extractor=title", {"title"}),
        ("?q=favicon.ico", {"favicon"}),
        ("?q=bad.example", {"wget"}),
    ],
)
def test_result_changelist_filters(
    admin_client: Client, archive: Archive, query: str, extractors: set[str]
) -> None:
    response = admin_client.get(reverse("admin:core_archiveresult_changelist") + query)

    assert response.status_code == 200
    shown = {result.extractor for result in response.context["cl"].result_list}
    assert shown == extractors


def test_result_change_page(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:core_archiveresult_change", args=[archive.wget.pk]))

    assert badge("succeeded") in html
    assert "/usr/bin/wget --no-verbose http://good.example/" in html
    for name in archive.wget_files:
        assert href(file_url(archive.good, name)) in html


# --- nothing is edited by hand -------------------------------------------------------------------


MODELS = [
    ("crawls", "crawl", "crawl"),
    ("core", "snapshot", "good"),
    ("core", "archiveresult", "favicon"),
]


@pytest.mark.parametrize(("app", "model", "attribute"), MODELS)
def test_status_is_never_a_form_field(
    admin_client: Client, archive: Archive, app: str, model: str, attribute: str
) -> None:
    record = getattr(archive, attribute)

    response = admin_client.get(reverse(f"admin:{app}_{model}_change", args=[record.pk]))

    assert response.status_code == 200
    assert "status" not in response.context["adminform"].form.fields
    html = response.content.decode()
    assert 'name="status"' not in html
    assert 'name="_save"' not in html
    assert badge(record.status) in html


@pytest.mark.parametrize(("app", "model", "attribute"), MODELS)
def test_posting_to_the_change_page_is_forbidden(
    admin_client: Client, archive: Archive, app: str, model: str, attribute: str
) -> None:
    record = getattr(archive, attribute)
    before = type(record).objects.get(pk=record.pk).status

    response = admin_client.post(
        reverse(f"admin:{app}_{model}_change", args=[record.pk]),
        {"status": "queued", "error": "", "url": "http://evil.example/", "_save": "Save"},
    )

    assert response.status_code == 403
    after = type(record).objects.get(pk=record.pk)
    assert after.status == before
    assert getattr(after, "url", "") != "http://evil.example/"


@pytest.mark.parametrize(("app", "model", "attribute"), MODELS)
def test_add_and_delete_are_forbidden(
    admin_client: Client, archive: Archive, app: str, model: str, attribute: str
) -> None:
    record = getattr(archive, attribute)

    assert admin_client.get(reverse(f"admin:{app}_{model}_add")).status_code == 403
    assert admin_client.post(reverse(f"admin:{app}_{model}_add"), {}).status_code == 403
    delete = reverse(f"admin:{app}_{model}_delete", args=[record.pk])
    assert admin_client.get(delete).status_code == 403
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert type(record).objects.filter(pk=record.pk).exists()


@pytest.mark.parametrize(("app", "model", "attribute"), MODELS)
def test_changelist_offers_no_add_or_delete(
    admin_client: Client, archive: Archive, app: str, model: str, attribute: str
) -> None:
    html = page(admin_client, reverse(f"admin:{app}_{model}_changelist"))

    assert href(reverse(f"admin:{app}_{model}_add")) not in html
    assert "delete_selected" not in html


# --- actions -------------------------------------------------------------------------------------


def test_rearchive_action_queues_final_snapshots_and_keeps_their_files(
    admin_client: Client, archive: Archive
) -> None:
    in_progress = baker.make(
        Snapshot, crawl=archive.crawl, url="http://busy.example/", status=SnapshotStatus.STARTED
    )
    changelist = reverse("admin:core_snapshot_changelist")

    response = admin_client.post(
        changelist,
        {"action": "rearchive", "_selected_action": [archive.good.pk, in_progress.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "1 snapshot(s) queued to be archived again." in html
    assert "1 snapshot(s) still in progress were left alone." in html
    good = Snapshot.objects.get(pk=archive.good.pk)
    assert good.status == SnapshotStatus.QUEUED
    assert Snapshot.objects.get(pk=in_progress.pk).status == SnapshotStatus.STARTED
    wget = ArchiveResult.objects.get(pk=archive.wget.pk)
    assert wget.status == ResultStatus.QUEUED
    moved = wget.history[0]["output_files"]
    assert [path.split("/", 2)[2] for path in moved] == archive.wget_files
    assert all((good.output_dir / path).is_file() for path in moved)
    assert Crawl.objects.get(pk=archive.crawl.pk).status == CrawlStatus.STARTED


def test_retry_failed_action_queues_failed_results_again(
    admin_client: Client, archive: Archive
) -> None:
    response = admin_client.post(
        reverse("admin:core_snapshot_changelist"),
        {"action": "retry_failed", "_selected_action": [archive.good.pk]},
        follow=True,
    )

    assert "1 failed result(s) of 1 snapshot(s) queued again." in response.content.decode()
    assert Snapshot.objects.get(pk=archive.good.pk).status == SnapshotStatus.STARTED
    assert ArchiveResult.objects.get(pk=archive.favicon.pk).status == ResultStatus.QUEUED
    assert ArchiveResult.objects.get(pk=archive.wget.pk).status == ResultStatus.SUCCEEDED
