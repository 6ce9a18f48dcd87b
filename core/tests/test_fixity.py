"""Fixity audits, repairs and restores (core/services/fixity.py) on snapshots sealed by the real
finalizing path, with a local mirror folder and moto's S3 server as storage targets.

Every snapshot here is built by ``snapshot_check_results`` from real files (a real WARC) and
signed with a key of the test's own; corruption is then injected into its folder, or into a
storage copy, the way a failing disk or an attacker would leave it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from archive.testing import MotoS3Server, files_in
from core.choices import CopyStatus, FixityOutcome, ResultStatus, SnapshotStatus
from core.folder.index_json import write_index
from core.folder.manifest import (
    INDEX_NAME,
    MANIFEST_NAME,
    SIGNATURE_NAME,
    read_manifest,
    write_manifest,
)
from core.folder.signing import key_fingerprint
from core.folder.transfers import upload_snapshot
from core.models import FixityCheck, Snapshot, StorageCopy
from core.models.preservation import LOCAL
from core.services.copies import copy_tick
from core.services.finalizing import snapshot_reseal
from core.services.fixity import (
    RestoreError,
    fixity_audit_due,
    local_problems,
    snapshot_audit,
    snapshot_restore,
)
from core.services.results import result_tick
from core.services.snapshots import snapshot_check_results
from core.tasks import audit_due, fixity_audit
from core.tests.test_services import make_result, make_snapshot
from core.tests.test_storage import use_targets
from core.tests.warcs import write_warc

pytestmark = pytest.mark.django_db

PAGE = "wget/a.example/index.html"
WARC = "wget/warc/archive.warc.gz"
TITLE = "title/title.txt"
FILE_SYSTEM = "django.core.files.storage.FileSystemStorage"


def use_own_data_dir(settings, folder: Path) -> Path:
    """Make ``folder`` this test's DATA_DIR, laid out as a ``manage.py`` subprocess derives it
    from ``DATA_DIR`` alone (archive/ and keys/ inside it), with no storage target."""
    settings.DATA_DIR = folder
    settings.ARCHIVE_DIR = folder / "archive"
    settings.KEYS_DIR = folder / "keys"
    settings.MAX_ATTEMPTS = 3
    use_targets(settings, {})
    return folder


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    return use_own_data_dir(settings, tmp_path)


# --- building and damaging snapshots -------------------------------------------------------------


def sealed_snapshot(url: str = "http://a.example/") -> Snapshot:
    """Seal a snapshot of ``url`` with a title, a page and a real WARC, through the finalizing
    path (integrity check, WACZ, index.json, manifest, signature)."""
    snapshot = make_snapshot(url)
    folder = snapshot.output_dir
    (folder / "title").mkdir(parents=True)
    (folder / TITLE).write_text("A page\n")
    (folder / PAGE).parent.mkdir(parents=True)
    (folder / PAGE).write_text("<html><title>A page</title><body>Some text.</body></html>")
    write_warc(folder / WARC, url)
    make_result(
        snapshot,
        "wget",
        ResultStatus.SUCCEEDED,
        output="a.example/index.html",
        output_files=[PAGE, WARC],
        attempts=1,
    )
    make_result(
        snapshot, "title", ResultStatus.SUCCEEDED, output="A page", output_files=[TITLE], attempts=1
    )
    snapshot_check_results(snapshot=snapshot)
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
    return snapshot


def flip_byte(path: Path, at: int | None = None) -> None:
    """Flip the lowest bit of one byte of ``path`` (the middle one by default).

    The damaged bytes go in a file of the path's own: snapshots' identical files are one
    read-only file on disk (core/folder/blobs.py), and a test damages one snapshot at a time.
    """
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at] ^= 0x01
    path.unlink()
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.unlink()  # a file of its own, as flip_byte's
    path.write_bytes(data[: len(data) // 2])


def edit_digest(folder: Path, relative: str = PAGE) -> None:
    """Replace the digest of ``relative`` in the manifest by another, valid-looking one."""
    manifest = folder / MANIFEST_NAME
    forged = hashlib.sha256(b"forged").hexdigest()
    lines = [
        f"{forged}  {relative}" if line.endswith(f"  {relative}") else line
        for line in manifest.read_text().split("\n")
    ]
    manifest.write_text("\n".join(lines))


def tamper_and_rewrite_manifest(folder: Path) -> None:
    """What an attacker without the key does: alter a file and make the manifest match it."""
    (folder / PAGE).write_text("<html><title>forged</title></html>")
    write_manifest(folder)


def sign_with_other_key(folder: Path, *, rewrite_manifest: bool) -> str:
    """Name another key in index.json and sign the manifest with it (after rewriting the
    manifest over the new index.json, with ``rewrite_manifest``); return its fingerprint."""
    key = Ed25519PrivateKey.generate()
    public_pem = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode("ascii")
    )
    fingerprint = key_fingerprint(public_pem)
    index = json.loads((folder / INDEX_NAME).read_text())
    index["signing_key"] = {
        "algorithm": "Ed25519",
        "fingerprint": fingerprint,
        "public_key": public_pem,
    }
    write_index(folder, index)
    if rewrite_manifest:
        write_manifest(folder)
    (folder / SIGNATURE_NAME).write_bytes(key.sign((folder / MANIFEST_NAME).read_bytes()))
    return fingerprint


def name_a_broken_key(folder: Path) -> None:
    index = json.loads((folder / INDEX_NAME).read_text())
    index["signing_key"]["public_key"] = "-----BEGIN PUBLIC KEY-----\nnot a key\n"
    write_index(folder, index)


@dataclass(frozen=True)
class Corruption:
    """One way a snapshot folder gets damaged, and what a check must say about it: each of
    ``problems`` is part of exactly one reported problem, and nothing else is reported."""

    name: str
    damage: Callable[[Path], object]
    problems: tuple[str, ...]

    def __str__(self) -> str:
        return self.name


NOT_SEALED = f"{MANIFEST_NAME} is not the one sealed (sha256 "
BAD_SIGNATURE = f"signature does not match {MANIFEST_NAME}"
UNTRUSTED = "signed by a key this archive does not trust (sha256:"

CORRUPTIONS = [
    Corruption(
        "flipped byte in a payload file",
        lambda folder: flip_byte(folder / PAGE),
        (f"checksum mismatch: {PAGE}",),
    ),
    Corruption(
        "deleted payload file",
        lambda folder: (folder / TITLE).unlink(),
        (f"missing: {TITLE}",),
    ),
    Corruption(
        "truncated WARC",
        lambda folder: truncate(folder / WARC),
        (f"checksum mismatch: {WARC}",),
    ),
    Corruption(
        "added file",
        lambda folder: (folder / "wget" / "extra.html").write_text("<html>extra</html>"),
        ("not in manifest: wget/extra.html",),
    ),
    Corruption(
        "edited manifest digest",
        edit_digest,
        (NOT_SEALED, BAD_SIGNATURE, f"checksum mismatch: {PAGE}"),
    ),
    Corruption(
        "tampered file with a manifest rewritten to match",
        tamper_and_rewrite_manifest,
        (NOT_SEALED, BAD_SIGNATURE),
    ),
    Corruption(
        "deleted manifest",
        lambda folder: (folder / MANIFEST_NAME).unlink(),
        (f"missing: {MANIFEST_NAME}",),
    ),
    Corruption(
        "flipped byte in the signature",
        lambda folder: flip_byte(folder / SIGNATURE_NAME),
        (BAD_SIGNATURE,),
    ),
    Corruption(
        "truncated signature",
        lambda folder: truncate(folder / SIGNATURE_NAME),
        (f"signature is 32 bytes, not 64: {SIGNATURE_NAME}",),
    ),
    Corruption(
        "deleted signature",
        lambda folder: (folder / SIGNATURE_NAME).unlink(),
        (f"signature missing: {SIGNATURE_NAME}",),
    ),
    Corruption(
        "signed by another key named in index.json",
        lambda folder: sign_with_other_key(folder, rewrite_manifest=False),
        (UNTRUSTED, f"checksum mismatch: {INDEX_NAME}"),
    ),
    Corruption(
        "signed by another key named in index.json, manifest rewritten",
        lambda folder: sign_with_other_key(folder, rewrite_manifest=True),
        (NOT_SEALED, UNTRUSTED),
    ),
    Corruption(
        "index.json names a key that is not one",
        name_a_broken_key,
        ("signature not checked: public key is not a PEM public key", "checksum mismatch: index"),
    ),
    Corruption(
        "deleted index.json",
        lambda folder: (folder / INDEX_NAME).unlink(),
        (f"missing: {INDEX_NAME}",),
    ),
    Corruption(
        "deleted snapshot folder",
        shutil.rmtree,
        ("folder missing: ",),
    ),
]


def assert_problems(problems: list[str], expected: tuple[str, ...]) -> None:
    """Each of ``expected`` is part of exactly one of ``problems``, and there are no others."""
    assert len(problems) == len(expected), problems
    for text in expected:
        assert sum(text in problem for problem in problems) == 1, (text, problems)


def outcomes(checks: list[FixityCheck]) -> dict[str, str]:
    return {check.location: check.outcome for check in checks}


# --- the local folder -----------------------------------------------------------------------------


def test_a_clean_sealed_snapshot_is_sound() -> None:
    snapshot = sealed_snapshot()

    problems, files = local_problems(snapshot)
    checks = snapshot_audit(snapshot=snapshot)

    assert problems == []
    assert files == len(read_manifest(snapshot.output_dir)) == 5
    assert [(c.location, c.outcome, c.problems, c.files) for c in checks] == [
        (LOCAL, FixityOutcome.OK, [], 5)
    ]
    assert list(FixityCheck.objects.filter(snapshot=snapshot)) == checks
    assert not Snapshot.objects.flagged().exists()


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=str)
def test_local_problems_detect_each_corruption(settings, corruption: Corruption) -> None:
    settings.PACKAGE_WACZ = False  # one payload file more; fifteen cases need not build it
    snapshot = sealed_snapshot()
    corruption.damage(snapshot.output_dir)

    problems, _files = local_problems(snapshot)
    checks = snapshot_audit(snapshot=snapshot)

    assert_problems(problems, corruption.problems)
    assert [(c.location, c.outcome, c.problems) for c in checks] == [
        (LOCAL, FixityOutcome.FLAGGED, problems)
    ]
    assert list(Snapshot.objects.flagged()) == [snapshot]


def test_the_problems_name_the_missing_folder() -> None:
    snapshot = sealed_snapshot()
    shutil.rmtree(snapshot.output_dir)

    assert local_problems(snapshot) == ([f"folder missing: {snapshot.output_dir}"], 0)


def flagged_then_mended() -> Snapshot:
    """A sealed snapshot that an audit flagged (a byte of its page flipped), then mended."""
    snapshot = sealed_snapshot()
    original = (snapshot.output_dir / PAGE).read_bytes()
    flip_byte(snapshot.output_dir / PAGE)
    snapshot_audit(snapshot=snapshot)
    assert list(Snapshot.objects.flagged()) == [snapshot]
    (snapshot.output_dir / PAGE).write_bytes(original)
    return snapshot


def test_a_later_sound_check_clears_the_flag() -> None:
    snapshot = flagged_then_mended()

    snapshot_audit(snapshot=snapshot)

    assert not Snapshot.objects.flagged().exists()
    assert FixityCheck.objects.filter(snapshot=snapshot).count() == 2  # the trail is kept


def test_a_reseal_keeps_what_audits_found() -> None:
    """A re-seal signs the folder's bytes again (revisits made whole when the snapshot they
    referred to is removed): damage an audit found stays flagged, not signed away."""
    snapshot = sealed_snapshot()
    flip_byte(snapshot.output_dir / PAGE)
    snapshot_audit(snapshot=snapshot)

    snapshot_reseal(snapshot=Snapshot.objects.get(pk=snapshot.pk))

    assert list(Snapshot.objects.flagged()) == [snapshot]
    assert not Snapshot.objects.unchecked().exists()


def test_only_sealed_snapshots_are_audited() -> None:
    snapshot = make_snapshot(status=SnapshotStatus.STARTED)

    with pytest.raises(ValueError, match=f"snapshot {snapshot.pk} is started, not sealed"):
        snapshot_audit(snapshot=snapshot)

    assert not FixityCheck.objects.exists()


def test_a_page_archived_with_wget_verifies_and_a_truncated_warc_does_not(live_site) -> None:
    snapshot = make_snapshot(live_site.url("/"))
    for extractor in ("wget", "title"):
        result_tick(result=make_result(snapshot, extractor))
    snapshot_check_results(snapshot=Snapshot.objects.get(pk=snapshot.pk))
    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED, snapshot.error
    warcs = [name for name in read_manifest(snapshot.output_dir) if name.endswith(".warc.gz")]
    assert warcs, read_manifest(snapshot.output_dir)

    assert outcomes(snapshot_audit(snapshot=snapshot)) == {LOCAL: FixityOutcome.OK}

    truncate(snapshot.output_dir / warcs[0])

    assert local_problems(snapshot)[0] == [f"checksum mismatch: {warcs[0]}"]


# --- storage copies ------------------------------------------------------------------------------


@pytest.fixture
def targets(settings, tmp_path: Path, s3_server: MotoS3Server) -> dict[str, dict]:
    """Two storage targets: a mirror folder beside the archive, and a bucket on moto's S3."""
    entries = {
        "mirror": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": str(tmp_path / "mirror")}},
        "s3": s3_server.storage_entry(s3_server.create_bucket()),
    }
    use_targets(settings, entries)
    return entries


def copies_of(snapshot: Snapshot) -> dict[str, str]:
    return dict(StorageCopy.objects.filter(snapshot=snapshot).values_list("target", "status"))


def copy_queued(snapshot: Snapshot) -> None:
    """Run ``copy_tick`` once for every queued copy of ``snapshot``."""
    for copy in StorageCopy.objects.filter(snapshot=snapshot, status=CopyStatus.QUEUED):
        copy_tick(copy=copy)


def stored_snapshot() -> Snapshot:
    """A sealed snapshot copied to every configured target."""
    snapshot = sealed_snapshot()
    assert copies_of(snapshot) == dict.fromkeys(django_settings.STORAGE_TARGETS, "queued")
    copy_queued(snapshot)
    stored = dict.fromkeys(django_settings.STORAGE_TARGETS, CopyStatus.STORED)
    assert copies_of(snapshot) == stored, list(StorageCopy.objects.values("target", "error"))
    return snapshot


def mirror_file(snapshot: Snapshot, relative: str) -> Path:
    location = Path(django_settings.STORAGE_TARGETS["mirror"]["OPTIONS"]["location"])
    return location / str(snapshot.pk) / relative


def s3_put(s3_server: MotoS3Server, snapshot: Snapshot, relative: str, data: bytes) -> None:
    bucket = django_settings.STORAGE_TARGETS["s3"]["OPTIONS"]["bucket_name"]
    s3_server.client().put_object(Bucket=bucket, Key=f"{snapshot.pk}/{relative}", Body=data)


def test_a_damaged_mirror_copy_is_flagged_requeued_and_copied_again(targets) -> None:
    snapshot = stored_snapshot()
    assert outcomes(snapshot_audit(snapshot=snapshot)) == {
        LOCAL: FixityOutcome.OK,
        "mirror": FixityOutcome.OK,
        "s3": FixityOutcome.OK,
    }

    flip_byte(mirror_file(snapshot, WARC))
    checks = snapshot_audit(snapshot=snapshot)

    assert outcomes(checks) == {
        LOCAL: FixityOutcome.OK,
        "mirror": FixityOutcome.FLAGGED,
        "s3": FixityOutcome.OK,
    }
    flagged = next(check for check in checks if check.location == "mirror")
    assert flagged.problems == [f"mirror: checksum mismatch: {WARC}"]
    mirror = StorageCopy.objects.get(snapshot=snapshot, target="mirror")
    assert mirror.status == CopyStatus.DAMAGED
    assert mirror.error == f"mirror: checksum mismatch: {WARC}"
    assert StorageCopy.objects.get(snapshot=snapshot, target="s3").status == CopyStatus.STORED
    assert list(Snapshot.objects.flagged()) == [snapshot]

    out = call_restore("--snapshot", str(snapshot.pk))

    assert out == f"{snapshot.pk}: queued 1 damaged or failed storage copies to be copied again\n"
    assert copies_of(snapshot) == {"mirror": CopyStatus.QUEUED, "s3": CopyStatus.STORED}

    copy_queued(snapshot)

    assert copies_of(snapshot) == {"mirror": CopyStatus.STORED, "s3": CopyStatus.STORED}
    assert not Snapshot.objects.flagged().exists()  # the copy's read-back is a sound check
    assert set(outcomes(snapshot_audit(snapshot=snapshot)).values()) == {FixityOutcome.OK}
    assert not Snapshot.objects.flagged().exists()


def test_a_damaged_copy_found_intact_again_counts_as_stored_again(targets) -> None:
    snapshot = stored_snapshot()
    damaged = mirror_file(snapshot, WARC)
    original = damaged.read_bytes()
    flip_byte(damaged)
    snapshot_audit(snapshot=snapshot)
    assert copies_of(snapshot)["mirror"] == CopyStatus.DAMAGED

    damaged.write_bytes(original)  # mended by hand
    checks = snapshot_audit(snapshot=snapshot)

    assert outcomes(checks)["mirror"] == FixityOutcome.OK
    assert copies_of(snapshot)["mirror"] == CopyStatus.STORED
    assert not Snapshot.objects.flagged().exists()


def test_a_copy_that_does_not_read_back_intact_is_not_stored(targets, monkeypatch) -> None:
    def upload_and_damage(target: str, folder: Path, snapshot_id: str) -> tuple[int, int]:
        copied = upload_snapshot(target, folder, snapshot_id)
        if target == "mirror":
            flip_byte(mirror_file(Snapshot.objects.get(pk=snapshot_id), WARC))
        return copied

    monkeypatch.setattr("core.services.copies.upload_snapshot", upload_and_damage)
    snapshot = sealed_snapshot()

    copy_queued(snapshot)

    mirror = StorageCopy.objects.get(snapshot=snapshot, target="mirror")
    assert mirror.status == CopyStatus.BACKOFF
    assert mirror.error == f"copy did not verify: mirror: checksum mismatch: {WARC}"
    assert copies_of(snapshot)["s3"] == CopyStatus.STORED
    assert list(FixityCheck.objects.values_list("location", "outcome")) == [
        ("s3", FixityOutcome.OK)
    ]


def test_a_copy_missing_a_file_is_flagged(targets) -> None:
    snapshot = stored_snapshot()
    mirror_file(snapshot, TITLE).unlink()

    checks = snapshot_audit(snapshot=snapshot)

    assert [c.problems for c in checks if c.location == "mirror"] == [[f"mirror: missing: {TITLE}"]]
    assert copies_of(snapshot)["mirror"] == CopyStatus.DAMAGED


def test_a_copy_with_another_signature_is_flagged(targets, s3_server) -> None:
    snapshot = stored_snapshot()
    s3_put(s3_server, snapshot, SIGNATURE_NAME, bytes(64))

    checks = snapshot_audit(snapshot=snapshot)

    assert outcomes(checks)["s3"] == FixityOutcome.FLAGGED
    assert [c.problems for c in checks if c.location == "s3"] == [
        ["s3: signature differs from the local one"]
    ]
    assert copies_of(snapshot) == {"mirror": CopyStatus.STORED, "s3": CopyStatus.DAMAGED}


def test_a_copy_whose_target_is_gone_is_not_checked(targets, settings) -> None:
    snapshot = stored_snapshot()
    use_targets(settings, {"s3": targets["s3"]})

    checks = snapshot_audit(snapshot=snapshot)

    gone = next(check for check in checks if check.location == "mirror")
    assert gone.outcome == FixityOutcome.UNREACHABLE
    assert gone.problems == ["target 'mirror' not configured"]
    assert copies_of(snapshot)["mirror"] == CopyStatus.STORED
    assert not Snapshot.objects.flagged().exists()


def test_local_only_audit_leaves_the_copies_alone(targets) -> None:
    snapshot = stored_snapshot()
    flip_byte(mirror_file(snapshot, WARC))

    assert outcomes(snapshot_audit(snapshot=snapshot, remote=False)) == {LOCAL: FixityOutcome.OK}
    assert copies_of(snapshot)["mirror"] == CopyStatus.STORED


# --- restoring the local folder from a copy ------------------------------------------------------


def call_restore(*args: str) -> str:
    """Run ``manage.py restore`` in process; return what it printed."""
    out = StringIO()
    call_command("restore", *args, stdout=out)
    return out.getvalue()


def quarantined(data_dir: Path) -> list[Path]:
    folder = data_dir / "quarantine"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_damaged_local_folder_is_restored_from_a_copy(targets, data_dir) -> None:
    snapshot = stored_snapshot()
    folder = snapshot.output_dir
    sound = files_in(folder)
    (folder / TITLE).unlink()
    snapshot_audit(snapshot=snapshot)
    assert list(Snapshot.objects.flagged()) == [snapshot]
    before = timezone.now()

    out = call_restore("--snapshot", str(snapshot.pk), "--from", "s3")

    assert out == f"{snapshot.pk}: restored the local folder from s3\n"
    assert local_problems(snapshot) == ([], 5)
    assert files_in(folder) == sound
    [kept] = quarantined(data_dir)
    assert kept.name.startswith(f"{snapshot.pk}-")
    assert files_in(kept) == sound - {TITLE}
    latest = FixityCheck.objects.filter(snapshot=snapshot, location=LOCAL).first()
    assert (latest.outcome, latest.problems) == (FixityOutcome.OK, [])
    assert latest.checked_at >= before
    assert not Snapshot.objects.flagged().exists()
    assert not (data_dir / "tmp" / f"restore-{snapshot.pk}").exists()
    assert copies_of(snapshot) == {"mirror": CopyStatus.STORED, "s3": CopyStatus.STORED}


def test_a_deleted_local_folder_is_restored(targets, data_dir) -> None:
    snapshot = stored_snapshot()
    sound = files_in(snapshot.output_dir)
    shutil.rmtree(snapshot.output_dir)

    assert snapshot_restore(snapshot=snapshot) == "mirror"

    assert files_in(snapshot.output_dir) == sound
    assert local_problems(snapshot) == ([], 5)
    assert quarantined(data_dir) == []  # nothing was there to keep


def test_restore_falls_back_to_the_next_sound_copy(targets, s3_server) -> None:
    snapshot = stored_snapshot()
    flip_byte(mirror_file(snapshot, PAGE))
    flip_byte(snapshot.output_dir / PAGE)

    assert snapshot_restore(snapshot=snapshot) == "s3"

    assert local_problems(snapshot) == ([], 5)


def tamper_s3_file(s3_server: MotoS3Server, snapshot: Snapshot) -> None:
    s3_put(s3_server, snapshot, PAGE, b"<html>forged</html>")


def tamper_s3_file_and_manifest(s3_server: MotoS3Server, snapshot: Snapshot) -> None:
    """Alter a file of the copy and the copy's manifest to match (its signature is kept)."""
    forged = b"<html>forged</html>"
    s3_put(s3_server, snapshot, PAGE, forged)
    manifest = (snapshot.output_dir / MANIFEST_NAME).read_text()
    digest = read_manifest(snapshot.output_dir)[PAGE]
    manifest = manifest.replace(digest, hashlib.sha256(forged).hexdigest())
    s3_put(s3_server, snapshot, MANIFEST_NAME, manifest.encode())


def tamper_s3_signature(s3_server: MotoS3Server, snapshot: Snapshot) -> None:
    s3_put(s3_server, snapshot, SIGNATURE_NAME, bytes(64))


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (tamper_s3_file, f"s3: checksum mismatch: {PAGE}"),
        (tamper_s3_file_and_manifest, "s3: its manifest is not the one sealed"),
        (tamper_s3_signature, f"s3: signature does not match {MANIFEST_NAME}"),
    ],
    ids=["file", "file and manifest", "signature"],
)
def test_restore_refuses_a_damaged_copy_and_keeps_the_local_folder(
    targets, s3_server, data_dir, tamper, reason
) -> None:
    snapshot = stored_snapshot()
    folder = snapshot.output_dir
    (folder / TITLE).unlink()
    damaged = {name: (folder / name).read_bytes() for name in files_in(folder)}
    tamper(s3_server, snapshot)

    with pytest.raises(RestoreError) as caught:
        snapshot_restore(snapshot=snapshot, target="s3")

    assert str(caught.value) == reason
    assert {name: (folder / name).read_bytes() for name in files_in(folder)} == damaged
    assert quarantined(data_dir) == []
    assert not (data_dir / "tmp" / f"restore-{snapshot.pk}").exists()
    assert not FixityCheck.objects.filter(snapshot=snapshot, location=LOCAL).exists()


def test_the_restore_command_reports_a_refused_copy(targets, s3_server, data_dir) -> None:
    snapshot = stored_snapshot()
    folder = snapshot.output_dir
    (folder / TITLE).unlink()
    damaged = files_in(folder)
    tamper_s3_file(s3_server, snapshot)
    out, err = StringIO(), StringIO()

    with pytest.raises(
        CommandError, match=r"^1 of 1 snapshots could not be restored; manage.py rearchive ID"
    ):
        call_command(
            "restore", "--snapshot", str(snapshot.pk), "--from", "s3", stdout=out, stderr=err
        )

    assert err.getvalue() == f"{snapshot.pk}: cannot restore: s3: checksum mismatch: {PAGE}\n"
    assert out.getvalue() == ""
    assert files_in(folder) == damaged
    assert quarantined(data_dir) == []
    assert list(Snapshot.objects.flagged()) == [snapshot]  # the repair recorded what it found


def test_restore_without_a_stored_copy_says_so(targets) -> None:
    snapshot = sealed_snapshot()  # its copies are queued, never stored

    with pytest.raises(RestoreError, match=f"snapshot {snapshot.pk} has no stored copy on s3"):
        snapshot_restore(snapshot=snapshot, target="s3")


# --- a target that is down -----------------------------------------------------------------------


@pytest.fixture
def own_s3(settings) -> Iterator[MotoS3Server]:
    """An S3 server of this test's own as the only target, so stopping it disturbs nobody."""
    server = MotoS3Server().start()
    try:
        use_targets(settings, {"s3": server.storage_entry(server.create_bucket())})
        yield server
    finally:
        server.stop()


def test_an_unreachable_target_is_recorded_not_flagged(own_s3) -> None:
    snapshot = stored_snapshot()
    own_s3.stop()

    checks = snapshot_audit(snapshot=snapshot)

    assert outcomes(checks) == {LOCAL: FixityOutcome.OK, "s3": FixityOutcome.UNREACHABLE}
    down = next(check for check in checks if check.location == "s3")
    assert down.problems == [
        f"s3: cannot connect to http://127.0.0.1:{own_s3.port} (connection refused)"
    ]
    assert copies_of(snapshot) == {"s3": CopyStatus.STORED}
    assert not Snapshot.objects.flagged().exists()


def test_an_unreachable_target_does_not_hide_earlier_damage(own_s3) -> None:
    snapshot = stored_snapshot()
    s3_put(own_s3, snapshot, WARC, b"not the warc")
    assert outcomes(snapshot_audit(snapshot=snapshot))["s3"] == FixityOutcome.FLAGGED
    own_s3.stop()

    assert outcomes(snapshot_audit(snapshot=snapshot))["s3"] == FixityOutcome.UNREACHABLE

    assert list(Snapshot.objects.flagged()) == [snapshot]
    assert copies_of(snapshot) == {"s3": CopyStatus.DAMAGED}


# --- the scheduled audit -------------------------------------------------------------------------


def checked(snapshot: Snapshot, days_ago: float, location: str = LOCAL) -> None:
    """Record a sound check of ``snapshot``'s copy at ``location``, ``days_ago`` days ago (the
    snapshot sealed before it, if it was not)."""
    checked_at = timezone.now() - timedelta(days=days_ago)
    Snapshot.objects.filter(pk=snapshot.pk, end_ts__gt=checked_at).update(
        end_ts=checked_at - timedelta(minutes=1)
    )
    FixityCheck.objects.create(
        snapshot=snapshot, location=location, outcome=FixityOutcome.OK, checked_at=checked_at
    )


def test_the_due_audit_checks_only_snapshots_not_checked_recently(settings) -> None:
    settings.FIXITY_AUDIT_INTERVAL_DAYS = 30
    settings.PACKAGE_WACZ = False  # four snapshots: the audit does not need their WACZ
    never, long_ago, recently, elsewhere = (sealed_snapshot() for _ in range(4))
    checked(long_ago, days_ago=31)
    checked(recently, days_ago=29)
    checked(elsewhere, days_ago=1, location="s3")  # another copy's check does not count
    unsealed = make_snapshot(status=SnapshotStatus.STARTED)
    started = timezone.now()

    assert fixity_audit_due() == 3

    audited = set(
        FixityCheck.objects.filter(location=LOCAL, checked_at__gte=started).values_list(
            "snapshot", flat=True
        )
    )
    assert audited == {never.pk, long_ago.pk, elsewhere.pk}
    assert not unsealed.fixity_checks.exists()
    assert fixity_audit_due() == 0


def test_the_due_audit_honours_its_limit_and_the_interval(settings) -> None:
    settings.PACKAGE_WACZ = False
    first, second = sealed_snapshot(), sealed_snapshot()

    assert fixity_audit_due(limit=1) == 1
    assert {c.snapshot_id for c in FixityCheck.objects.all()} == {first.pk}  # sealed first
    assert fixity_audit_due(limit=1) == 1
    assert fixity_audit_due(limit=1) == 0

    settings.FIXITY_AUDIT_INTERVAL_DAYS = 1
    later = timezone.now() + timedelta(days=1, seconds=1)
    assert fixity_audit_due(now=later) == 2
    assert FixityCheck.objects.filter(snapshot=second).count() == 2


def test_the_due_audit_flags_damage(settings) -> None:
    snapshot = sealed_snapshot()
    (snapshot.output_dir / TITLE).unlink()

    assert fixity_audit_due() == 1

    assert list(Snapshot.objects.flagged()) == [snapshot]


def test_the_audit_is_due_in_the_minutes_its_cron_names(settings) -> None:
    settings.FIXITY_AUDIT_CRON = "30 3 * * 1"  # Mondays at 03:30 (UTC, huey's clock)

    assert audit_due(datetime(2026, 11, 30, 3, 30, 41))  # a Monday
    assert not audit_due(datetime(2026, 11, 30, 3, 31))
    assert not audit_due(datetime(2026, 12, 1, 3, 30))  # a Tuesday


def test_the_huey_task_runs_the_due_audit(settings) -> None:
    settings.PACKAGE_WACZ = False
    for _ in range(2):
        sealed_snapshot()

    assert fixity_audit.call_local() == 2
    assert FixityCheck.objects.filter(location=LOCAL).count() == 2

    FixityCheck.objects.all().delete()
    fixity_audit()  # HUEY_IMMEDIATE: enqueued and run in this process (huey keeps no result)
    assert FixityCheck.objects.filter(location=LOCAL).count() == 2
