"""The admin (core/admin/, crawls/admin.py): every page renders, states show as badges
with links to output files, and nothing is edited by hand (status changes only by transitions)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from model_bakery import baker

from core.admin.display import file_url
from core.choices import CopyStatus, FixityOutcome, ResultStatus, SnapshotStatus
from core.models import ArchiveResult, FixityCheck, Snapshot, StorageCopy, Tag
from core.services.copies import copy_tick
from core.services.finalizing import snapshot_finalize
from core.services.fixity import snapshot_audit
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def own_data_dir(settings, tmp_path: Path) -> None:
    """A DATA_DIR of the test's own (settings_for_tests.py serves static files unhashed; the
    empty STATIC_ROOT WhiteNoise wants is made by conftest.py)."""
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"


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


def test_crawl_change_page_shows_how_the_input_was_read(
    admin_client: Client, archive: Archive
) -> None:
    archive.crawl.input_report = {
        "format": "bookmarks",
        "accepted": 2,
        "rejected": 1,
        "tags_left_out": 2,  # named past the listed problems
        "problems": ["bookmarks.html line 9: 'place:x' is not a valid URL"],
    }
    archive.crawl.save()

    html = page(admin_client, reverse("admin:crawls_crawl_change", args=[archive.crawl.pk]))

    assert "2 URL(s) read as bookmarks" in html
    assert "1 entry left out, 2 tags left out:" in html
    assert "bookmarks.html line 9: &#x27;place:x&#x27; is not a valid URL" in html
    assert "... and 2 more" in html


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


def test_a_snapshot_page_costs_the_same_queries_with_more_results(admin_client: Client) -> None:
    """No query per result row (the inline joins each result's snapshot)."""

    def queries_for(extractors: list[str]) -> int:
        snapshot = baker.make(
            Snapshot, url=f"http://{len(extractors)}.example/", crawl=baker.make(Crawl)
        )
        for extractor in extractors:
            baker.make(
                ArchiveResult, snapshot=snapshot, extractor=extractor, status=ResultStatus.SUCCEEDED
            )
        with CaptureQueriesContext(connection) as queries:
            assert (
                admin_client.get(
                    reverse("admin:core_snapshot_change", args=[snapshot.pk])
                ).status_code
                == 200
            )
        return len(queries)

    queries_for(["title"])  # the first page also fills per-process caches (content types)
    assert queries_for(["title", "wget"]) == queries_for(["title", "wget", "favicon", "dom", "pdf"])


def test_snapshot_change_page_without_a_folder(admin_client: Client, archive: Archive) -> None:
    html = page(admin_client, reverse("admin:core_snapshot_change", args=[archive.bad.pk]))

    assert badge("failed") in html
    assert "finalizing failed: disk full" in html


def test_linked_files_are_served(admin_client: Client, archive: Archive) -> None:
    # An archived page goes to its signed view link (core/web/viewing.py).
    response = admin_client.get(file_url(archive.good, "wget/good.example/index.html"), follow=True)

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


def test_rearchive_from_a_list_filtered_by_status(admin_client: Client, archive: Archive) -> None:
    response = admin_client.post(
        reverse("admin:core_snapshot_changelist") + "?status__exact=sealed",
        {"action": "rearchive", "_selected_action": [archive.good.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "1 snapshot(s) queued to be archived again." in html
    assert "left alone" not in html  # it left the filtered list by being re-queued
    assert Snapshot.objects.get(pk=archive.good.pk).status == SnapshotStatus.QUEUED


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


# --- preservation: fixity and storage copies -----------------------------------------------------


FILE_SYSTEM = "django.core.files.storage.FileSystemStorage"


def use_mirror(settings, location: Path) -> None:
    """One storage target, "mirror", a folder (setting STORAGES empties Django's storage cache)."""
    targets = {"mirror": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": str(location)}}}
    settings.STORAGE_TARGETS = targets
    settings.STORAGES = {**settings.STORAGES, **targets}


def sealed_snapshot(crawl: Crawl, url: str = "http://sealed.example/") -> Snapshot:
    """A snapshot finalized for real (core.services.finalizing): folder, manifest, signature,
    copies."""
    snapshot = baker.make(
        Snapshot, crawl=crawl, url=url, status=SnapshotStatus.FINALIZING, retry_at=timezone.now()
    )
    title = snapshot.output_dir / "title" / "title.txt"
    title.parent.mkdir(parents=True)
    title.write_text("A sealed page\n")
    baker.make(
        ArchiveResult,
        snapshot=snapshot,
        extractor="title",
        status=ResultStatus.SUCCEEDED,
        output="A sealed page",
        output_files=["title/title.txt"],
        attempts=1,
        retry_at=None,
    )
    snapshot_finalize(snapshot=snapshot)
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
    return snapshot


def store_copies(snapshot: Snapshot) -> None:
    for copy in snapshot.copies.all():
        copy_tick(copy=copy)
    assert set(snapshot.copies.values_list("status", flat=True)) <= {CopyStatus.STORED}


def make_check(snapshot: Snapshot, outcome: str, location: str = "local", **fields):
    return baker.make(FixityCheck, snapshot=snapshot, location=location, outcome=outcome, **fields)


def make_copy(snapshot: Snapshot, target: str, status: str, **fields) -> StorageCopy:
    fields.setdefault("retry_at", None)
    return baker.make(StorageCopy, snapshot=snapshot, target=target, status=status, **fields)


class Preserved:
    """Snapshots in every fixity situation, with storage copies in several states."""

    def __init__(self) -> None:
        self.crawl = baker.make(Crawl, status=CrawlStatus.SEALED, retry_at=None)
        earlier = timezone.now() - timedelta(days=2)

        def sealed(url: str) -> Snapshot:
            return baker.make(
                Snapshot, crawl=self.crawl, url=url, status=SnapshotStatus.SEALED, retry_at=None
            )

        self.sound = sealed("http://sound.example/")
        make_check(self.sound, FixityOutcome.FLAGGED, checked_at=earlier)  # repaired since
        make_check(self.sound, FixityOutcome.OK)
        make_copy(self.sound, "mirror", CopyStatus.STORED, size=2048, verified_at=timezone.now())
        make_copy(self.sound, "s3", CopyStatus.STORED, size=2048)

        self.flagged = sealed("http://flagged.example/")
        make_check(self.flagged, FixityOutcome.OK, checked_at=earlier)
        make_check(self.flagged, FixityOutcome.OK, location="mirror")
        make_check(
            self.flagged, FixityOutcome.FLAGGED, location="s3",
            problems=["checksum mismatch: title/title.txt", "missing: index.json"],
        )  # fmt: skip
        make_check(self.flagged, FixityOutcome.UNREACHABLE, location="s3")  # learnt nothing
        make_copy(self.flagged, "mirror", CopyStatus.STORED)
        self.damaged = make_copy(
            self.flagged, "s3", CopyStatus.DAMAGED, error="checksum mismatch: title/title.txt"
        )

        self.unchecked = sealed("http://unchecked.example/")
        make_check(self.unchecked, FixityOutcome.UNREACHABLE, location="s3")
        self.failed_copy = make_copy(
            self.unchecked, "s3", CopyStatus.FAILED, attempts=10,
            error="attempts exhausted (10): connection refused",
        )  # fmt: skip
        make_copy(self.unchecked, "mirror", CopyStatus.BACKOFF, attempts=2)

        self.queued = baker.make(
            Snapshot, crawl=self.crawl, url="http://queued.example/", status=SnapshotStatus.QUEUED
        )


@pytest.fixture
def preserved() -> Preserved:
    return Preserved()


def changelist_rows(html: str) -> dict[str, str]:
    """``{snapshot URL: its row's HTML}`` from the snapshot change list."""
    rows = {}
    for row in html.split("<tr")[1:]:
        for url in ("sound", "flagged", "unchecked", "queued"):
            if f'href="http://{url}.example/"' in row:
                rows[url] = row.split("</tr>")[0]
    return rows


def test_snapshot_changelist_shows_fixity_and_copies(
    admin_client: Client, preserved: Preserved
) -> None:
    html = page(admin_client, reverse("admin:core_snapshot_changelist"))

    rows = changelist_rows(html)
    assert badge("sound") in rows["sound"]
    assert "2/2 stored" in rows["sound"]
    assert badge("flagged") in rows["flagged"]
    assert "1/2 stored, 1 damaged" in rows["flagged"]
    assert badge("unchecked") in rows["unchecked"]
    assert "0/2 stored, 1 failed, 1 pending" in rows["unchecked"]
    assert badge("flagged") not in rows["queued"] and badge("unchecked") not in rows["queued"]
    assert 'class="sortable column-fixity' in html  # the column, sortable by the last check
    assert "?fixity=flagged" in html and "?fixity=unchecked" in html  # the filter


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("?fixity=flagged", {"flagged"}),
        ("?fixity=sound", {"sound"}),
        ("?fixity=unchecked", {"unchecked"}),
        ("?fixity=flagged&status__exact=sealed", {"flagged"}),
        ("", {"sound", "flagged", "unchecked", "queued"}),
    ],
)
def test_snapshot_changelist_fixity_filter(
    admin_client: Client, preserved: Preserved, query: str, shown: set[str]
) -> None:
    response = admin_client.get(reverse("admin:core_snapshot_changelist") + query)

    assert response.status_code == 200
    urls = {snapshot.url for snapshot in response.context["cl"].result_list}
    assert urls == {f"http://{name}.example/" for name in shown}


def test_the_fixity_filter_counts_with_show_counts(
    admin_client: Client, preserved: Preserved
) -> None:
    html = page(admin_client, reverse("admin:core_snapshot_changelist") + "?_facets=True")

    for label in ("flagged", "sound", "never checked"):
        assert f"{label} (1)" in html


def test_the_fixity_filter_agrees_with_the_flagged_queryset(preserved: Preserved) -> None:
    assert list(Snapshot.objects.flagged()) == [preserved.flagged]


def test_snapshot_changelist_queries_do_not_grow_with_the_rows(
    admin_client: Client, preserved: Preserved
) -> None:
    url = reverse("admin:core_snapshot_changelist")
    admin_client.get(url)  # session and content types cached

    with CaptureQueriesContext(connection) as few:
        page(admin_client, url)
    for n in range(6):
        snapshot = baker.make(
            Snapshot, crawl=preserved.crawl, url=f"http://more{n}.example/",
            status=SnapshotStatus.SEALED, retry_at=None,
        )  # fmt: skip
        make_check(snapshot, FixityOutcome.FLAGGED if n % 2 else FixityOutcome.OK)
        make_copy(snapshot, "mirror", CopyStatus.STORED)
    with CaptureQueriesContext(connection) as many:
        page(admin_client, url)

    assert len(many.captured_queries) == len(few.captured_queries)


def test_snapshot_change_page_shows_copies_checks_and_the_signature(
    admin_client: Client, preserved: Preserved
) -> None:
    Snapshot.objects.filter(pk=preserved.flagged.pk).update(
        manifest_sha256="ab" * 32,
        signed_by="sha256:" + "cd" * 32,
        content_digest="sha256:" + "ef" * 32,
    )

    html = page(admin_client, reverse("admin:core_snapshot_change", args=[preserved.flagged.pk]))

    assert "ab" * 32 in html
    assert "sha256:" + "ef" * 32 in html  # the readable text's digest, which the timeline compares
    assert "sha256:" + "cd" * 32 in html
    assert badge("flagged") in html
    assert badge("damaged") in html and badge("stored") in html  # the copies inline
    assert "checksum mismatch: title/title.txt" in html
    assert "missing: index.json" in html
    assert badge("ok") in html and badge("unreachable") in html  # the checks inline
    checks = reverse("admin:core_fixitycheck_changelist")
    assert href(f"{checks}?snapshot__id__exact={preserved.flagged.pk}") in html
    assert "all 4 check(s)" in html
    assert 'name="status"' not in html and 'name="_save"' not in html


def test_snapshot_change_page_shows_the_latest_twenty_checks(
    admin_client: Client, preserved: Preserved
) -> None:
    start = timezone.now() - timedelta(days=100)
    for day in range(25):
        make_check(
            preserved.sound, FixityOutcome.OK, checked_at=start + timedelta(days=day),
            files=100 + day,
        )  # fmt: skip

    response = admin_client.get(reverse("admin:core_snapshot_change", args=[preserved.sound.pk]))

    assert response.status_code == 200
    formset = next(
        f for f in response.context["inline_admin_formsets"] if f.formset.model is FixityCheck
    )
    shown = [form.instance for form in formset.formset.forms]
    assert len(shown) == 20
    assert shown == list(FixityCheck.objects.filter(snapshot=preserved.sound)[:20])
    assert "(the latest 20)" in response.content.decode()


def test_verify_action_audits_sealed_snapshots_and_counts_what_it_found(
    admin_client: Client, settings, tmp_path: Path
) -> None:
    settings.PACKAGE_WACZ = False
    use_mirror(settings, tmp_path / "mirror")
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    kept = sealed_snapshot(crawl, "http://kept.example/")
    altered = sealed_snapshot(crawl, "http://altered.example/")
    store_copies(kept)
    store_copies(altered)
    title = altered.output_dir / "title" / "title.txt"
    title.unlink()  # kept's identical title is the same file on disk (core/folder/blobs.py)
    title.write_text("Changed behind our back\n")
    busy = baker.make(Snapshot, crawl=crawl, url="http://busy.example/")
    changelist = reverse("admin:core_snapshot_changelist")

    response = admin_client.post(
        changelist,
        {"action": "verify_fixity", "_selected_action": [kept.pk, altered.pk, busy.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "2 verified: 1 sound, 1 flagged." in html
    assert "Flagged: http://altered.example/." in html
    assert "1 snapshot(s) not sealed were left alone" in html
    assert list(Snapshot.objects.flagged()) == [altered]
    local = FixityCheck.objects.filter(location="local").order_by("snapshot__url")
    assert [(c.snapshot.url, c.outcome) for c in local] == [
        ("http://altered.example/", FixityOutcome.FLAGGED),
        ("http://kept.example/", FixityOutcome.OK),
    ]
    assert FixityCheck.objects.filter(location="mirror", checked_at__gt=local[0].checked_at)
    assert not busy.fixity_checks.exists()
    rows = page(admin_client, changelist + "?fixity=flagged")
    assert 'href="http://altered.example/"' in rows and 'href="http://kept.example/"' not in rows


def test_verify_action_names_targets_it_could_not_read(
    admin_client: Client, settings, tmp_path: Path
) -> None:
    settings.PACKAGE_WACZ = False
    use_mirror(settings, tmp_path / "mirror")
    snapshot = sealed_snapshot(baker.make(Crawl, status=CrawlStatus.STARTED))
    store_copies(snapshot)
    settings.STORAGE_TARGETS = {}  # the mirror was removed from the settings

    response = admin_client.post(
        reverse("admin:core_snapshot_changelist"),
        {"action": "verify_fixity", "_selected_action": [snapshot.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "1 verified: 1 sound, 0 flagged." in html
    assert "Not reachable, so not checked: mirror." in html
    assert snapshot.fixity_checks.filter(outcome=FixityOutcome.UNREACHABLE).count() == 1


@pytest.mark.parametrize(
    ("action", "command"),
    [("verify_fixity", "manage.py verify"), ("restore_damaged", "manage.py restore")],
)
def test_fixity_actions_send_large_selections_to_the_command(
    admin_client: Client, monkeypatch, action: str, command: str
) -> None:
    from core.admin import snapshots as core_admin

    monkeypatch.setattr(core_admin, "ADMIN_FIXITY_LIMIT", 1)
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    snapshots = [sealed_snapshot(crawl, f"http://{n}.example/") for n in range(2)]

    response = admin_client.post(
        reverse("admin:core_snapshot_changelist"),
        {"action": action, "_selected_action": [s.pk for s in snapshots]},
        follow=True,
    )

    html = response.content.decode()
    assert f"2 snapshots are more than the admin checks at once (1): use {command}" in html
    assert not FixityCheck.objects.exists()


def test_restore_action_repairs_a_damaged_folder_from_its_copy(
    admin_client: Client, settings, tmp_path: Path
) -> None:
    settings.PACKAGE_WACZ = False
    use_mirror(settings, tmp_path / "mirror")
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    snapshot = sealed_snapshot(crawl)
    store_copies(snapshot)
    title = snapshot.output_dir / "title" / "title.txt"
    title.write_text("Changed behind our back\n")
    snapshot_audit(snapshot=snapshot)
    assert list(Snapshot.objects.flagged()) == [snapshot]

    response = admin_client.post(
        reverse("admin:core_snapshot_changelist") + "?fixity=flagged",  # no longer, once repaired
        {"action": "restore_damaged", "_selected_action": [snapshot.pk]},
        follow=True,
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "Repaired http://sealed.example/: restored the local folder from mirror." in html
    assert "left alone" not in html
    assert title.read_text() == "A sealed page\n"
    assert not Snapshot.objects.flagged().exists()


def test_restore_action_reports_what_cannot_be_restored(
    admin_client: Client, settings, tmp_path: Path
) -> None:
    settings.PACKAGE_WACZ = False
    settings.STORAGE_TARGETS = {}
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED)
    broken = sealed_snapshot(crawl, "http://broken.example/")
    sound = sealed_snapshot(crawl, "http://fine.example/")
    (broken.output_dir / "title" / "title.txt").unlink()

    response = admin_client.post(
        reverse("admin:core_snapshot_changelist"),
        {"action": "restore_damaged", "_selected_action": [broken.pk, sound.pk]},
        follow=True,
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "Cannot restore http://broken.example/: snapshot" in html
    assert "has no stored copy to restore from" in html
    assert 'class="error"' in html
    assert "1 snapshot(s) sound: nothing to repair." in html
    assert list(Snapshot.objects.flagged()) == [broken]


# --- storage copies ------------------------------------------------------------------------------


def test_copy_changelist(admin_client: Client, preserved: Preserved) -> None:
    html = page(admin_client, reverse("admin:core_storagecopy_changelist"))

    for status in ("stored", "damaged", "failed", "backoff"):
        assert badge(status) in html
    assert "attempts exhausted (10): connection refused" in html
    assert "2.0\xa0KB" in html
    assert href(reverse("admin:core_snapshot_change", args=[preserved.flagged.pk])) in html
    assert href(reverse("admin:core_storagecopy_add")) not in html
    assert "delete_selected" not in html


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("?status__exact=damaged", {("flagged", "s3")}),
        ("?status__exact=failed", {("unchecked", "s3")}),
        ("?target=mirror", {("sound", "mirror"), ("flagged", "mirror"), ("unchecked", "mirror")}),
        ("?target=s3&status__exact=stored", {("sound", "s3")}),
        ("?q=unchecked.example", {("unchecked", "s3"), ("unchecked", "mirror")}),
    ],
)
def test_copy_changelist_filters(
    admin_client: Client, preserved: Preserved, query: str, shown: set[tuple[str, str]]
) -> None:
    response = admin_client.get(reverse("admin:core_storagecopy_changelist") + query)

    assert response.status_code == 200
    copies = {(c.snapshot.url, c.target) for c in response.context["cl"].result_list}
    assert copies == {(f"http://{name}.example/", target) for name, target in shown}


def test_copy_again_action_requeues_failed_and_damaged_copies(
    admin_client: Client, preserved: Preserved
) -> None:
    stored = preserved.sound.copies.get(target="mirror")
    before = timezone.now()

    response = admin_client.post(
        reverse("admin:core_storagecopy_changelist"),
        {
            "action": "copy_again",
            "_selected_action": [preserved.damaged.pk, preserved.failed_copy.pk, stored.pk],
        },
        follow=True,
    )

    html = response.content.decode()
    assert "2 copy(ies) queued to be copied again." in html
    assert "1 copy(ies) neither failed nor damaged were left alone." in html
    for copy in (preserved.damaged, preserved.failed_copy):
        copy = StorageCopy.objects.get(pk=copy.pk)
        assert copy.status == CopyStatus.QUEUED
        assert copy.attempts == 0 and copy.error == ""
        assert before <= copy.retry_at <= timezone.now()
    assert StorageCopy.objects.get(pk=stored.pk).status == CopyStatus.STORED


def test_copy_again_from_a_filtered_list(admin_client: Client, preserved: Preserved) -> None:
    response = admin_client.post(
        reverse("admin:core_storagecopy_changelist") + "?status__exact=damaged",
        {"action": "copy_again", "_selected_action": [preserved.damaged.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "1 copy(ies) queued to be copied again." in html
    assert "left alone" not in html  # the copy left the filtered list: it was not left alone
    assert StorageCopy.objects.get(pk=preserved.damaged.pk).status == CopyStatus.QUEUED


def test_copy_status_is_never_a_form_field(admin_client: Client, preserved: Preserved) -> None:
    change = reverse("admin:core_storagecopy_change", args=[preserved.damaged.pk])

    response = admin_client.get(change)
    posted = admin_client.post(change, {"status": "stored", "error": "", "_save": "Save"})

    assert response.status_code == 200
    assert "status" not in response.context["adminform"].form.fields
    html = response.content.decode()
    assert 'name="status"' not in html and 'name="_save"' not in html
    assert badge("damaged") in html
    assert posted.status_code == 403
    assert StorageCopy.objects.get(pk=preserved.damaged.pk).status == CopyStatus.DAMAGED
    assert admin_client.get(reverse("admin:core_storagecopy_add")).status_code == 403
    delete = reverse("admin:core_storagecopy_delete", args=[preserved.damaged.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403


# --- fixity checks -------------------------------------------------------------------------------


def test_fixity_check_changelist(admin_client: Client, preserved: Preserved) -> None:
    html = page(admin_client, reverse("admin:core_fixitycheck_changelist"))

    for outcome in ("ok", "flagged", "unreachable"):
        assert badge(outcome) in html
    assert "checksum mismatch: title/title.txt" in html
    assert href(reverse("admin:core_snapshot_change", args=[preserved.flagged.pk])) in html
    assert href(reverse("admin:core_fixitycheck_add")) not in html
    assert "delete_selected" not in html


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("?outcome__exact=flagged", [("flagged", "s3"), ("sound", "local")]),
        ("?location=s3", [("flagged", "s3"), ("flagged", "s3"), ("unchecked", "s3")]),
        ("?q=flagged.example", [("flagged", "local"), ("flagged", "mirror"), ("flagged", "s3"),
                                ("flagged", "s3")]),
        ("?snapshot__id__exact={sound}", [("sound", "local"), ("sound", "local")]),
    ],
)  # fmt: skip
def test_fixity_check_changelist_filters(
    admin_client: Client, preserved: Preserved, query: str, shown: list[tuple[str, str]]
) -> None:
    query = query.format(sound=preserved.sound.pk)

    response = admin_client.get(reverse("admin:core_fixitycheck_changelist") + query)

    assert response.status_code == 200
    checks = sorted((c.snapshot.url, c.location) for c in response.context["cl"].result_list)
    assert checks == [(f"http://{name}.example/", location) for name, location in shown]


def test_fixity_checks_are_never_added_changed_or_deleted(
    admin_client: Client, preserved: Preserved
) -> None:
    check = preserved.flagged.fixity_checks.get(outcome=FixityOutcome.FLAGGED)
    change = reverse("admin:core_fixitycheck_change", args=[check.pk])

    viewed = admin_client.get(change)
    posted = admin_client.post(change, {"outcome": "ok", "problems": "[]", "_save": "Save"})

    assert viewed.status_code == 200
    assert viewed.context["adminform"].form.fields == {}
    assert "missing: index.json" in viewed.content.decode()
    assert posted.status_code == 403
    assert admin_client.get(reverse("admin:core_fixitycheck_add")).status_code == 403
    assert admin_client.post(reverse("admin:core_fixitycheck_add"), {}).status_code == 403
    delete = reverse("admin:core_fixitycheck_delete", args=[check.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    check = FixityCheck.objects.get(pk=check.pk)
    assert check.outcome == FixityOutcome.FLAGGED
    assert check.problems == ["checksum mismatch: title/title.txt", "missing: index.json"]


def test_snapshot_changelist_shows_the_screenshot_linking_to_the_snapshot_page(
    admin_client: Client, preserved: Preserved
) -> None:
    snapshot = baker.make(
        Snapshot, crawl=preserved.crawl, url="http://shot.example/", status=SnapshotStatus.SEALED
    )
    baker.make(
        ArchiveResult, snapshot=snapshot, extractor="screenshot",
        status=ResultStatus.SUCCEEDED, output="screenshot.png",
        output_files=["screenshot/screenshot.png"],
    )  # fmt: skip

    page_html = admin_client.get(reverse("admin:core_snapshot_changelist")).content.decode()

    assert f'src="/archive/{snapshot.pk}/screenshot/screenshot.png"' in page_html
    assert f'href="/snapshot/{snapshot.pk}/"' in page_html
