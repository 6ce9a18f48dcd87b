"""Copies of snapshot folders on storage targets (core/folder/targets.py and transfers.py) and
the system checks on STORAGE_TARGETS (core/checks.py), against a local mirror folder and moto's
S3 server."""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, NoCredentialsError, ReadTimeoutError
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage

from archive.testing import MotoS3Server, files_in
from core.checks import check_storage_targets
from core.folder.manifest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    TEMP_PREFIX,
    sha256_file,
    verify_manifest,
    write_manifest,
)
from core.folder.targets import (
    TargetError,
    TargetUnavailable,
    get_target,
    target_errors,
    target_names,
)
from core.folder.transfers import delete_copy, download_snapshot, upload_snapshot, verify_copy

SNAPSHOT_ID = "01JAXV7Q5Z3M8W2N4R6T9YBCDE"
WARC = "wget/warc/archive.warc.gz"
FILE_SYSTEM = "django.core.files.storage.FileSystemStorage"
BOTH = pytest.mark.parametrize("target", ["mirror", "s3"])


def make_snapshot(folder: Path) -> Path:
    """Write a sealed snapshot folder: payload files, their manifest and a 64-byte signature."""
    files = {
        "index.json": b'{"url": "http://127.0.0.1/"}\n',
        WARC: b"\x1f\x8b\x08\x00" + os.urandom(300_000),
        "screenshot/screenshot.png": b"\x89PNG\r\n\x1a\n" + os.urandom(5_000),
        "wget/127.0.0.1/odd name 100%.html": b"<html>odd</html>",
        "title/empty.txt": b"",
    }
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    write_manifest(folder)
    (folder / SIGNATURE_NAME).write_bytes(os.urandom(64))
    return folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_snapshot(tmp_path / "archive" / SNAPSHOT_ID)


@pytest.fixture
def targets(settings, tmp_path: Path, s3_server: MotoS3Server) -> dict[str, dict]:
    """Three targets: a mirror folder, an S3 bucket, and a second S3 target in the same bucket
    (under keep/) that does not overwrite by itself."""
    bucket = s3_server.create_bucket()
    entries = {
        "mirror": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": str(tmp_path / "mirror")}},
        "s3": s3_server.storage_entry(bucket),
        "s3-keep": s3_server.storage_entry(bucket, location="keep", file_overwrite=False),
    }
    use_targets(settings, entries)
    return entries


def use_targets(settings, entries: dict[str, dict]) -> None:
    # Setting STORAGES sends setting_changed, on which Django empties its cache of storages.
    settings.STORAGE_TARGETS = entries
    settings.STORAGES = {**django_settings.STORAGES, **entries}


# --- looking at a copy from outside -------------------------------------------------------------


def remote_files(target: str, s3_server: MotoS3Server) -> set[str]:
    """Every file of the snapshot's copy, as paths relative to its folder, listed directly (not
    through the code under test)."""
    options = django_settings.STORAGE_TARGETS[target]["OPTIONS"]
    if "location" in options and "bucket_name" not in options:
        copy = Path(options["location"]) / SNAPSHOT_ID
        return files_in(copy) if copy.exists() else set()
    prefix = "/".join(part for part in (options.get("location"), SNAPSHOT_ID) if part) + "/"
    pages = s3_server.client().get_paginator("list_objects_v2")
    keys = [
        item["Key"]
        for page in pages.paginate(Bucket=options["bucket_name"], Prefix=prefix)
        for item in page.get("Contents", ())
    ]
    return {key.removeprefix(prefix) for key in keys}


def remote_read(target: str, relative: str) -> bytes:
    with get_target(target).open(f"{SNAPSHOT_ID}/{relative}", "rb") as handle:
        return handle.read()


def remote_write(target: str, relative: str, data: bytes) -> None:
    storage = get_target(target)
    storage.delete(f"{SNAPSHOT_ID}/{relative}")
    assert storage.save(f"{SNAPSHOT_ID}/{relative}", ContentFile(data)) == (
        f"{SNAPSHOT_ID}/{relative}"
    )


def flip_byte(data: bytes, at: int = 1000) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def temporary_files(folder: Path) -> set[str]:
    return {name for name in files_in(folder) if TEMP_PREFIX in name}


# --- upload and verify --------------------------------------------------------------------------


@BOTH
def test_upload_copies_every_file_and_the_copy_verifies(targets, s3_server, folder, target):
    files, size = upload_snapshot(target, folder, SNAPSHOT_ID)

    local = files_in(folder)
    assert remote_files(target, s3_server) == local
    assert (files, size) == (len(local), sum((folder / name).stat().st_size for name in local))
    assert remote_read(target, WARC) == (folder / WARC).read_bytes()
    assert verify_copy(target, folder, SNAPSHOT_ID) == []


@pytest.mark.parametrize("target", ["mirror", "s3", "s3-keep"])
def test_upload_again_overwrites_in_place(targets, s3_server, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    (folder / "index.json").write_bytes(b'{"url": "http://127.0.0.1/", "rearchived": true}\n')
    write_manifest(folder)

    upload_snapshot(target, folder, SNAPSHOT_ID)

    # No index_AbC123.json beside index.json: every name was overwritten, not renamed.
    assert remote_files(target, s3_server) == files_in(folder)
    assert remote_read(target, "index.json") == (folder / "index.json").read_bytes()
    assert verify_copy(target, folder, SNAPSHOT_ID) == []


@BOTH
def test_a_flipped_byte_in_a_remote_file_is_a_checksum_mismatch(targets, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    remote_write(target, WARC, flip_byte(remote_read(target, WARC)))

    assert verify_copy(target, folder, SNAPSHOT_ID) == [f"{target}: checksum mismatch: {WARC}"]


@BOTH
def test_a_deleted_remote_file_is_missing(targets, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    get_target(target).delete(f"{SNAPSHOT_ID}/screenshot/screenshot.png")

    assert verify_copy(target, folder, SNAPSHOT_ID) == [
        f"{target}: missing: screenshot/screenshot.png"
    ]


@BOTH
def test_a_tampered_remote_manifest_is_reported(targets, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    remote_write(target, MANIFEST_NAME, remote_read(target, MANIFEST_NAME).replace(b"a", b"b", 1))

    assert verify_copy(target, folder, SNAPSHOT_ID) == [
        f"{target}: manifest differs from the local one"
    ]


@BOTH
def test_a_different_or_missing_remote_signature_is_reported(targets, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    remote_write(target, SIGNATURE_NAME, os.urandom(64))
    assert verify_copy(target, folder, SNAPSHOT_ID) == [
        f"{target}: signature differs from the local one"
    ]

    get_target(target).delete(f"{SNAPSHOT_ID}/{SIGNATURE_NAME}")
    assert verify_copy(target, folder, SNAPSHOT_ID) == [f"{target}: missing: {SIGNATURE_NAME}"]


@BOTH
def test_without_a_local_folder_the_remote_manifest_says_what_to_check(targets, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    shutil.rmtree(folder)
    assert verify_copy(target, folder, SNAPSHOT_ID) == []

    remote_write(target, WARC, flip_byte(remote_read(target, WARC)))
    assert verify_copy(target, folder, SNAPSHOT_ID) == [f"{target}: checksum mismatch: {WARC}"]


@BOTH
def test_a_copy_never_made_is_missing_everything(targets, folder, target):
    problems = verify_copy(target, folder, SNAPSHOT_ID)

    listed = sorted(
        name for name in files_in(folder) if name not in (MANIFEST_NAME, SIGNATURE_NAME)
    )
    assert sorted(problems) == sorted(
        [f"{target}: missing: {MANIFEST_NAME}", f"{target}: missing: {SIGNATURE_NAME}"]
        + [f"{target}: missing: {name}" for name in listed]
    )


@BOTH
def test_the_signature_goes_last_and_an_interrupted_upload_never_looks_complete(
    targets, folder, tmp_path, monkeypatch, target
):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    backend = type(get_target(target))
    save, saved = backend._save, []

    def save_twice_then_fill_the_disk(self, name, content):
        if len(saved) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        saved.append(name.removeprefix(f"{SNAPSHOT_ID}/"))
        return save(self, name, content)

    monkeypatch.setattr(backend, "_save", save_twice_then_fill_the_disk)
    with pytest.raises(TargetUnavailable, match="no space left on device"):
        upload_snapshot(target, folder, SNAPSHOT_ID)

    assert MANIFEST_NAME not in saved
    assert f"{target}: missing: {SIGNATURE_NAME}" in verify_copy(target, folder, SNAPSHOT_ID)
    with pytest.raises(TargetError, match="incomplete"):
        download_snapshot(target, SNAPSHOT_ID, tmp_path / "restored")

    saved.clear()
    monkeypatch.setattr(backend, "_save", lambda self, name, content: (
        saved.append(name.removeprefix(f"{SNAPSHOT_ID}/")) or save(self, name, content)
    ))  # fmt: skip
    upload_snapshot(target, folder, SNAPSHOT_ID)
    assert saved[-2:] == [MANIFEST_NAME, SIGNATURE_NAME]
    assert sorted(saved) == sorted(files_in(folder))


def test_a_failed_upload_returns_only_after_its_other_transfers_end(targets, folder, monkeypatch):
    """A retry starts right after a failure: no thread of the failed upload may still write."""
    backend = type(get_target("mirror"))
    save, running = backend._save, []
    started = threading.Barrier(2)

    def fail_one_while_another_runs(self, name, content):
        if name.endswith("index.json"):  # the first file listed
            started.wait(timeout=5)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        if name.endswith(WARC):  # the last
            running.append(name)
            started.wait(timeout=5)
            time.sleep(0.3)  # still writing when the WARC's transfer fails
            running.remove(name)
        return save(self, name, content)

    monkeypatch.setattr(backend, "_save", fail_one_while_another_runs)
    with pytest.raises(TargetUnavailable, match="no space left on device"):
        upload_snapshot("mirror", folder, SNAPSHOT_ID)
    assert running == []


def test_upload_refuses_a_folder_that_is_not_sealed(targets, s3_server, folder):
    (folder / SIGNATURE_NAME).unlink()
    with pytest.raises(FileNotFoundError, match="not sealed"):
        upload_snapshot("mirror", folder, SNAPSHOT_ID)

    (folder / MANIFEST_NAME).unlink()
    with pytest.raises(FileNotFoundError):
        upload_snapshot("mirror", folder, SNAPSHOT_ID)
    assert remote_files("mirror", s3_server) == set()


class RenamingStorage(FileSystemStorage):
    """A backend that never reuses a name, whatever was deleted."""

    def get_available_name(self, name, max_length=None):
        return f"{name}.renamed"


def test_a_backend_that_renames_is_refused(settings, tmp_path, folder):
    use_targets(
        settings,
        {
            "odd": {
                "BACKEND": f"{__name__}.RenamingStorage",
                "OPTIONS": {"location": str(tmp_path / "odd")},
            }
        },
    )

    with pytest.raises(TargetError, match=r"^odd: stored .* as .*\.renamed: the backend renames"):
        upload_snapshot("odd", folder, SNAPSHOT_ID)


@BOTH
def test_delete_copy_removes_every_file(targets, s3_server, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    remote_write(target, "stray.txt", b"not in any manifest")

    assert delete_copy(target, SNAPSHOT_ID) == len(files_in(folder)) + 1

    assert remote_files(target, s3_server) == set()
    assert f"{target}: missing: {MANIFEST_NAME}" in verify_copy(target, folder, SNAPSHOT_ID)


# --- download -----------------------------------------------------------------------------------


@BOTH
def test_download_restores_a_damaged_folder(targets, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    signature = (folder / SIGNATURE_NAME).read_bytes()
    (folder / WARC).write_bytes(flip_byte((folder / WARC).read_bytes()))
    (folder / "screenshot/screenshot.png").unlink()
    (folder / MANIFEST_NAME).unlink()
    (folder / SIGNATURE_NAME).unlink()

    download_snapshot(target, SNAPSHOT_ID, folder)

    assert verify_manifest(folder) == []
    assert (folder / SIGNATURE_NAME).read_bytes() == signature
    assert temporary_files(folder) == set()


@BOTH
def test_download_into_an_empty_folder_makes_the_same_folder(targets, folder, tmp_path, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    dest = tmp_path / "restored"

    download_snapshot(target, SNAPSHOT_ID, dest)

    assert files_in(dest) == files_in(folder)
    assert all(sha256_file(dest / name) == sha256_file(folder / name) for name in files_in(dest))


@BOTH
def test_download_refuses_a_tampered_file_and_keeps_the_local_one(targets, folder, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    remote_write(target, WARC, flip_byte(remote_read(target, WARC)))
    good = (folder / WARC).read_bytes()

    with pytest.raises(TargetError, match=f"^{target}: checksum mismatch: {WARC}$"):
        download_snapshot(target, SNAPSHOT_ID, folder)

    assert (folder / WARC).read_bytes() == good
    assert temporary_files(folder) == set()


@BOTH
def test_download_of_a_copy_without_its_signature_fails(targets, folder, tmp_path, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    get_target(target).delete(f"{SNAPSHOT_ID}/{SIGNATURE_NAME}")

    with pytest.raises(TargetError, match=f"incomplete .missing: {SIGNATURE_NAME}"):
        download_snapshot(target, SNAPSHOT_ID, tmp_path / "restored")
    assert not (tmp_path / "restored").exists()


@BOTH
def test_download_of_a_missing_file_fails(targets, folder, tmp_path, target):
    upload_snapshot(target, folder, SNAPSHOT_ID)
    get_target(target).delete(f"{SNAPSHOT_ID}/index.json")

    with pytest.raises(TargetError, match=f"^{target}: missing: index.json$"):
        download_snapshot(target, SNAPSHOT_ID, tmp_path / "restored")


@pytest.mark.parametrize("path", ["../escaped.txt", "a/../../escaped.txt", "/tmp/escaped.txt"])
@BOTH
def test_download_rejects_manifest_paths_outside_the_folder(targets, tmp_path, target, path):
    digest = "0" * 64
    remote_write(target, MANIFEST_NAME, f"{digest}  {path}\n".encode())
    remote_write(target, SIGNATURE_NAME, os.urandom(64))
    dest = tmp_path / "deep" / "restored"

    with pytest.raises(TargetError, match="unsafe path in manifest"):
        download_snapshot(target, SNAPSHOT_ID, dest)

    assert not (tmp_path / "deep" / "escaped.txt").exists()
    assert not Path("/tmp/escaped.txt").exists()


def test_download_does_not_follow_a_symbolic_link_out_of_the_folder(targets, folder, tmp_path):
    upload_snapshot("mirror", folder, SNAPSHOT_ID)
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "restored"
    dest.mkdir()
    (dest / "wget").symlink_to(outside)

    with pytest.raises(TargetError, match="leads outside"):
        download_snapshot("mirror", SNAPSHOT_ID, dest)

    assert list(outside.iterdir()) == []


# --- failures: temporary or permanent -----------------------------------------------------------


def test_a_stopped_server_is_unavailable_until_it_returns(settings, folder):
    server = MotoS3Server().start()
    try:
        use_targets(settings, {"s3": server.storage_entry(server.create_bucket())})
        server.stop()
        refused = rf"^s3: cannot connect to {server.endpoint_url} \(connection refused\)$"

        with pytest.raises(TargetUnavailable, match=refused):
            upload_snapshot("s3", folder, SNAPSHOT_ID)
        with pytest.raises(TargetUnavailable, match=refused):
            verify_copy("s3", folder, SNAPSHOT_ID)
        with pytest.raises(TargetUnavailable, match=refused):
            download_snapshot("s3", SNAPSHOT_ID, folder.parent / "restored")

        server.start()
        upload_snapshot("s3", folder, SNAPSHOT_ID)
        assert verify_copy("s3", folder, SNAPSHOT_ID) == []
    finally:
        server.stop()


def test_a_missing_bucket_is_a_target_error(settings, s3_server, folder, tmp_path):
    use_targets(settings, {"s3": s3_server.storage_entry("vellum-no-such-bucket")})

    with pytest.raises(TargetError, match=r"^s3: PutObject: NoSuchBucket .*no-such-bucket"):
        upload_snapshot("s3", folder, SNAPSHOT_ID)
    with pytest.raises(TargetError, match="NoSuchBucket"):
        verify_copy("s3", folder, SNAPSHOT_ID)
    with pytest.raises(TargetError, match="NoSuchBucket"):
        download_snapshot("s3", SNAPSHOT_ID, tmp_path / "restored")


@pytest.mark.parametrize(
    ("code", "kind", "reason"),
    [
        (errno.ENOSPC, TargetUnavailable, "no space left on device"),
        (errno.EIO, TargetUnavailable, "input/output error"),
        (errno.EACCES, TargetError, "permission denied"),
        (errno.EROFS, TargetError, "read-only file system"),
    ],
)
def test_mirror_disk_errors_are_classified(targets, folder, monkeypatch, code, kind, reason):
    def fail(self, name, content):
        raise OSError(code, os.strerror(code), self.path(name))

    monkeypatch.setattr(FileSystemStorage, "_save", fail)

    with pytest.raises(kind, match=rf"^mirror: {reason}: /.*/mirror/{SNAPSHOT_ID}/"):
        upload_snapshot("mirror", folder, SNAPSHOT_ID)


def client_error(status: int, code: str) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": "details"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "PutObject")


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (client_error(503, "SlowDown"), TargetUnavailable, "s3: PutObject: SlowDown (details)"),
        (client_error(500, "InternalError"), TargetUnavailable, "s3: PutObject: InternalError"),
        (client_error(400, "RequestTimeout"), TargetUnavailable, "s3: PutObject: RequestTimeout"),
        (client_error(429, "TooManyRequests"), TargetUnavailable, "s3: PutObject: TooMany"),
        (client_error(403, "AccessDenied"), TargetError, "s3: PutObject: AccessDenied (details)"),
        (client_error(403, "InvalidAccessKeyId"), TargetError, "s3: PutObject: InvalidAccess"),
        (
            ReadTimeoutError(endpoint_url="http://127.0.0.1:9000/bucket/key"),
            TargetUnavailable,
            "s3: no answer from http://127.0.0.1:9000 (read timeout)",
        ),
        (NoCredentialsError(), TargetError, "s3: Unable to locate credentials"),
    ],
)
def test_s3_errors_are_classified(error, kind, message):
    with pytest.raises(kind) as raised, target_errors("s3"):
        raise error

    assert str(raised.value).startswith(message)
    assert raised.value.__cause__ is error


def test_missing_files_are_left_to_the_caller():
    with pytest.raises(FileNotFoundError), target_errors("mirror"):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/mnt/x")


# --- targets ------------------------------------------------------------------------------------


def test_target_names_follow_the_settings_order(targets):
    assert target_names() == ["mirror", "s3", "s3-keep"]


@pytest.mark.parametrize("name", ["default", "staticfiles", "nowhere"])
def test_only_configured_targets_are_targets(targets, name):
    with pytest.raises(TargetError, match=f"^{name}: not a storage target"):
        get_target(name)


def test_a_backend_that_cannot_be_built_is_a_target_error(settings):
    use_targets(settings, {"bad": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"locaton": "/x"}}})

    with pytest.raises(TargetError, match=r"^bad: misconfigured backend: .*locaton"):
        get_target("bad")


def test_storages_follow_the_settings(settings, tmp_path):
    use_targets(settings, {"mirror": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": "/a"}}})
    assert get_target("mirror").location == "/a"

    use_targets(settings, {"mirror": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": "/b"}}})
    assert get_target("mirror").location == "/b"


def test_s3_targets_get_short_timeouts(targets):
    config = get_target("s3").client_config

    assert (config.connect_timeout, config.read_timeout) == (5, 60)
    assert config.retries == {"max_attempts": 2}


def test_an_s3_targets_own_client_config_wins(settings, s3_server):
    own = Config(connect_timeout=9, s3={"addressing_style": "path"})
    use_targets(settings, {"s3": s3_server.storage_entry("vellum-any", client_config=own)})

    config = get_target("s3").client_config

    assert (config.connect_timeout, config.read_timeout) == (9, 60)
    assert config.s3 == {"addressing_style": "path"}


# --- system checks ------------------------------------------------------------------------------


def check_ids(settings, entries: dict) -> list[str]:
    settings.STORAGE_TARGETS = entries
    return [error.id for error in check_storage_targets(None)]


def test_valid_targets_pass_the_checks(settings, tmp_path):
    entries = {
        "mirror": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": str(tmp_path / "mirror")}},
        "s3": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {"bucket_name": "v"}},
    }
    assert check_ids(settings, entries) == []


S3 = "storages.backends.s3.S3Storage"


@pytest.mark.parametrize(
    ("entry", "error_id"),
    [
        ("/mnt/mirror", "core.E101"),
        ({"OPTIONS": {"location": "/mnt/mirror"}}, "core.E101"),
        ({"BACKEND": FILE_SYSTEM, "OPTIONS": ["/mnt/mirror"]}, "core.E102"),
        ({"BACKEND": "storages.backends.nowhere.Storage"}, "core.E103"),
        ({"BACKEND": "pathlib.Path"}, "core.E103"),
        ({"BACKEND": FILE_SYSTEM, "OPTIONS": {"locaton": "/mnt/mirror"}}, "core.E104"),
        ({"BACKEND": S3, "OPTIONS": {"bucket": "vellum"}}, "core.E104"),
        ({"BACKEND": FILE_SYSTEM}, "core.E105"),
        ({"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": "mirror"}}, "core.E105"),
        ({"BACKEND": S3, "OPTIONS": {"endpoint_url": "http://127.0.0.1:9000"}}, "core.E107"),
        ({"BACKEND": S3, "OPTIONS": {"bucket_name": "v", "gzip": True}}, "core.E108"),
    ],
)
def test_bad_targets_are_reported(settings, entry, error_id):
    assert check_ids(settings, {"t": entry}) == [error_id]


@pytest.mark.parametrize("inside", ["", "mirror", "x/../mirror"])
def test_a_mirror_inside_the_archive_is_reported(settings, inside):
    location = str(Path(django_settings.ARCHIVE_DIR) / inside)  # "" is the archive itself
    settings.STORAGE_TARGETS = {"m": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": location}}}

    errors = check_storage_targets(None)

    assert [error.id for error in errors] == ["core.E106"]
    assert "STORAGE_TARGETS['m']: location" in errors[0].msg
    assert "inside the archive" in errors[0].msg


def test_a_mirror_beside_the_archive_passes(settings):
    location = str(Path(django_settings.DATA_DIR) / "mirror")
    assert (
        check_ids(settings, {"m": {"BACKEND": FILE_SYSTEM, "OPTIONS": {"location": location}}})
        == []
    )
