"""``manage.py export`` (core/services/export.py): BagIt bags and WACZ files of sealed snapshots.

Snapshot folders are built by hand (a warcio WARC, a screenshot, the WACZ made by the real
py-wacz, the manifest), once per module, and copied into each test's own ARCHIVE_DIR; the rows
are made with model_bakery in the state each test needs. Bags are checked with bagit's own
command line (``bagit.py --validate``), WACZ files with py-wacz's validator.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import uuid
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from model_bakery import baker

from core.choices import SnapshotStatus
from core.folder.manifest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    read_manifest,
    sha256_file,
    write_manifest,
)
from core.folder.signing import sign_manifest
from core.folder.wacz import WACZ_NAME, build_wacz, validate_wacz
from core.models import Snapshot
from core.services import export
from core.tests.warc_folders import WARC_PATH, flip_byte, make_snapshot_folder
from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db

BAGIT = Path(sys.executable).parent / "bagit.py"
TIMEOUT = 120


@dataclass(frozen=True)
class Template:
    """A finished snapshot folder to copy: its id, URL and whether it holds a WARC."""

    id: uuid.UUID
    url: str
    folder: Path


def _template(root: Path, number: int, *, warc: bool = True, wacz: bool = True) -> Template:
    snapshot_id = uuid.uuid4()
    url = f"http://example.test/page-{number}"
    folder = make_snapshot_folder(root / str(snapshot_id), url, title=f"Page {number}", warc=warc)
    if wacz:
        build_wacz(
            folder,
            url=url,
            title=f"Page {number}",
            archived_at=datetime(2025, 3, 4, tzinfo=UTC),
            timeout=TIMEOUT,
        )
    write_manifest(folder)
    sign_manifest(folder)
    return Template(id=snapshot_id, url=url, folder=folder)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    """Three folders with a WARC, screenshot and WACZ; one without a WARC (so no WACZ); one
    with a WARC but sealed without a WACZ (packaging was off)."""
    root = tmp_path_factory.mktemp("templates")
    made = {f"page{number}": _template(root, number) for number in range(3)}
    made["no_warc"] = _template(root, 3, warc=False, wacz=False)
    made["no_wacz"] = _template(root, 4, wacz=False)
    return made


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path / "data"
    settings.ARCHIVE_DIR = tmp_path / "data" / "archive"
    settings.WACZ_TIMEOUT = TIMEOUT
    return settings.ARCHIVE_DIR


def make_crawl() -> Crawl:
    return baker.make(
        Crawl, status=CrawlStatus.SEALED, seeds="http://example.test/page-0\nhttp://example.test/x"
    )


def add_snapshot(crawl: Crawl, template: Template, status: str = SnapshotStatus.SEALED) -> Snapshot:
    """Make ``template``'s row in ``crawl`` with ``status``, and copy its folder in place."""
    snapshot = baker.make(
        Snapshot,
        id=template.id,
        crawl=crawl,
        url=template.url,
        title="A page",
        status=status,
        manifest_sha256=sha256_file(template.folder / MANIFEST_NAME),
    )
    shutil.copytree(template.folder, snapshot.output_dir)
    return snapshot


def run_export(*args: str) -> str:
    out = io.StringIO()
    call_command("export", *args, stdout=out)
    return out.getvalue()


def run_failing_export(*args: str) -> tuple[str, str]:
    """Run an export expected to fail; return (stdout, the CommandError's message)."""
    out = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("export", *args, stdout=out)
    return out.getvalue(), str(raised.value)


def bagit_validate(bag: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BAGIT), "--validate", str(bag)], capture_output=True, text=True
    )


def bag_info(bag: Path) -> dict[str, str]:
    lines = (bag / "bag-info.txt").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines)


def wacz_pages(path: Path) -> list[dict]:
    with zipfile.ZipFile(path) as wacz:
        lines = wacz.read("pages/pages.jsonl").decode().splitlines()
    return [json.loads(line) for line in lines[1:]]


# --- BagIt ---------------------------------------------------------------------------------------


def test_bagit_export_of_a_crawl_validates_with_bagit_py(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    sealed = [add_snapshot(crawl, templates[name]) for name in ("page0", "page1", "no_warc")]
    queued = add_snapshot(crawl, templates["page2"], status=SnapshotStatus.QUEUED)
    dest = tmp_path / "bag"

    out = run_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    assert f"Exported 3 snapshots as a BagIt bag to {dest} (validated)" in out
    assert f"{queued.pk} {queued.url}: left out: not sealed (queued)" in out
    assert "Left out 1 of 4 snapshots: 1 not sealed" in out
    checked = bagit_validate(dest)
    assert checked.returncode == 0, checked.stderr
    assert "is valid" in checked.stderr
    assert sorted(path.name for path in (dest / "data").iterdir()) == sorted(
        str(snapshot.pk) for snapshot in sealed
    )
    assert (dest / "manifest-sha256.txt").is_file()
    assert (dest / "manifest-sha512.txt").is_file()


def test_bag_holds_each_folder_with_its_manifest_and_signature(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    snapshot = add_snapshot(crawl, templates["page0"])
    (snapshot.output_dir / ".tmp-wget-crashed").mkdir()
    (snapshot.output_dir / ".tmp-wget-crashed" / "half.html").write_text("half")
    dest = tmp_path / "bag"

    run_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    copy = dest / "data" / str(snapshot.pk)
    source_files = sorted(
        path.relative_to(snapshot.output_dir).as_posix()
        for path in snapshot.output_dir.rglob("*")
        if path.is_file() and ".tmp-" not in path.as_posix()
    )
    copied_files = sorted(
        path.relative_to(copy).as_posix() for path in copy.rglob("*") if path.is_file()
    )
    assert copied_files == source_files
    assert MANIFEST_NAME in copied_files and SIGNATURE_NAME in copied_files
    assert WACZ_NAME in copied_files
    for relative in source_files:
        assert (copy / relative).read_bytes() == (snapshot.output_dir / relative).read_bytes()


def test_bag_info_describes_the_export(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    add_snapshot(crawl, templates["page0"])
    add_snapshot(crawl, templates["page1"])
    dest = tmp_path / "bag"

    run_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    info = bag_info(dest)
    assert info["Source-Organization"] == "Vellum"
    assert info["External-Identifier"] == f"crawl-{crawl.pk}"
    assert info["External-Description"] == (
        f"Vellum crawl {crawl.pk}: 2 snapshots of http://example.test/page-0 and 1 more seed"
    )
    assert info["Vellum-Snapshot-Count"] == "2"
    assert "Bagging-Date" in info
    assert "Payload-Oxum" in info


def test_bagit_export_of_one_snapshot(templates, tmp_path: Path) -> None:
    snapshot = add_snapshot(make_crawl(), templates["page1"])
    dest = tmp_path / "bag"

    with CaptureQueriesContext(connection) as queries:
        out = run_export("--format", "bagit", "--snapshot", str(snapshot.pk), str(dest))

    assert "Exported 1 snapshot as a BagIt bag" in out
    assert [path.name for path in (dest / "data").iterdir()] == [str(snapshot.pk)]
    # Its crawl comes without what grows with the crawl: one snapshot's export reads none of it.
    assert not [q["sql"] for q in queries.captured_queries if '"crawls_crawl"."seed' in q["sql"]]
    assert bag_info(dest)["External-Identifier"] == f"snapshot-{snapshot.pk}"
    assert bagit_validate(dest).returncode == 0


def test_corrupt_snapshot_is_left_out_and_the_rest_exported(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    good = [add_snapshot(crawl, templates[name]) for name in ("page0", "page2")]
    corrupt = add_snapshot(crawl, templates["page1"])
    flip_byte(corrupt.output_dir / WARC_PATH)
    dest = tmp_path / "bag"

    out, error = run_failing_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    assert (
        f"{corrupt.pk} {corrupt.url}: left out: does not match its manifest: "
        f"checksum mismatch: {WARC_PATH}"
    ) in out
    assert "Exported 2 snapshots as a BagIt bag" in out
    assert error == "1 of 3 snapshots could not be exported (1 damaged); 2 exported"
    assert sorted(path.name for path in (dest / "data").iterdir()) == sorted(
        str(snapshot.pk) for snapshot in good
    )
    assert bagit_validate(dest).returncode == 0


def test_copy_that_differs_from_the_manifest_is_taken_out_of_the_bag(
    templates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crawl = make_crawl()
    kept = add_snapshot(crawl, templates["page0"])
    damaged = add_snapshot(crawl, templates["page1"])
    copy_folder = export._copy_folder

    def copy_badly(source: Path, target: Path) -> None:  # a disk that returns other bytes
        copy_folder(source, target)
        if target.name == str(damaged.pk):
            flip_byte(target / WARC_PATH)

    monkeypatch.setattr(export, "_copy_folder", copy_badly)
    dest = tmp_path / "bag"

    out, error = run_failing_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    assert f"{damaged.pk} {damaged.url}: left out: copy differs: checksum mismatch: " in out
    assert "1 copied wrong" in error
    assert [path.name for path in (dest / "data").iterdir()] == [str(kept.pk)]
    assert bag_info(dest)["Vellum-Snapshot-Count"] == "1"
    assert bagit_validate(dest).returncode == 0


def test_bagit_refuses_a_destination_that_is_not_empty(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    add_snapshot(crawl, templates["page0"])
    dest = tmp_path / "bag"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")

    _, error = run_failing_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    assert error == f"{dest} is not an empty folder: a bag needs a folder of its own"
    assert [path.name for path in dest.iterdir()] == ["notes.txt"]


def test_bagit_into_an_existing_empty_folder(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    add_snapshot(crawl, templates["page0"])
    dest = tmp_path / "bag"
    dest.mkdir()

    run_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    assert bagit_validate(dest).returncode == 0


def test_nothing_to_export_writes_nothing(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    add_snapshot(crawl, templates["page0"], status=SnapshotStatus.STARTED)
    dest = tmp_path / "bag"

    out, error = run_failing_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    assert "left out: not sealed (started)" in out
    assert error == "Nothing exported: the snapshot was left out (see above)"
    assert not dest.exists()


def test_plain_output_has_one_line_per_snapshot(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    snapshots = [add_snapshot(crawl, templates[name]) for name in ("page0", "page1")]

    out = run_export("--format", "bagit", "--crawl", str(crawl.pk), str(tmp_path / "bag"))

    for snapshot in snapshots:
        assert f"{snapshot.pk} {snapshot.url}: copied\n" in out
    assert out.splitlines()[-1].startswith("Exported 2 snapshots as a BagIt bag")


class Terminal(io.StringIO):
    """Output that says it is a terminal, as a person's shell would."""

    def isatty(self) -> bool:
        return True


def test_terminal_output_shows_progress_bars_and_what_is_left_out(
    templates, tmp_path: Path
) -> None:
    crawl = make_crawl()
    exported = add_snapshot(crawl, templates["page0"])
    queued = add_snapshot(crawl, templates["page1"], status=SnapshotStatus.QUEUED)
    out = Terminal()

    call_command(
        "export", "--format", "bagit", "--crawl", str(crawl.pk), str(tmp_path / "b"), stdout=out
    )

    text = out.getvalue()
    assert "Verifying" in text and "Copying" in text and "Validating the bag" in text
    assert f"{queued.pk} {queued.url}: left out: not sealed (queued)" in text
    assert f"{exported.pk} {exported.url}: copied" not in text  # bars, not a line per snapshot
    assert "Exported 1 snapshot as a BagIt bag" in text


# --- WACZ ----------------------------------------------------------------------------------------


def test_wacz_export_writes_valid_files_and_a_combined_crawl_wacz(
    templates, tmp_path: Path
) -> None:
    crawl = make_crawl()
    with_wacz = [add_snapshot(crawl, templates[name]) for name in ("page0", "page1", "page2")]
    no_warc = add_snapshot(crawl, templates["no_warc"])
    dest = tmp_path / "out" / "waczs"

    out = run_export("--format", "wacz", "--crawl", str(crawl.pk), str(dest))

    assert (
        f"Exported 3 snapshots as WACZ files to {dest} (validated), "
        f"and crawl-{crawl.pk}.wacz combining them"
    ) in out
    assert f"{no_warc.pk} {no_warc.url}: left out: no WACZ: it has no WARC" in out
    assert "Left out 1 of 4 snapshots: 1 without a WARC" in out
    assert sorted(path.name for path in dest.iterdir()) == sorted(
        [f"{snapshot.pk}.wacz" for snapshot in with_wacz] + [f"crawl-{crawl.pk}.wacz"]
    )
    for snapshot in with_wacz:
        written = dest / f"{snapshot.pk}.wacz"
        assert written.read_bytes() == (snapshot.output_dir / WACZ_NAME).read_bytes()
        assert validate_wacz(written, timeout=TIMEOUT) == []
    combined = dest / f"crawl-{crawl.pk}.wacz"
    assert validate_wacz(combined, timeout=TIMEOUT) == []
    assert sorted(page["url"] for page in wacz_pages(combined)) == sorted(
        snapshot.url for snapshot in with_wacz
    )
    with zipfile.ZipFile(combined) as wacz:
        archived = [name for name in wacz.namelist() if name.startswith("archive/")]
    assert len(archived) == 6  # each snapshot's WARC and its screenshot's


def test_wacz_export_of_one_snapshot_writes_no_crawl_wacz(templates, tmp_path: Path) -> None:
    snapshot = add_snapshot(make_crawl(), templates["page0"])
    dest = tmp_path / "waczs"

    out = run_export("--format", "wacz", "--snapshot", str(snapshot.pk), str(dest))

    assert f"Exported 1 snapshot as WACZ files to {dest} (validated)\n" in out
    assert [path.name for path in dest.iterdir()] == [f"{snapshot.pk}.wacz"]


def test_wacz_export_builds_a_wacz_missing_from_a_sealed_snapshot(
    templates, tmp_path: Path
) -> None:
    snapshot = add_snapshot(make_crawl(), templates["no_wacz"])
    assert WACZ_NAME not in read_manifest(snapshot.output_dir)
    dest = tmp_path / "waczs"

    run_export("--format", "wacz", "--snapshot", str(snapshot.pk), str(dest))

    written = dest / f"{snapshot.pk}.wacz"
    assert validate_wacz(written, timeout=TIMEOUT) == []
    assert [page["url"] for page in wacz_pages(written)] == [snapshot.url]
    assert not (snapshot.output_dir / WACZ_NAME).exists()  # the sealed folder is not changed


def test_wacz_export_leaves_out_a_corrupt_snapshot(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    good = add_snapshot(crawl, templates["page0"])
    corrupt = add_snapshot(crawl, templates["page1"])
    flip_byte(corrupt.output_dir / WACZ_NAME)
    dest = tmp_path / "waczs"

    out, error = run_failing_export("--format", "wacz", "--crawl", str(crawl.pk), str(dest))

    assert f"{corrupt.pk} {corrupt.url}: left out: does not match its manifest: " in out
    assert "1 damaged" in error
    assert sorted(path.name for path in dest.iterdir()) == sorted(
        [f"{good.pk}.wacz", f"crawl-{crawl.pk}.wacz"]
    )
    assert [page["url"] for page in wacz_pages(dest / f"crawl-{crawl.pk}.wacz")] == [good.url]


def test_wacz_that_does_not_validate_is_removed_and_reported(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    good = add_snapshot(crawl, templates["page0"])
    broken = add_snapshot(crawl, templates["page1"])
    # An invalid WACZ sealed into the manifest: checksums match, yet no archive can load it.
    (broken.output_dir / WACZ_NAME).write_bytes(b"not a zip")
    write_manifest(broken.output_dir)
    sign_manifest(broken.output_dir)
    Snapshot.objects.filter(pk=broken.pk).update(
        manifest_sha256=sha256_file(broken.output_dir / MANIFEST_NAME)
    )
    dest = tmp_path / "waczs"

    out, error = run_failing_export("--format", "wacz", "--crawl", str(crawl.pk), str(dest))

    assert (
        f"{broken.pk} {broken.url}: left out: its WACZ does not validate: "
        "zipfile.BadZipFile: File is not a zip file"
    ) in out
    assert "1 with an invalid WACZ" in error
    assert not (dest / f"{broken.pk}.wacz").exists()
    assert validate_wacz(dest / f"{good.pk}.wacz", timeout=TIMEOUT) == []


def test_wacz_export_refuses_to_overwrite(templates, tmp_path: Path) -> None:
    crawl = make_crawl()
    snapshots = [add_snapshot(crawl, templates[name]) for name in ("page0", "page1")]
    dest = tmp_path / "waczs"
    dest.mkdir()
    existing = dest / f"{snapshots[1].pk}.wacz"
    existing.write_bytes(b"an earlier export")

    _, error = run_failing_export("--format", "wacz", "--crawl", str(crawl.pk), str(dest))

    assert error == f"{dest} already holds {existing.name}: not overwriting"
    assert [path.name for path in dest.iterdir()] == [existing.name]
    assert existing.read_bytes() == b"an earlier export"


# --- what to export, and where -------------------------------------------------------------------


@pytest.mark.parametrize("format", ["bagit", "wacz"])
def test_unknown_crawl(format: str, tmp_path: Path) -> None:
    _, error = run_failing_export("--format", format, "--crawl", "99999", str(tmp_path / "x"))

    assert error == "no crawl 99999"
    assert not (tmp_path / "x").exists()


def test_unknown_snapshot(tmp_path: Path) -> None:
    missing = uuid.uuid4()

    _, error = run_failing_export("--format", "wacz", "--snapshot", str(missing), str(tmp_path))

    assert error == f"no snapshot {missing}"


def test_snapshot_id_that_is_not_a_uuid(tmp_path: Path) -> None:
    _, error = run_failing_export("--format", "bagit", "--snapshot", "12", str(tmp_path / "x"))

    assert error == "'12' is not a snapshot id (a UUID)"


def test_crawl_and_snapshot_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("export", "--format", "wacz", "--crawl", "1", "--snapshot", "x", str(tmp_path))


def test_destination_inside_the_archive_is_refused(templates, archive_dir: Path) -> None:
    crawl = make_crawl()
    add_snapshot(crawl, templates["page0"])
    dest = archive_dir / "export"

    _, error = run_failing_export("--format", "bagit", "--crawl", str(crawl.pk), str(dest))

    assert "is inside the archive folder" in error
    assert not dest.exists()


# --- the admin's export actions (core/admin/export.py) -------------------------------------------


@pytest.fixture
def admin_client():
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com"))
    return client


def admin_action(client, model: str, action: str, pks: list) -> object:
    return client.post(
        f"/admin/{model}/",
        {"action": action, "_selected_action": [str(pk) for pk in pks]},
        follow=True,
    )


def unzip(response, tmp_path: Path) -> Path:
    """Extract a ZIP download into a new folder; return the folder."""
    target = tmp_path / "download"
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as archive:
        archive.extractall(target)
    return target


def test_admin_exports_selected_snapshots_as_a_bag_that_validates(
    admin_client, templates, tmp_path: Path, settings
) -> None:
    crawl = make_crawl()
    snapshots = [add_snapshot(crawl, templates[name]) for name in ("page0", "page1")]
    response = admin_action(
        admin_client, "core/snapshot", "export_bagit", [s.pk for s in snapshots]
    )
    disposition = response["Content-Disposition"]
    (bag,) = unzip(response, tmp_path).iterdir()
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert disposition.startswith('attachment; filename="vellum-selection-')
    assert disposition.endswith('-bagit.zip"')
    assert bagit_validate(bag).returncode == 0
    assert {path.name for path in (bag / "data").iterdir()} == {str(s.pk) for s in snapshots}
    assert not list(Path(settings.DATA_DIR).glob(".export-*"))  # the temporary folder is gone


def test_admin_exports_a_crawl_as_wacz_files_and_one_for_the_crawl(
    admin_client, templates, tmp_path: Path
) -> None:
    crawl = make_crawl()
    snapshots = [add_snapshot(crawl, templates[name]) for name in ("page0", "page1")]
    response = admin_action(admin_client, "crawls/crawl", "export_wacz", [crawl.pk])
    folder = unzip(response, tmp_path) / f"crawl-{crawl.pk}"
    names = {path.name for path in folder.iterdir()}
    assert f'filename="vellum-crawl-{crawl.pk}-wacz.zip"' in response["Content-Disposition"]
    assert names == {f"{s.pk}.wacz" for s in snapshots} | {f"crawl-{crawl.pk}.wacz"}
    assert all(validate_wacz(folder / name, timeout=TIMEOUT) == [] for name in names)


def test_admin_export_of_nothing_exportable_says_why(admin_client, templates) -> None:
    queued = add_snapshot(make_crawl(), templates["page0"], status=SnapshotStatus.QUEUED)
    response = admin_action(admin_client, "core/snapshot", "export_wacz", [queued.pk])
    messages = [str(message) for message in response.context["messages"]]
    assert response["Content-Type"].startswith("text/html")
    assert messages == [
        "Nothing to export: 1 not sealed (only sealed snapshots that pass their fixity check are)."
    ]


def test_admin_export_of_a_crawl_without_snapshots_says_so(admin_client) -> None:
    crawl = make_crawl()
    response = admin_action(admin_client, "crawls/crawl", "export_wacz", [crawl.pk])
    messages = [str(message) for message in response.context["messages"]]
    assert response.status_code == 200
    assert messages == [f"Nothing to export: crawl {crawl.pk} has no snapshots."]


def test_admin_export_sends_large_selections_to_the_command(
    admin_client, templates, monkeypatch
) -> None:
    from core.admin import export as admin_export

    monkeypatch.setattr(admin_export, "ADMIN_EXPORT_LIMIT", 1)
    crawl = make_crawl()
    snapshots = [add_snapshot(crawl, templates[name]) for name in ("page0", "page1")]
    response = admin_action(
        admin_client, "core/snapshot", "export_bagit", [s.pk for s in snapshots]
    )
    messages = [str(message) for message in response.context["messages"]]
    assert messages == [
        "2 snapshots are more than the admin exports at once (1): use manage.py export."
    ]
