"""Copies of sealed snapshot folders on storage targets (settings.STORAGE_TARGETS), and checks
of those copies.

A target is a Django storage alias (django.core.files.storage.storages). A snapshot's copy lives
at ``<snapshot id>/<relative path>`` on it: the payload files, then ``manifest-sha256.txt``, then
``manifest-sha256.txt.sig``. The signature goes last, so a copy holding a manifest and a
signature is complete; a new upload removes both first, so an interrupted one never looks
complete. The manifest, not a listing, says which files a copy holds: ``Storage.listdir`` is one
directory at a time, and a bucket's listing is only eventually consistent on some services.

Failures are classified for the caller's retries: ``TargetUnavailable`` is temporary (connection
refused, timeouts, HTTP 5xx and throttling, a full or unreachable disk) and worth retrying with
backoff; ``TargetError`` is permanent (access denied, no such bucket, a misconfigured backend, a
copy that does not match its manifest). Errors reading or writing the local folder are neither:
they propagate unchanged.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TypeVar
from urllib.parse import urlsplit

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    CapacityNotAvailableError,
    ChecksumError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    IncompleteReadError,
    ReadTimeoutError,
    SSLError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.files import File
from django.core.files.storage import Storage, storages
from s3transfer.constants import ALLOWED_DOWNLOAD_ARGS
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

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

# Applied to every S3 target's botocore client unless its OPTIONS' client_config sets them:
# botocore's defaults (60 s to connect, retried) would hold an actor for minutes on a target that
# is down, and the copy is retried with backoff anyway.
S3_CLIENT_DEFAULTS = Config(connect_timeout=5, read_timeout=60, retries={"max_attempts": 2})

# Files sent or read back at once: a copy is many small files, and each request to S3 waits on
# the network far longer than on this machine (boto3 clients are thread-safe).
TRANSFER_THREADS = 8

# Local-disk errors worth retrying: a full disk or quota, an unmounted or unreachable network
# file system, an overloaded host. Anything else (EACCES, EROFS, ENAMETOOLONG...) needs a person.
TEMPORARY_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "ENOSPC", "EDQUOT", "EIO", "EAGAIN", "EBUSY", "EINTR", "ENOMEM", "ENFILE", "EMFILE",
        "ETIMEDOUT", "ESTALE", "ENOTCONN", "ECONNREFUSED", "ECONNRESET", "ECONNABORTED",
        "EHOSTDOWN", "EHOSTUNREACH", "ENETDOWN", "ENETUNREACH", "ENOLCK",
    )
    if hasattr(errno, name)
)  # fmt: skip

# S3 error codes that are temporary although their HTTP status is below 500.
TEMPORARY_S3_CODES = frozenset(
    {"RequestTimeout", "SlowDown", "Throttling", "ThrottlingException", "TooManyRequests",
     "RequestLimitExceeded", "ServiceUnavailable", "InternalError"}
)  # fmt: skip


class TargetUnavailable(Exception):
    """A storage target failed in a way worth retrying later (it is down, slow, full)."""


class TargetError(Exception):
    """A storage target failed in a way retrying will not fix (denied, missing, misconfigured),
    or holds a copy that does not match its manifest."""


# --- targets ------------------------------------------------------------------------------------


def target_names() -> list[str]:
    """Return the names of the configured storage targets, in settings.STORAGE_TARGETS order."""
    return list(settings.STORAGE_TARGETS)


def get_target(name: str) -> Storage:
    """Return the storage of target ``name`` (Django's cached ``storages[name]``).

    S3 targets get ``S3_CLIENT_DEFAULTS`` under their own ``client_config``, before their first
    connection, so that a target that is down fails within seconds. Raise TargetError when
    ``name`` is not a storage target or its backend cannot be created.
    """
    if name not in settings.STORAGE_TARGETS:
        known = ", ".join(target_names()) or "none configured"
        raise TargetError(f"{name}: not a storage target (STORAGE_TARGETS: {known})")
    try:
        storage = storages[name]
    except Exception as error:  # import errors, bad OPTIONS: any of them is the configuration's
        raise TargetError(f"{name}: misconfigured backend: {error}") from error
    if isinstance(storage, S3Storage):
        # Config.merge lets the target's own values win; merging again changes nothing. A client
        # made before this (by code using storages[name] directly) keeps botocore's defaults.
        storage.client_config = S3_CLIENT_DEFAULTS.merge(storage.client_config)
    return storage


# --- classifying failures -----------------------------------------------------------------------


@contextmanager
def target_errors(target: str) -> Iterator[None]:
    """Turn what the storage of ``target`` raises inside the block into TargetUnavailable or
    TargetError (one readable line naming the target); FileNotFoundError is left to the caller,
    which knows whether a missing file is a problem."""
    try:
        yield
    except (TargetUnavailable, TargetError, FileNotFoundError):
        raise
    except ClientError as error:
        raise client_error(target, error) from error
    # Before OSError: botocore's timeout errors are also requests' (and so OSError) subclasses.
    except BotoCoreError as error:
        raise botocore_error(target, error) from error
    except OSError as error:
        raise os_error(target, error) from error
    except ImproperlyConfigured as error:
        raise TargetError(f"{target}: misconfigured backend: {error}") from error


def client_error(target: str, error: ClientError) -> TargetUnavailable | TargetError:
    """Classify an S3 error response: HTTP 5xx, 429 and throttling codes are temporary."""
    details = error.response.get("Error", {})
    code = details.get("Code") or "?"
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    message = details.get("Message") or ""
    bucket = details.get("BucketName")
    text = f"{target}: {error.operation_name}: {code}" + (f" ({message})" if message else "")
    text += f" [bucket {bucket}]" if bucket else ""
    if status >= 500 or status == 429 or code in TEMPORARY_S3_CODES:
        return TargetUnavailable(text)
    return TargetError(text)


def botocore_error(target: str, error: BotoCoreError) -> TargetUnavailable | TargetError:
    """Classify a botocore error: connection failures, timeouts and broken transfers are
    temporary; TLS failures, missing credentials and bad parameters are not."""
    endpoint = _endpoint(getattr(error, "kwargs", {}).get("endpoint_url"))
    if isinstance(error, SSLError):
        return TargetError(f"{target}: TLS failure talking to {endpoint}: {error}")
    if isinstance(error, ConnectTimeoutError):
        return TargetUnavailable(f"{target}: cannot connect to {endpoint} (connect timeout)")
    if isinstance(error, EndpointConnectionError):
        reason = _root_reason(error.kwargs.get("error")) or "connection failed"
        return TargetUnavailable(f"{target}: cannot connect to {endpoint} ({reason})")
    if isinstance(error, ReadTimeoutError):
        return TargetUnavailable(f"{target}: no answer from {endpoint} (read timeout)")
    temporary = (
        BotoConnectionError,
        HTTPClientError,
        IncompleteReadError,
        ChecksumError,
        CapacityNotAvailableError,
    )
    if isinstance(error, temporary):
        return TargetUnavailable(f"{target}: transfer failed: {error}")
    return TargetError(f"{target}: {error}")


def os_error(target: str, error: OSError) -> TargetUnavailable | TargetError:
    """Classify an OSError of a file-system target: only ``TEMPORARY_ERRNOS`` are temporary."""
    reason = (error.strerror or str(error)).lower()
    text = f"{target}: {reason}" + (f": {error.filename}" if error.filename else "")
    if error.errno in TEMPORARY_ERRNOS:
        return TargetUnavailable(text)
    return TargetError(text)


def _endpoint(url: str | None) -> str:
    """Return ``scheme://host:port`` of a request URL (its path names a key, not the target)."""
    if not url:
        return "the endpoint"
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def _root_reason(error: BaseException | None) -> str | None:
    """Return the lowercase strerror of the first OSError with an errno in ``error``'s chain
    ("connection refused"), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno is not None:
            return os.strerror(error.errno).lower()
        error = error.__cause__ or error.__context__
    return None


# --- names --------------------------------------------------------------------------------------


def snapshot_prefix(snapshot_id: str) -> str:
    """Return the folder of ``snapshot_id``'s copy on a target; raise ValueError unless the id is
    one plain path segment."""
    text = str(snapshot_id)
    if text in ("", ".", "..") or "/" in text or "\\" in text or "\0" in text:
        raise ValueError(f"not a usable snapshot id for a storage path: {snapshot_id!r}")
    return text


def check_relative(relative: str) -> str:
    """Return ``relative`` if it is a safe manifest path (``/``-separated, without empty, ``.``
    or ``..`` segments, so not absolute either, and without NUL); raise ValueError otherwise."""
    parts = relative.split("/")
    if "\0" in relative or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"unsafe path in manifest: {relative!r}")
    return relative


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
    if not isinstance(storage, S3Storage):
        return storage.open(name, "rb")
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
