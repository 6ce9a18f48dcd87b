"""Identical files of snapshot folders stored once: hard links into a content-addressed store.

``DATA_DIR/blobs/sha256/<2 hex>/<64 hex>`` is one name of a file whose SHA-256 is its name;
every snapshot file with that content is another name (a hard link) of the same file, so the
bytes are on disk once while each snapshot folder still holds every file it lists: it verifies
alone with ``sha256sum -c``, is copied, exported and restored as before. How many links a blob
has is how many files use it; one left (the store's own) means no snapshot uses it any more
(``release_unused``).

Shared files are made read-only (0400): a tool that opened one to write would change it in every
snapshot at once. Vellum never writes an archived file in place: extractors write into working
folders that are renamed into place, and every file it rewrites (index.json, the manifest, the
WACZ, a WARC made whole again) is replaced by a rename, which gives that name a file of its own.

A blob is only linked to once its content is checked against its name, so a blob damaged on disk
is replaced by the good file at hand rather than spread to another snapshot. Where a link cannot
be made (another file system, a file system without hard links, too many links), the file stays
a copy of its own.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from archive.privacy import DIR_MODE
from core.folder.manifest import INDEX_NAME, TEMP_PREFIX, sha256_file

logger = logging.getLogger(__name__)

BLOBS_DIR = "blobs"
ALGORITHM = "sha256"
READ_ONLY = 0o400
# Files that are never the same in two snapshots, and that Vellum replaces later by a rename
# (finalizing writes index.json and the WACZ again; a WARC is made whole again): linking them
# would only leave blobs behind.
NOT_SHARED_NAMES = (INDEX_NAME, "snapshot.wacz")
NOT_SHARED_SUFFIXES = (".warc.gz", ".warc")


@dataclass
class Shared:
    """What ``share_files`` did: files now linked to a blob that another file shares
    (``linked``, and their ``bytes``), files that became a new blob (``published``), and files
    left a copy of their own (``unlinked``: the reason, one line each)."""

    linked: int = 0
    bytes: int = 0
    published: int = 0
    unlinked: list[str] = field(default_factory=list)


def blobs_dir() -> Path:
    """Return ``DATA_DIR/blobs/sha256`` (read at each call, so tests may move DATA_DIR)."""
    return Path(settings.DATA_DIR) / BLOBS_DIR / ALGORITHM


def blob_path(digest: str) -> Path:
    """Return where the blob of SHA-256 ``digest`` (64 hex digits) lies."""
    return blobs_dir() / digest[:2] / digest


def shareable(relative: str) -> bool:
    """True for a file (path relative to its snapshot folder) that may share a blob."""
    name = relative.rsplit("/", 1)[-1]
    return name not in NOT_SHARED_NAMES and not name.endswith(NOT_SHARED_SUFFIXES)


def share_files(folder: Path, digests: dict[str, str]) -> Shared:
    """Make each file of ``folder`` listed in ``digests`` (``{relative path: sha256}``, as the
    manifest says) a hard link to its blob, publishing it as the blob when there is none.

    Empty files, and the ones ``shareable`` refuses, are left alone. The caller has just
    checked each file against its digest (the manifest was written from them). Raises nothing
    for a file that cannot be linked (it is counted in ``unlinked``); OSError only when the
    store itself cannot be made.
    """
    done = Shared()
    for relative, digest in digests.items():
        if not shareable(relative):
            continue
        path = folder / relative
        try:
            outcome = _share(path, digest)
        except OSError as error:
            done.unlinked.append(f"{relative}: {error.strerror or error}")
            continue
        if outcome == "linked":
            done.linked += 1
            done.bytes += path.stat().st_size
        elif outcome == "published":
            done.published += 1
    if done.unlinked:
        logger.info("%s: %d files not shared: %s", folder, len(done.unlinked), done.unlinked[:3])
    return done


def _share(path: Path, digest: str) -> str:
    """Link ``path`` to its blob; return "linked", "published", "already" or "empty"."""
    status = path.lstat()
    if not stat.S_ISREG(status.st_mode) or status.st_size == 0:
        return "empty"
    blob = blob_path(digest)
    try:
        known = blob.stat()
    except FileNotFoundError:
        return _publish(path, blob)
    if (known.st_dev, known.st_ino) == (status.st_dev, status.st_ino):
        return "already"
    if known.st_size != status.st_size or sha256_file(blob) != digest:
        logger.warning("blob %s is damaged: replaced by %s", blob, path)
        _link_over(path, blob)
        os.chmod(blob, READ_ONLY)
        return "published"
    _link_over(blob, path)
    return "linked"


def _publish(path: Path, blob: Path) -> str:
    """Make ``path`` the blob (its first name in the store)."""
    blob.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        os.link(path, blob)
    except FileExistsError:  # another snapshot published it meanwhile: share that one
        return _share(path, blob.name)
    os.chmod(blob, READ_ONLY)
    return "published"


def _link_over(source: Path, target: Path) -> None:
    """Make ``target`` another name of ``source``, atomically (a link beside it, renamed)."""
    temp = target.with_name(f"{TEMP_PREFIX}link-{secrets.token_hex(8)}")
    os.link(source, temp)
    try:
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def release_unused(digests: Iterable[str]) -> int:
    """Remove the blobs among ``digests`` that no snapshot file links to any more (one link
    left: the store's own); return how many were removed."""
    removed = 0
    for digest in set(digests):
        blob = blob_path(digest)
        try:
            if blob.stat().st_nlink == 1:
                blob.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def collect_unused() -> int:
    """Walk the whole store and remove every blob no snapshot file links to; return how many."""
    root = blobs_dir()
    if not root.is_dir():
        return 0
    return release_unused(path.name for path in root.glob("??/*") if path.name[0] != ".")
