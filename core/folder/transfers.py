"""Copies of sealed snapshot folders on storage targets: uploading a folder, checking a copy
against its manifest, downloading a copy back into a folder, deleting a copy.

A copy holds the payload files, then ``manifest-sha256.txt``, then ``manifest-sha256.txt.sig``.
The signature goes last, so a copy holding a manifest and a signature is complete; a new upload
removes both first, so an interrupted one never looks complete. The manifest, not a listing, says
which files a copy holds: ``Storage.listdir`` is one directory at a time, and a bucket's listing
is only eventually consistent on some services.

Target failures raise core/folder/targets.py's ``TargetUnavailable`` (temporary) or
``TargetError`` (permanent); errors reading or writing the local folder propagate unchanged.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import BinaryIO, TypeVar

from botocore.exceptions import ClientError
from django.core.files import File
from django.core.files.storage import Storage

from archive.privacy import FILE_MODE
from core.folder.manifest import (
    HASH_CHUNK,
    MANIFEST_NAME,
    SIGNATURE_NAME,
    TEMP_PREFIX,
    atomic_write,
    parse_manifest,
    read_manifest,
)
from core.folder.targets import (
    TargetError,
    check_relative,
    get_target,
    is_s3,
    snapshot_prefix,
    target_errors,
)

# Files sent or read back at once: a copy is many small files, and each request to S3 waits on
# the network far longer than on this machine (boto3 clients are thread-safe).
TRANSFER_THREADS = 8


def _safe_listing(target: str, manifest: bytes) -> dict[str, str]:
    """Return ``{relative path: sha256}`` from a remote manifest's bytes; raise TargetError when
    it is not UTF-8 or names a path that could escape the snapshot folder."""
    try:
        listed = parse_manifest(manifest.decode("utf-8"))
        for relative in listed:
            check_relative(relative)
    except (UnicodeDecodeError, ValueError) as error:
        raise TargetError(f"{target}: bad remote manifest: {error}") from error
    return listed


# --- reading and writing remote files -----------------------------------------------------------


def _open_remote(storage: Storage, name: str) -> BinaryIO:
    """Open ``name`` on ``storage`` as a stream of bytes; raise FileNotFoundError when it is
    absent.

    S3Storage.open() would download the whole object (into memory, by default) before the first
    read, and its HEAD request answers a missing bucket with the same 404 as a missing key; a
    plain GET streams, and says NoSuchBucket.
    """
    if not is_s3(storage):
        return storage.open(name, "rb")
    from s3transfer.constants import ALLOWED_DOWNLOAD_ARGS  # see targets.is_s3
    from storages.utils import clean_name

    # The storage's own name-to-key rule (its location prefix, path checks), as S3File uses it.
    key = storage._normalize_name(clean_name(name))
    # SSE-C keys and the like, which a GET must repeat (S3File passes the same).
    params = {
        option: value
        for option, value in storage.get_object_parameters(key).items()
        if option in ALLOWED_DOWNLOAD_ARGS
    }
    try:
        return storage.bucket.Object(key).get(**params)["Body"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            raise FileNotFoundError(f"no such file: {name}") from error
        raise


def _read_remote(target: str, storage: Storage, name: str) -> bytes | None:
    """Return the whole of the small remote file ``name`` (a manifest, a signature), or None
    when it is absent."""
    with target_errors(target):
        try:
            handle = _open_remote(storage, name)
        except FileNotFoundError:
            return None
        with handle:
            return handle.read()


def _remote_chunks(target: str, storage: Storage, name: str) -> Iterator[bytes]:
    """Yield the remote file ``name`` in chunks of up to HASH_CHUNK bytes; raise
    FileNotFoundError (before the first chunk) when it is absent."""
    with target_errors(target):
        handle = _open_remote(storage, name)
    with handle:
        while True:
            with target_errors(target):
                chunk = handle.read(HASH_CHUNK)
            if not chunk:
                return
            yield chunk


def _put(target: str, storage: Storage, local: Path, name: str) -> int:
    """Copy the local file ``local`` to ``name`` on ``storage``, replacing what is there; return
    its size in bytes.

    Deleting first makes every backend overwrite, whatever its options (FileSystemStorage without
    allow_overwrite, S3Storage with file_overwrite off would store ``name_AbC123`` instead). A
    backend that still picks another name is refused.
    """
    with open(local, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        with target_errors(target):
            storage.delete(name)
            saved = storage.save(name, File(handle, name=name))
    if saved != name:
        raise TargetError(
            f"{target}: stored {name} as {saved}: the backend renames instead of overwriting"
        )
    return size


# --- the operations -----------------------------------------------------------------------------


def upload_snapshot(target: str, folder: Path, snapshot_id: str) -> tuple[int, int]:
    """Copy the sealed snapshot folder ``folder`` to ``<snapshot_id>/`` on ``target``, replacing
    the files already there; return (files, bytes) copied, the manifest and signature included.

    Copy the files the manifest lists, then the manifest, then the signature. Files of an older
    copy that the manifest no longer lists are left in place: a re-archived snapshot keeps its
    earlier runs under history/, so a folder only grows. Raise FileNotFoundError when the folder
    lacks its manifest, its signature or a listed file; TargetUnavailable or TargetError when the
    target fails.
    """
    storage = get_target(target)
    prefix = snapshot_prefix(snapshot_id)
    listed = [check_relative(relative) for relative in read_manifest(folder)]
    if not (folder / SIGNATURE_NAME).is_file():
        raise FileNotFoundError(f"{folder / SIGNATURE_NAME} is missing: the snapshot is not sealed")
    with target_errors(target):
        for name in (SIGNATURE_NAME, MANIFEST_NAME):  # the copy stops looking complete first
            storage.delete(f"{prefix}/{name}")

    def put(relative: str) -> int:
        return _put(target, storage, folder / relative, f"{prefix}/{relative}")

    total = sum(_on_transfer_threads(put, listed))
    total += sum(put(name) for name in (MANIFEST_NAME, SIGNATURE_NAME))  # last, in this order
    return len(listed) + 2, total


Item = TypeVar("Item")
Result = TypeVar("Result")


@functools.cache
def _transfers() -> ThreadPoolExecutor:
    """Return this process's transfer threads, started on first use and kept: django-storages'
    S3 backend keeps one connection per thread, which new threads would have to open again."""
    return ThreadPoolExecutor(TRANSFER_THREADS, thread_name_prefix="vellum-copy")


def _on_transfer_threads(function: Callable[[Item], Result], items: Iterable[Item]) -> list[Result]:
    """Return ``function`` applied to every item, in order, run on the transfer threads.

    On the first failure, cancel the calls not started, wait for the running ones, then raise
    that failure: a failed upload must not leave threads writing to the target after it returns,
    where they would race with the retry that follows.
    """
    futures = [_transfers().submit(function, item) for item in items]
    done, _ = wait(futures, return_when=FIRST_EXCEPTION)
    failed = next((future for future in futures if future in done and future.exception()), None)
    if failed is not None:
        for future in futures:
            future.cancel()
        wait(futures)
        failed.result()  # raises the failure with its traceback
    return [future.result() for future in futures]


def verify_copy(target: str, folder: Path, snapshot_id: str) -> list[str]:
    """Return the problems of ``snapshot_id``'s copy on ``target`` ([] when it is sound), each
    one line starting with the target's name.

    The remote manifest and signature must equal the local ones (when ``folder`` has them; with
    no local manifest, the remote one alone says what the copy holds), and every listed file must
    be there with the listed SHA-256 (hashed as it streams). Raise TargetUnavailable when the
    target cannot be reached, TargetError when it refuses.
    """
    storage = get_target(target)
    prefix = snapshot_prefix(snapshot_id)
    problems = _tag_file_problems(target, storage, folder, prefix)
    local = folder / MANIFEST_NAME
    if local.is_file():
        listed = parse_manifest(local.read_text(encoding="utf-8"))
    elif (remote := _read_remote(target, storage, f"{prefix}/{MANIFEST_NAME}")) is not None:
        try:
            listed = _safe_listing(target, remote)
        except TargetError as error:
            return [*problems, str(error)]
    else:
        return problems  # nothing says what the copy should hold

    def check(item: tuple[str, str]) -> str | None:
        relative, digest = item
        problem = _file_problem(target, storage, f"{prefix}/{relative}", digest)
        return f"{target}: {problem}: {relative}" if problem else None

    problems += [problem for problem in _on_transfer_threads(check, listed.items()) if problem]
    return problems


def _tag_file_problems(target: str, storage: Storage, folder: Path, prefix: str) -> list[str]:
    """Return what is wrong with the remote manifest and signature against the local ones."""
    problems = []
    for name, label in ((MANIFEST_NAME, "manifest"), (SIGNATURE_NAME, "signature")):
        remote = _read_remote(target, storage, f"{prefix}/{name}")
        local = folder / name
        if remote is None:
            problems.append(f"{target}: missing: {name}")
        elif local.is_file() and local.read_bytes() != remote:
            problems.append(f"{target}: {label} differs from the local one")
    return problems


def _file_problem(target: str, storage: Storage, name: str, digest: str) -> str | None:
    """Return "missing" or "checksum mismatch" for the remote file ``name``, or None."""
    sha256 = hashlib.sha256()
    try:
        for chunk in _remote_chunks(target, storage, name):
            sha256.update(chunk)
    except FileNotFoundError:
        return "missing"
    return None if sha256.hexdigest() == digest else "checksum mismatch"


def download_snapshot(target: str, snapshot_id: str, dest: Path) -> None:
    """Fetch ``snapshot_id``'s copy on ``target`` into the folder ``dest``: every file the remote
    manifest lists, then the manifest, then the signature.

    Each file is hashed as it streams into a temporary file beside its place and replaces the
    local one only when its SHA-256 matches the remote manifest. Local files the manifest does
    not list are left alone. The signature is not checked here (core.folder.signing does that).
    Raise TargetError when the copy is incomplete, a file is missing or does not match, or the
    manifest names a path outside ``dest`` (absolute, ``..``, through a symbolic link);
    TargetUnavailable when the target cannot be reached.
    """
    storage = get_target(target)
    prefix = snapshot_prefix(snapshot_id)
    manifest = _read_remote(target, storage, f"{prefix}/{MANIFEST_NAME}")
    signature = _read_remote(target, storage, f"{prefix}/{SIGNATURE_NAME}")
    if manifest is None or signature is None:
        missing = MANIFEST_NAME if manifest is None else SIGNATURE_NAME
        raise TargetError(f"{target}: copy of {snapshot_id} is incomplete (missing: {missing})")
    dest.mkdir(parents=True, exist_ok=True)
    for relative, digest in _safe_listing(target, manifest).items():
        _fetch(target, storage, prefix, relative, _local_path(target, dest, relative), digest)
    atomic_write(dest / MANIFEST_NAME, manifest)
    atomic_write(dest / SIGNATURE_NAME, signature)


def _local_path(target: str, dest: Path, relative: str) -> Path:
    """Return ``dest/relative`` after creating its parent folders one by one; raise TargetError
    when one of them is a symbolic link (it could lead outside ``dest``). The file itself may
    be a link: the download renames over it rather than writing through it."""
    parent = dest
    for part in relative.split("/")[:-1]:
        parent = parent / part
        if parent.is_symlink():
            raise TargetError(f"{target}: manifest path leads outside {dest}: {relative}")
        parent.mkdir(exist_ok=True)
    return dest / relative


def _fetch(
    target: str, storage: Storage, prefix: str, relative: str, path: Path, digest: str
) -> None:
    """Stream the remote file ``prefix/relative`` into a temporary file beside ``path`` and
    rename it over ``path`` once its SHA-256 equals ``digest``; raise TargetError when it is
    missing or differs (the temporary file is removed, ``path`` left as it was)."""
    sha256 = hashlib.sha256()
    fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            try:
                for chunk in _remote_chunks(target, storage, f"{prefix}/{relative}"):
                    sha256.update(chunk)
                    handle.write(chunk)
            except FileNotFoundError as error:
                raise TargetError(f"{target}: missing: {relative}") from error
            handle.flush()
            os.fsync(handle.fileno())
        if sha256.hexdigest() != digest:
            raise TargetError(f"{target}: checksum mismatch: {relative}")
        os.chmod(temp, FILE_MODE)  # as any file Vellum writes: its own user's only
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def delete_copy(target: str, snapshot_id: str) -> int:
    """Delete ``snapshot_id``'s copy from ``target``: the signature and manifest first, so that a
    half-deleted copy never looks complete, then every other file under its folder (found by
    listing, so files no manifest lists go too), then its empty folders; return the number of
    files deleted."""
    storage = get_target(target)
    prefix = snapshot_prefix(snapshot_id)
    with target_errors(target):
        files, folders = _walk(storage, prefix)
        tags = [f"{prefix}/{name}" for name in (SIGNATURE_NAME, MANIFEST_NAME)]
        for name in [*(t for t in tags if t in files), *(f for f in files if f not in tags)]:
            storage.delete(name)
        for name in reversed(folders):  # deepest first; S3 has no folders, deleting one is a no-op
            storage.delete(name)
    return len(files)


def _walk(storage: Storage, folder: str) -> tuple[list[str], list[str]]:
    """Return (files, folders) under ``folder`` on ``storage``, parents before children."""
    try:
        subfolders, names = storage.listdir(folder)
    except FileNotFoundError:
        return [], []
    files, folders = [f"{folder}/{name}" for name in names], [folder]
    for sub in subfolders:
        sub_files, sub_folders = _walk(storage, f"{folder}/{sub}")
        files += sub_files
        folders += sub_folders
    return files, folders
