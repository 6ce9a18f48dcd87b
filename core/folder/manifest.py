"""Files that make a snapshot folder self-describing: ``index.json`` and its checksum manifest.

Both are written atomically (temporary file in the same folder, fsync, rename), so a crash leaves
either the old file or the new one, never half of one. The manifest follows the BagIt payload
manifest line format (RFC 8493 §2.1.3): ``<sha256 hex>  <path>`` per file, paths relative to the
folder with ``/`` separators, and CR, LF and % percent-encoded.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from archive.privacy import FILE_MODE

logger = logging.getLogger(__name__)

INDEX_NAME = "index.json"
MANIFEST_NAME = "manifest-sha256.txt"
MISMATCH = "checksum mismatch: "  # how verify_manifest begins a changed file's problem
SIGNATURE_NAME = MANIFEST_NAME + ".sig"  # detached Ed25519 signature of the manifest's bytes
TAG_FILES = (MANIFEST_NAME, SIGNATURE_NAME)  # describe the payload, so never part of it
TEMP_PREFIX = ".tmp-"  # extractors' working folders and half-written files start with this
HASH_CHUNK = 1024 * 1024


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new, never a mix.

    The file is FILE_MODE (0600, archive/privacy.py): for Vellum's own user only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, FILE_MODE)  # as any file Vellum writes: its own user's only
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    """Return the SHA-256 hex digest of the file at ``path``, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def payload_files(folder: Path) -> list[Path]:
    """Return every regular file under ``folder`` but the manifest, its signature and temporary
    files, sorted.

    Symbolic links are not followed: a link could point outside the snapshot folder.
    """
    files = [
        path
        for path in _regular_files(folder)
        if not (path.parent == folder and path.name in TAG_FILES)
    ]
    return sorted(files)


def _regular_files(folder: Path) -> Iterator[Path]:
    """Every regular file under ``folder`` but temporary ones (``file_entries``)."""
    return (Path(entry.path) for entry in file_entries(folder))


def file_entries(folder: Path | str, *, temporary: bool = False) -> Iterator[os.DirEntry]:
    """The directory entry of every regular file under ``folder``, not following links, and
    not of temporary files (TEMP_PREFIX) unless ``temporary``. A folder that cannot be listed
    is logged and passed over, as os.walk does. Its entries' types come with the listing
    (``os.scandir``): no file is stat-ed for them (``entry.stat()`` does, once)."""
    try:
        entries = list(os.scandir(folder))
    except OSError as error:
        logger.warning("cannot list %s: %s", folder, error)
        return
    for entry in entries:
        if entry.name.startswith(TEMP_PREFIX) and not temporary:
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from file_entries(entry.path, temporary=temporary)
        elif entry.is_file(follow_symlinks=False):
            yield entry


def manifest_path_encode(relative: str) -> str:
    """Percent-encode %, CR and LF in a manifest path (RFC 8493 §2.1.3)."""
    return relative.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def write_manifest(folder: Path) -> str:
    """Write ``folder/manifest-sha256.txt`` over every payload file; return its SHA-256."""
    lines = []
    for path in payload_files(folder):
        relative = manifest_path_encode(path.relative_to(folder).as_posix())
        lines.append(f"{sha256_file(path)}  {relative}\n")
    data = "".join(lines).encode()
    atomic_write(folder / MANIFEST_NAME, data)
    return hashlib.sha256(data).hexdigest()


def read_manifest(folder: Path) -> dict[str, str]:
    """Return ``{relative path: sha256}`` from ``folder``'s manifest (paths decoded)."""
    return parse_manifest((folder / MANIFEST_NAME).read_text(encoding="utf-8"))


def parse_manifest(text: str) -> dict[str, str]:
    """Return ``{relative path: sha256}`` from a manifest's text (paths decoded)."""
    entries = {}
    # Only LF ends a line (RFC 8493 §2.1.3); str.splitlines() would also split at \x1c, U+2028...
    for line in text.split("\n"):
        if not line:
            continue
        digest, _, encoded = line.partition("  ")
        path = encoded.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")
        entries[path] = digest
    return entries


def verify_manifest(folder: Path) -> list[str]:
    """Return the problems found checking ``folder`` against its manifest ([] when it matches)."""
    problems = []
    listed = read_manifest(folder)
    present = {p.relative_to(folder).as_posix(): p for p in payload_files(folder)}
    for relative, digest in listed.items():
        path = present.get(relative)
        if path is None:
            problems.append(f"missing: {relative}")
        elif sha256_file(path) != digest:
            problems.append(f"{MISMATCH}{relative}")
    problems += [f"not in manifest: {relative}" for relative in present.keys() - listed.keys()]
    return problems
