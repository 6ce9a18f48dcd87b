"""Unchanged bytes stored once (issue 20 item 3; core/services/dedup.py, core/folder/revisits.py,
core/folder/blobs.py): a page archived again through the real pipeline (wget, curl, a server on
127.0.0.1) is written as WARC revisit records and hard links, every folder still verifies on its
own, and removing, re-archiving, exporting and reindexing keep every snapshot whole."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from warcio.archiveiterator import ArchiveIterator

from archive.testing import artifact_path, wait_until
from core.choices import SnapshotStatus
from core.folder.blobs import blob_path, share_files
from core.folder.formats import check_warc
from core.folder.manifest import read_manifest
from core.folder.revisits import PROFILES, Original, ToResponse, ToRevisit, rewrite_warc, scan_warc
from core.models import PayloadRecord, PayloadRevisit, Snapshot
from core.services.crawls import crawl_create
from core.services.dedup import has_replay_wacz, snapshot_replay_wacz
from core.services.fixity import local_problems, snapshot_audit
from core.services.rearchive import snapshot_rearchive
from core.services.reindex import archive_reindex
from core.services.removal import RemovalRefused, snapshot_remove
from core.tests.dedup_site import DedupSite, site_files
from core.tests.pipeline import archive_crawl
from core.tests.test_fixity import flip_byte
from core.tests.test_isolation import staff_browser
from core.tests.test_replay_theft import replayed
from core.tests.users import staff_with
from core.web.origins import replay_url
from crawls.models import Crawl

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

BAGIT = Path(sys.executable).parent / "bagit.py"
WGET_WARC = "wget/warc/archive.warc.gz"
# The site's files a capture of its page fetches, by path; all are past DEDUP_MIN_BYTES.
STORED_ONCE = ("/index.html", "/static/style.css", "/static/app.js", "/static/logo.png")


def capture(dedup_site: DedupSite, path: str = "/index.html") -> Snapshot:
    """Archive ``path`` of ``site`` in a crawl of its own through the pipeline; return it."""
    crawl = crawl_create(data=f"{dedup_site.url(path)}\n".encode(), source_name="urls.txt")
    archive_crawl(crawl)
    snapshot = Snapshot.objects.get(crawl=crawl)
    assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
    return snapshot


def records(snapshot: Snapshot, warc: str = WGET_WARC) -> dict[str, dict]:
    """The response and revisit records of ``snapshot``'s WARC by URL path: type, headers and
    payload (b"" for a revisit)."""
    found = {}
    with open(snapshot.output_dir / warc, "rb") as stream:
        for record in ArchiveIterator(stream):
            if record.rec_type not in ("response", "revisit"):
                continue
            uri = record.rec_headers.get_header("WARC-Target-URI")
            found["/" + uri.split("/", 3)[3]] = {
                "type": record.rec_type,
                "headers": dict(record.rec_headers.headers),
                "payload": record.raw_stream.read(),
            }
    return found


def sha256sum_ok(folder: Path) -> bool:
    """``sha256sum -c`` of the folder's manifest, as a person checks it without Vellum."""
    done = subprocess.run(
        ["sha256sum", "-c", "--quiet", "manifest-sha256.txt"], cwd=folder, capture_output=True
    )
    return done.returncode == 0


def inodes(folder: Path) -> dict[tuple[int, int], int]:
    """``{(device, inode): size}`` of every file under ``folder``: its bytes as ``du`` counts
    them (a hard-linked file once)."""
    return {
        (path.stat().st_dev, path.stat().st_ino): path.stat().st_size
        for path in folder.rglob("*")
        if path.is_file()
    }


def site_bytes(path: str) -> bytes:
    return site_files()[path.lstrip("/")]


# --- storing once --------------------------------------------------------------------------------


def test_a_page_archived_twice_is_written_as_revisits_and_shared_files(dedup_site) -> None:
    first, second = capture(dedup_site), capture(dedup_site)

    before, after = records(first), records(second)
    assert {before[path]["type"] for path in STORED_ONCE} == {"response"}
    for path in STORED_ONCE:
        revisit, original = after[path]["headers"], before[path]["headers"]
        assert after[path]["type"] == "revisit"
        assert after[path]["payload"] == b""
        assert revisit["WARC-Profile"] == PROFILES["WARC/1.0"]  # wget writes WARC/1.0
        assert revisit["WARC-Refers-To"] == original["WARC-Record-ID"]
        assert revisit["WARC-Refers-To-Target-URI"] == dedup_site.url(path)
        assert revisit["WARC-Refers-To-Date"] == original["WARC-Date"]
        assert revisit["WARC-Payload-Digest"] == original["WARC-Payload-Digest"]
        assert before[path]["payload"].endswith(site_bytes(path))
    assert check_warc(second.output_dir / WGET_WARC) == []
    assert PayloadRevisit.objects.filter(snapshot=second).count() == len(STORED_ONCE)
    # A WACZ of revisits would not replay alone: only the whole capture stores one (replay
    # and exports make the second's whole on demand).
    assert (first.output_dir / "snapshot.wacz").is_file()
    assert not (second.output_dir / "snapshot.wacz").exists()
    assert has_replay_wacz(first) and has_replay_wacz(second)
    # Each folder verifies alone, by Vellum and by coreutils.
    for snapshot in (first, second):
        assert local_problems(snapshot)[0] == []
        assert sha256sum_ok(snapshot.output_dir)
    # The page wget saved and its requisites are one file on disk, read-only.
    host = f"127.0.0.1+{dedup_site.port}"
    for name in ("index.html", "static/app.js", "static/logo.png", "static/style.css"):
        one, two = (s.output_dir / "wget" / host / name for s in (first, second))
        assert one.stat().st_ino == two.stat().st_ino == blob_path(sha256(two)).stat().st_ino
        assert two.stat().st_nlink == 3 and two.stat().st_mode & 0o777 == 0o400
    # So the second capture adds a fraction of the first's bytes.
    first_bytes = sum(inodes(first.output_dir).values())
    added = inodes(second.output_dir).keys() - inodes(first.output_dir).keys()
    second_bytes = sum(inodes(second.output_dir)[key] for key in added)
    assert second_bytes < first_bytes / 2, (first_bytes, second_bytes)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_changed_requisite_is_stored_whole_again(dedup_site) -> None:
    first = capture(dedup_site)
    dedup_site.write("static/app.js", site_bytes("/static/app.js") + b"// changed\n")
    second = capture(dedup_site)

    after = records(second)
    assert after["/static/app.js"]["type"] == "response"
    assert after["/static/app.js"]["payload"].endswith(b"// changed\n")
    assert after["/static/logo.png"]["type"] == "revisit"
    host = f"127.0.0.1+{dedup_site.port}"
    one, two = (s.output_dir / "wget" / host / "static" / "app.js" for s in (first, second))
    assert one.stat().st_ino != two.stat().st_ino


def test_with_deduplicate_off_every_capture_is_whole(settings, dedup_site) -> None:
    settings.DEDUPLICATE = False
    first, second = capture(dedup_site), capture(dedup_site)

    assert {record["type"] for record in records(second).values()} == {"response"}
    host = f"127.0.0.1+{dedup_site.port}"
    one, two = (s.output_dir / "wget" / host / "static" / "app.js" for s in (first, second))
    assert one.stat().st_ino != two.stat().st_ino
    assert not PayloadRevisit.objects.exists()


# --- removal -------------------------------------------------------------------------------------


def test_removing_the_first_crawl_leaves_the_later_ones_whole_and_verifiable(dedup_site) -> None:
    first, second, third = capture(dedup_site), capture(dedup_site), capture(dedup_site)
    manifest_before = second.manifest_sha256
    first_only = [d for d in read_manifest(first.output_dir).values() if blob_path(d).exists()]
    first_only = [d for d in first_only if blob_path(d).stat().st_nlink == 2]  # its own files

    call_command(
        "remove", "--crawl", str(first.crawl_id), "--delete", "--yes", stdout=io.StringIO()
    )

    assert not Crawl.objects.filter(pk=first.crawl_id).exists()
    assert not first.output_dir.exists()
    second, third = (Snapshot.objects.get(pk=s.pk) for s in (second, third))
    # The second holds the payloads again, byte for byte as the site served them...
    after = records(second)
    for path in STORED_ONCE:
        assert after[path]["type"] == "response"
        assert after[path]["payload"].endswith(site_bytes(path))
    # ...and the third now refers to the second's copy: still stored once.
    kept = {path: record["headers"]["WARC-Record-ID"] for path, record in after.items()}
    for path, record in records(third).items():
        if path in STORED_ONCE:
            assert record["type"] == "revisit"
            assert record["headers"]["WARC-Refers-To"] == kept[path]
    for snapshot in (second, third):
        assert snapshot.status == SnapshotStatus.SEALED
        assert local_problems(snapshot)[0] == []
        assert sha256sum_ok(snapshot.output_dir)
    # Whole again, the second stores its WACZ; the third still holds revisits, and none.
    assert wacz_record_types(second.output_dir / "snapshot.wacz") == {"response"}
    assert not (third.output_dir / "snapshot.wacz").exists()
    assert second.manifest_sha256 != manifest_before  # re-sealed, with a new signature
    wget = second.results.get(extractor="wget")
    assert wget.history[-1]["event"] == "revisits resolved"
    assert str(first.pk) in wget.history[-1]["reason"]
    index = json.loads((second.output_dir / "index.json").read_text())
    wget_entry = next(r for r in index["results"] if r["extractor"] == "wget")
    assert wget_entry["history"][-1]["event"] == "revisits resolved"
    # What only the first linked is gone from the store; what the others share is kept.
    assert first_only and not any(blob_path(digest).exists() for digest in first_only)
    app = second.output_dir / "wget" / f"127.0.0.1+{dedup_site.port}" / "static" / "app.js"
    assert blob_path(sha256(app)).stat().st_nlink == 3


def test_removing_a_snapshot_waits_for_one_that_refers_to_it_and_is_finalizing(dedup_site) -> None:
    first, second = capture(dedup_site), capture(dedup_site)
    Snapshot.objects.filter(pk=second.pk).update(status=SnapshotStatus.FINALIZING)

    with pytest.raises(RemovalRefused, match=f"snapshot {second.pk}.* is finalizing"):
        snapshot_remove(snapshot_id=first.pk, delete_files=True)

    assert first.output_dir.is_dir() and Snapshot.objects.filter(pk=first.pk).exists()
    assert records(second)["/index.html"]["type"] == "revisit"


def test_removing_a_snapshot_never_signs_the_damage_of_one_that_refers_to_it(dedup_site) -> None:
    """Made whole, a snapshot that refers to the one removed is re-sealed: damaged, it would be
    signed as good. The removal is refused until it is repaired."""
    first, second = capture(dedup_site), capture(dedup_site)
    index = second.output_dir / "index.json"
    original = index.read_bytes()
    flip_byte(index)

    with pytest.raises(RemovalRefused, match=f"snapshot {second.pk}, .* fails its fixity check"):
        snapshot_remove(snapshot_id=first.pk, delete_files=True)

    assert Snapshot.objects.filter(pk=first.pk).exists()
    assert records(second)["/index.html"]["type"] == "revisit"  # nothing rewritten
    assert local_problems(second)[0] == ["checksum mismatch: index.json"]
    index.chmod(0o600)
    index.write_bytes(original)
    snapshot_remove(snapshot_id=first.pk, delete_files=True)  # repaired: it goes
    assert local_problems(Snapshot.objects.get(pk=second.pk))[0] == []


def test_a_rearchived_original_still_serves_those_that_refer_to_it(dedup_site) -> None:
    first, second = capture(dedup_site), capture(dedup_site)
    moved_to = snapshot_rearchive(snapshot=first)
    assert PayloadRecord.objects.filter(snapshot=first, warc=f"{moved_to}/{WGET_WARC}").exists()

    replayed = snapshot_replay_wacz(snapshot=second)

    assert wacz_record_types(replayed) == {"response"}
    archive_crawl(Crawl.objects.get(pk=first.crawl_id))  # the new run, sealed
    snapshot_remove(snapshot_id=first.pk, delete_files=True)
    second = Snapshot.objects.get(pk=second.pk)
    assert records(second)["/static/app.js"]["type"] == "response"
    assert local_problems(second)[0] == []


def test_a_capture_archived_again_is_judged_by_its_new_runs_checks_alone(dedup_site) -> None:
    """Re-archived, a snapshot holds new files under a new manifest: what an audit found of
    the earlier run neither flags it nor counts as a check of it, on the command line
    (status, rearchive --flagged), in the admin or on its page."""
    snapshot = capture(dedup_site)
    flip_byte(snapshot.output_dir / "index.json")
    snapshot_audit(snapshot=snapshot)
    assert list(Snapshot.objects.flagged()) == [snapshot]

    snapshot_rearchive(snapshot=Snapshot.objects.get(pk=snapshot.pk))
    archive_crawl(Crawl.objects.get(pk=snapshot.crawl_id))  # the new run, sealed

    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.SEALED
    assert not Snapshot.objects.flagged().exists()
    assert list(Snapshot.objects.unchecked()) == [snapshot]
    assert list(Snapshot.objects.audit_due(timezone.now())) == [snapshot]
    reader = Client()
    reader.force_login(staff_with("keeper", "core.view_snapshot"))
    page = reader.get(reverse("core:snapshot", args=[snapshot.pk]))
    assert "Last fixity check" not in page.content.decode()
    snapshot_audit(snapshot=Snapshot.objects.get(pk=snapshot.pk))  # the new run, checked
    page = reader.get(reverse("core:snapshot", args=[snapshot.pk]))
    assert "Last fixity check" in page.content.decode()
    assert not Snapshot.objects.unchecked().exists() and not Snapshot.objects.flagged().exists()


# --- export and replay ---------------------------------------------------------------------------


def wacz_record_types(path: Path) -> set[str]:
    """The types of the response and revisit records in a WACZ's WARCs."""
    types = set()
    with zipfile.ZipFile(path) as wacz:
        for name in wacz.namelist():
            if name.startswith("archive/") and "screenshot" not in name:
                stream = io.BytesIO(wacz.read(name))
                types |= {
                    record.rec_type
                    for record in ArchiveIterator(stream)
                    if record.rec_type in ("response", "revisit")
                }
    return types


def test_a_bag_of_the_second_crawl_alone_validates_with_what_it_refers_to(
    dedup_site, tmp_path
) -> None:
    first, second = capture(dedup_site), capture(dedup_site)
    bag = tmp_path / "bag"

    call_command("export", "--format", "bagit", "--crawl", str(second.crawl_id), str(bag),
                 stdout=io.StringIO())  # fmt: skip

    done = subprocess.run([sys.executable, str(BAGIT), "--validate", str(bag)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    info = dict(line.split(": ", 1) for line in (bag / "bag-info.txt").read_text().splitlines())
    assert info["Vellum-Snapshot-Count"] == "1"
    assert info["Vellum-Referred-Snapshot-Count"] == "1"
    assert sorted(p.name for p in (bag / "data").iterdir()) == sorted(
        [str(first.pk), str(second.pk)]
    )
    # Each folder in the bag verifies alone, and every revisit finds its original there.
    for snapshot in (first, second):
        assert sha256sum_ok(bag / "data" / str(snapshot.pk))
    originals = {info.record_id for info in scan_warc(bag / "data" / str(first.pk) / WGET_WARC)}
    revisits = [r for r in scan_warc(bag / "data" / str(second.pk) / WGET_WARC) if r.refers_to]
    assert revisits and all(r.refers_to in originals for r in revisits)


def test_a_wacz_export_of_a_revisit_only_page_is_whole(dedup_site, tmp_path) -> None:
    capture(dedup_site)
    second = capture(dedup_site)
    dest = tmp_path / "waczs"

    call_command("export", "--format", "wacz", "--snapshot", str(second.pk), str(dest),
                 stdout=io.StringIO())  # fmt: skip

    exported = dest / f"{second.pk}.wacz"
    assert wacz_record_types(exported) == {"response"}
    assert not (second.output_dir / "snapshot.wacz").exists()  # none stored: see below


def test_the_replay_wacz_of_a_revisit_only_page_is_made_whole_once(dedup_site, data_dir) -> None:
    capture(dedup_site)
    second = capture(dedup_site)

    replayed = snapshot_replay_wacz(snapshot=second)

    assert replayed.parent == data_dir / "cache" / "replay"
    assert wacz_record_types(replayed) == {"response"}
    assert snapshot_replay_wacz(snapshot=second) == replayed  # kept for the next replay


def test_damage_to_a_shared_file_says_the_other_snapshots_hold_it_too(dedup_site) -> None:
    """A file stored once for several snapshots is damaged in all of them: the audit of one
    says how many other files share the bytes, and how to find them."""
    first, second, third = (capture(dedup_site) for _ in range(3))
    shared = first.output_dir / "wget" / f"127.0.0.1+{dedup_site.port}" / "static" / "style.css"
    shared.chmod(0o600)  # read-only once shared: this stands for a disk or a tool gone wrong
    with open(shared, "r+b") as damaged:
        damaged.write(b"X")

    problems, _files = local_problems(second)

    relative = shared.relative_to(first.output_dir).as_posix()
    assert problems == [
        f"checksum mismatch: {relative} (its bytes are shared with 2 other snapshot files: "
        "manage.py verify --all flags them too)"
    ]
    assert all(local_problems(s)[0][0].startswith(f"checksum mismatch: {relative}")
               for s in (first, third))  # fmt: skip


def test_the_snapshot_page_offers_a_revisit_only_pages_wacz_made_whole(dedup_site) -> None:
    """Finalizing stores no WACZ of a capture that shares records: its page still offers one
    to download, made whole, and only to a reader who may read the capture."""
    capture(dedup_site)
    second = capture(dedup_site)
    reader, stranger = Client(), Client()
    reader.force_login(staff_with("keeper", "core.view_snapshot"))
    stranger.force_login(get_user_model().objects.create_user("stranger"))
    download = reverse("core:snapshot_wacz", args=[second.pk])

    page = reader.get(reverse("core:snapshot", args=[second.pk])).content.decode()
    response = reader.get(download)

    assert f'href="{download}"' in page
    assert response.status_code == 200
    assert response["Content-Type"] == "application/wacz"
    assert response["Content-Disposition"] == f'attachment; filename="{second.pk}.wacz"'
    saved = Path(settings.DATA_DIR) / "download.wacz"
    saved.write_bytes(b"".join(response.streaming_content))
    assert wacz_record_types(saved) == {"response"}
    assert stranger.get(download).status_code == 403


# --- reindex -------------------------------------------------------------------------------------


def test_reindex_reads_the_payload_index_back_from_the_warcs(dedup_site) -> None:
    capture(dedup_site)
    capture(dedup_site)
    expected = sorted(
        PayloadRevisit.objects.values_list("snapshot_id", "record_id", "original__record_id")
    )
    originals = PayloadRecord.objects.count()
    Snapshot.objects.all().delete()  # the database lost, the folders kept
    assert not PayloadRecord.objects.exists()

    report = archive_reindex()

    assert report.problems == []
    assert PayloadRecord.objects.count() == originals
    assert expected == sorted(
        PayloadRevisit.objects.values_list("snapshot_id", "record_id", "original__record_id")
    )


# --- the folder layer ----------------------------------------------------------------------------


def test_a_response_made_a_revisit_and_back_is_the_same_record(dedup_site, tmp_path) -> None:
    warc = capture(dedup_site).output_dir / WGET_WARC
    original = tmp_path / "original.warc.gz"
    original.write_bytes(warc.read_bytes())
    copy = tmp_path / "copy.warc.gz"
    copy.write_bytes(warc.read_bytes())
    responses = [r for r in scan_warc(copy) if r.payload and r.payload.length > 0]

    to_revisits = {
        r.record_id: ToRevisit(Original(r.record_id, r.target_uri, r.warc_date)) for r in responses
    }
    made = rewrite_warc(copy, to_revisits)
    assert made == len(responses) and check_warc(copy) == []
    assert copy.stat().st_size < original.stat().st_size
    back = rewrite_warc(
        copy, {r.record_id: ToResponse(original, r.record_id, r.payload.sha256) for r in responses}
    )

    assert back == len(responses)
    assert gzip.decompress(copy.read_bytes()) == gzip.decompress(original.read_bytes())


def test_a_damaged_shared_copy_is_replaced_not_spread(settings, tmp_path) -> None:
    content = b"the same requisite in two snapshots\n" * 40
    digest = hashlib.sha256(content).hexdigest()
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        (folder / "wget").mkdir(parents=True)
        (folder / "wget" / "app.js").write_bytes(content)
    share_files(one, {"wget/app.js": digest})
    blob = blob_path(digest)
    blob.chmod(0o600)
    blob.write_bytes(b"rotten" + content[6:])  # the disk returns other bytes (one's file too)

    share_files(two, {"wget/app.js": digest})

    assert (two / "wget" / "app.js").read_bytes() == content
    assert blob_path(digest).read_bytes() == content
    assert blob_path(digest).stat().st_ino == (two / "wget" / "app.js").stat().st_ino


# --- replay in Chromium --------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_revisit_only_page_replays_in_chromium(dedup_site, live_server, rf) -> None:
    """The second capture's WARC holds no payload of its page: replay still shows the page,
    its stylesheet and its image, from the archive alone (the site is stopped first)."""
    capture(dedup_site)
    second = capture(dedup_site)
    assert {records(second)[path]["type"] for path in STORED_ONCE} == {"revisit"}
    dedup_site.stop()
    request = rf.get("/", HTTP_HOST=live_server.url.removeprefix("http://"))
    link = replay_url(request, second.pk)

    from playwright.sync_api import expect

    def rule_count(frame) -> int:
        """The CSS rules of every stylesheet of the document in ``frame`` (a FrameLocator)."""
        return frame.locator("body").evaluate(
            "() => [...document.styleSheets].reduce((n, s) => n + s.cssRules.length, 0)"
        )

    with staff_browser(live_server) as (context, _session):
        tab = context.new_page()
        tab.goto(link)
        page = replayed(tab)
        try:
            # Each check retries until it holds or 60 s pass: ReplayWeb.page streams the page
            # into its frame, and a heading read at once was once found still empty under load.
            expect(page.locator("#heading")).to_have_text("Stored once", timeout=60_000)
            # The logo's payload came from the first capture's record...
            expect(page.locator("img")).to_have_js_property("naturalWidth", 48, timeout=60_000)
            # ...and so did the stylesheet's.
            assert wait_until(lambda: rule_count(page) >= 60, seconds=60), rule_count(page)
        finally:
            tab.screenshot(path=artifact_path("replay/dedup-revisit-only.png"))


# --- outputs that differ only in their tool's time stamp -----------------------------------------


@pytest.mark.browser
def test_an_unchanged_pages_pdf_and_singlefile_are_stored_once(settings, dedup_site) -> None:
    """Chromium's PDF and SingleFile's page carry the moment they were made: of an unchanged
    page the second capture keeps the first's files (core/services/unchanged_outputs.py), of
    a changed page its own."""
    settings.EXTRACTORS = ["wget", "pdf", "singlefile"]
    stamped = ("pdf/output.pdf", "singlefile/singlefile.html")
    first, second = capture(dedup_site), capture(dedup_site)
    dedup_site.write(
        "index.html", site_bytes("/index.html").replace(b"Stored once", b"Changed now")
    )
    third = capture(dedup_site)

    for name in stamped:
        one, two, three = (s.output_dir / name for s in (first, second, third))
        assert one.stat().st_ino == two.stat().st_ino  # one file on disk
        assert three.stat().st_ino != two.stat().st_ino
        assert three.read_bytes() != two.read_bytes()
    for snapshot in (first, second, third):
        assert local_problems(snapshot)[0] == []
        assert sha256sum_ok(snapshot.output_dir)
    # What the second capture's results say of their own run is theirs, not the first's.
    ran = {s.pk: s.results.get(extractor="pdf").start_ts for s in (first, second)}
    assert ran[second.pk] > ran[first.pk]


@pytest.mark.browser
def test_with_deduplicate_off_each_capture_keeps_its_own_pdf(settings, dedup_site) -> None:
    settings.EXTRACTORS = ["wget", "pdf"]
    settings.DEDUPLICATE = False
    first, second = capture(dedup_site), capture(dedup_site)

    one, two = (s.output_dir / "pdf" / "output.pdf" for s in (first, second))
    assert one.stat().st_ino != two.stat().st_ino
