"""Keeping only changes (issue 20 item 4; core/services/unchanged.py): with a crawl's
``only_changes`` a page that serves its last capture's bytes again is recorded as a small
capture that points at that one. Real pipeline, wget and curl against a site on 127.0.0.1."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django_fsm import TransitionNotAllowed
from model_bakery import baker
from warcio.archiveiterator import ArchiveIterator

from core.choices import SnapshotStatus
from core.models import PayloadRevisit, Snapshot
from core.services.captures import url_captures
from core.services.crawls import CrawlOptions, crawl_create
from core.services.dedup import has_replay_wacz, snapshot_replay_wacz
from core.services.fixity import local_problems
from core.services.personas import persona_save
from core.services.schedules import schedule_create, schedule_run
from core.services.unchanged import WARC_PATH
from core.tests.dedup_site import DedupSite, site_files
from core.tests.pipeline import archive_crawl
from core.tests.users import staff_with
from crawls.models import Crawl, CrawlSchedule

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

EXTRACTORS = ["headers", "wget", "title", "htmltotext"]
WGET_WARC = "wget/warc/archive.warc.gz"
ADD = "crawls.add_crawl"
COOKIES = "# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tpaper-7\n"


@pytest.fixture(autouse=True)
def extractors(settings) -> None:
    settings.EXTRACTORS = EXTRACTORS


def capture(
    dedup_site: DedupSite, *, only_changes: bool = True, created_by=None, persona: str = ""
) -> Snapshot:
    """Archive the site's page in a crawl of its own through the pipeline; return it sealed."""
    crawl = crawl_create(
        data=f"{dedup_site.url('/index.html')}\n".encode(),
        source_name="urls.txt",
        options=CrawlOptions(only_changes=only_changes, persona=persona),
        created_by=created_by,
    )
    archive_crawl(crawl)
    snapshot = Snapshot.objects.get(crawl=crawl)
    assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
    return snapshot


def page_records(snapshot: Snapshot, warc: str) -> list[dict]:
    """The response and revisit records of the page in ``snapshot``'s WARC ``warc``."""
    found = []
    with open(snapshot.output_dir / warc, "rb") as stream:
        for record in ArchiveIterator(stream):
            uri = record.rec_headers.get_header("WARC-Target-URI") or ""
            if record.rec_type in ("response", "revisit") and uri.endswith("/index.html"):
                found.append(
                    {
                        "type": record.rec_type,
                        "headers": dict(record.rec_headers.headers),
                        "payload": record.content_stream().read(),
                    }
                )
    return found


def folder_bytes(snapshot: Snapshot) -> int:
    return sum(p.stat().st_size for p in snapshot.output_dir.rglob("*") if p.is_file())


def test_an_unchanged_page_is_a_small_capture_that_points_at_the_last_one(dedup_site) -> None:
    first, second = capture(dedup_site, only_changes=False), capture(dedup_site)

    assert second.unchanged_since == first
    assert not second.results.exists()  # no extractor ran again
    names = {p.relative_to(second.output_dir).as_posix() for p in second.output_dir.rglob("*")}
    assert {n for n in names if "." in n.rsplit("/", 1)[-1]} == {
        "index.json", "manifest-sha256.txt", "manifest-sha256.txt.sig", WARC_PATH
    }  # fmt: skip
    # Its one record is a revisit of the first capture's page record.
    [original] = page_records(first, WGET_WARC)
    [revisit] = page_records(second, WARC_PATH)
    assert revisit["type"] == "revisit"
    assert revisit["headers"]["WARC-Refers-To"] == original["headers"]["WARC-Record-ID"]
    assert revisit["headers"]["WARC-Payload-Digest"] == original["headers"]["WARC-Payload-Digest"]
    assert PayloadRevisit.objects.filter(snapshot=second).count() == 1
    # It verifies alone, is a fraction of the first's size, and says what it points at.
    assert local_problems(second)[0] == []
    assert folder_bytes(second) < folder_bytes(first) / 10
    index = json.loads((second.output_dir / "index.json").read_text())
    assert index["snapshot"]["unchanged_since"] == str(first.pk)
    assert second.title == first.title == "Unchanged page"
    # The timeline marks it unchanged; the crawl's report counts it.
    assert second.content_digest == first.content_digest != ""
    [latest, _first] = url_captures(url=second.url)
    assert latest.snapshot == second and latest.unchanged_since == first.start_ts
    assert second.crawl.report["unchanged"] == 1


def test_a_changed_page_is_archived_in_full(dedup_site) -> None:
    first = capture(dedup_site)
    dedup_site.write("index.html", site_files()["index.html"].replace(b"Stored once", b"Changed"))

    second = capture(dedup_site)

    assert first.unchanged_since is None  # nothing to compare the first capture with
    assert second.unchanged_since is None
    assert second.results.filter(extractor="wget", status="succeeded").exists()
    assert not (second.output_dir / WARC_PATH).exists()
    assert second.crawl.report["unchanged"] == 0


def test_a_page_unchanged_twice_points_at_the_capture_that_holds_its_bytes(dedup_site) -> None:
    first = capture(dedup_site)
    second, third = capture(dedup_site), capture(dedup_site)

    assert second.unchanged_since == third.unchanged_since == first
    [revisit] = page_records(third, WARC_PATH)
    [original] = page_records(first, WGET_WARC)
    assert revisit["headers"]["WARC-Refers-To"] == original["headers"]["WARC-Record-ID"]


def test_it_points_only_at_a_capture_of_the_same_user_and_persona(dedup_site) -> None:
    # Pointing at a capture replays that capture in its place: never another user's (they
    # read only their own), nor what another persona, or none, saw.
    ann, bob = staff_with("ann", ADD), staff_with("bob", ADD)
    persona_save(name="reader", cookies=COOKIES)
    anns = capture(dedup_site, created_by=ann)

    bobs = capture(dedup_site, created_by=bob)
    bobs_again = capture(dedup_site, created_by=bob)
    anns_as_reader = capture(dedup_site, created_by=ann, persona="reader")
    anns_again = capture(dedup_site, created_by=ann)

    assert bobs.unchanged_since is None and bobs.results.exists()  # archived in full
    assert bobs_again.unchanged_since == bobs
    assert anns_as_reader.unchanged_since is None
    assert anns_again.unchanged_since == anns


def test_it_points_at_its_own_kind_of_capture_when_the_bytes_are_someone_elses(
    dedup_site,
) -> None:
    # Bob's full capture stores the page as a revisit of Ann's payload (shared storage); his
    # next unchanged capture points at his own capture, which replays whole, not at Ann's.
    ann, bob = staff_with("ann", ADD), staff_with("bob", ADD)
    capture(dedup_site, created_by=ann)
    bobs = capture(dedup_site, created_by=bob, only_changes=False)
    assert PayloadRevisit.objects.filter(snapshot=bobs).exists()

    bobs_again = capture(dedup_site, created_by=bob)

    assert bobs_again.unchanged_since == bobs
    assert has_replay_wacz(bobs_again)


def test_without_only_changes_an_unchanged_page_is_archived_again(dedup_site) -> None:
    capture(dedup_site)
    second = capture(dedup_site, only_changes=False)

    assert second.unchanged_since is None
    assert second.results.count() == len(EXTRACTORS)
    assert "unchanged" not in second.crawl.report


def test_removing_the_capture_it_points_at_leaves_it_whole(dedup_site) -> None:
    first = capture(dedup_site)
    second = capture(dedup_site)

    call_command(
        "remove", "--crawl", str(first.crawl_id), "--delete", "--yes", stdout=io.StringIO()
    )

    second = Snapshot.objects.get(pk=second.pk)
    assert second.unchanged_since is None and second.status == SnapshotStatus.SEALED
    [record] = page_records(second, WARC_PATH)
    assert record["type"] == "response"
    assert record["payload"] == site_files()["index.html"]
    assert local_problems(second)[0] == []


def test_the_snapshot_page_and_the_api_name_the_capture_it_points_at(dedup_site) -> None:
    first = capture(dedup_site)
    second = capture(dedup_site)
    client = Client()
    client.force_login(staff_with("keeper", "core.view_snapshot"))

    page = client.get(f"/snapshot/{second.pk}/").content.decode()
    detail = client.get(f"/api/v1/snapshots/{second.pk}").json()

    assert 'id="unchanged"' in page and f"/snapshot/{first.pk}/" in page
    assert detail["unchanged_since"] == str(first.pk)
    assert client.get(f"/api/v1/snapshots/{first.pk}").json()["unchanged_since"] is None
    timeline = client.get(f"/url/{second.url}").content.decode()
    assert timeline.count(">a revisit</span>") == 1


def test_an_unchanged_capture_replays_as_the_capture_it_points_at(dedup_site) -> None:
    first = capture(dedup_site)
    second = capture(dedup_site)

    assert has_replay_wacz(second)
    assert snapshot_replay_wacz(snapshot=second) == snapshot_replay_wacz(snapshot=first)
    # Its page's WACZ download is that capture's, named after it.
    reader = Client()
    reader.force_login(staff_with("keeper", "core.view_snapshot"))
    download = reader.get(f"/snapshot/{second.pk}/wacz/")
    assert download.status_code == 200
    assert download["Content-Disposition"] == f'attachment; filename="{first.pk}.wacz"'


# --- the option: add, schedules, the add page, the API -------------------------------------------


def test_a_schedule_that_keeps_only_changes_makes_crawls_that_do() -> None:
    schedule = schedule_create(
        cron="0 * * * *",
        data=b"https://example.com/\n",
        source_name="urls.txt",
        options=CrawlOptions(only_changes=True),
    )
    CrawlSchedule.objects.filter(pk=schedule.pk).update(
        next_run_at=timezone.now() - timedelta(minutes=1)
    )

    crawl = schedule_run(schedule=CrawlSchedule.objects.get(pk=schedule.pk))

    assert schedule.only_changes and crawl.only_changes


def test_the_command_line_add_and_schedule_take_only_changes() -> None:
    out = io.StringIO()
    call_command("add", "--only-changes", "https://example.com/", stdout=out)
    call_command("schedule", "add", "0 * * * *", "https://example.org/", "--only-changes",
                 stdout=out)  # fmt: skip

    assert Crawl.objects.get().only_changes
    assert CrawlSchedule.objects.get().only_changes
    listing = io.StringIO()
    call_command("schedule", "list", stdout=listing)
    assert "[only changes]" in listing.getvalue()


def test_the_add_page_and_the_api_take_only_changes(settings) -> None:
    client = Client()
    client.force_login(staff_with("adder", "crawls.add_crawl", "crawls.view_crawl"))

    client.post("/add/", {"urls": "https://example.com/", "parser": "auto", "depth": 0,
                          "only_changes": "on"})  # fmt: skip
    made = client.post("/api/v1/crawls", {"urls": ["https://example.org/"], "only_changes": True},
                       content_type="application/json")  # fmt: skip

    assert made.status_code == 201 and made.json()["only_changes"] is True
    assert sorted(Crawl.objects.values_list("only_changes", flat=True)) == [True, True]


# --- the transition ------------------------------------------------------------------------------


def test_start_unchanged_starts_a_queued_snapshot_pointing_at_the_earlier_one() -> None:
    earlier = baker.make(Snapshot, status=SnapshotStatus.SEALED)
    snapshot = baker.make(Snapshot, status=SnapshotStatus.QUEUED)

    snapshot.start_unchanged(since=earlier)

    assert snapshot.status == SnapshotStatus.STARTED
    assert snapshot.unchanged_since == earlier and snapshot.start_ts is not None


@pytest.mark.parametrize("status", [SnapshotStatus.STARTED, SnapshotStatus.SEALED])
def test_only_a_queued_snapshot_starts_unchanged(status) -> None:
    earlier = baker.make(Snapshot, status=SnapshotStatus.SEALED)
    snapshot = baker.make(Snapshot, status=status)

    with pytest.raises(TransitionNotAllowed):
        snapshot.start_unchanged(since=earlier)
