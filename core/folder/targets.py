"""Storage targets (settings.STORAGE_TARGETS): building them, naming a snapshot's copy on them,
and classifying their failures. Copying to and from them is core/folder/transfers.py.

A target is a Django storage alias (django.core.files.storage.storages). A snapshot's copy lives
at ``<snapshot id>/<relative path>`` on it.

Failures are classified for the caller's retries: ``TargetUnavailable`` is temporary (connection
refused, timeouts, HTTP 5xx and throttling, a full or unreachable disk) and worth retrying with
backoff; ``TargetError`` is permanent (access denied, no such bucket, a misconfigured backend, a
copy that does not match its manifest). Errors reading or writing the local folder are neither:
they propagate unchanged.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

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
from django.core.files.storage import Storage, storages

# Applied to every S3 target's botocore client unless its OPTIONS' client_config sets them:
# botocore's defaults (60 s to connect, retried) would hold an actor for minutes on a target that
# is down, and the copy is retried with backoff anyway.
S3_CLIENT_DEFAULTS = {"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 2}}

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
    if is_s3(storage):
        from botocore.config import Config  # see is_s3

        # Config.merge lets the target's own values win; merging again changes nothing. A client
        # made before this (by code using storages[name] directly) keeps botocore's defaults.
        storage.client_config = Config(**S3_CLIENT_DEFAULTS).merge(storage.client_config)
    return storage


def is_s3(storage: Storage) -> bool:
    """Whether ``storage`` is django-storages' S3Storage.

    Its module, and boto3 under it, is imported only when an S3 target's storage is built
    (``storages[name]``), so a storage made before that is never one. Every process that imports
    this module (the admin and the pipeline do) is spared a tenth of a second and megabytes for
    a kind of target few installations use.
    """
    s3 = sys.modules.get("storages.backends.s3")
    return s3 is not None and isinstance(storage, s3.S3Storage)


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
