"""Check that succeeded archive results left sound files, before their snapshot is sealed.

Finalizing's first step (DESIGN.md §2, Snapshot: "check integrity (outputs exist, are non-empty,
WARCs parse)"). A problem is one short line naming the file, such as
``missing: screenshot/screenshot.png`` or
``wget/warc/archive.warc.gz: WARC record 3 (response http://…) payload digest mismatch``; the
caller sends a result with problems back to backoff. Nothing here raises on a corrupt file: what a
parser says about it becomes a problem.

What is checked, per file listed in ``output_files`` (relative to the snapshot folder):

- It is a regular file inside the snapshot folder: no absolute path, no ``..``, no symbolic link
  (nor a linked folder leading out of the snapshot folder), no folder or device.
- The main output (``output``, relative to the extractor's folder) is a file that is not empty,
  unless the extractor declares its ``main_output`` no file: the title extractor's is the title
  itself, and git's is the mirror's folder, which must be a folder.
- Files whose layout Vellum controls, the ``outputs`` each registered extractor declares
  (core/extractors/base.py), are checked by format (core/folder/formats.py) and must not be
  empty. Every other file may be empty (a log, a file in a git mirror, a requisite wget saved)
  and is checked for existence only: pages wget or yt-dlp saved, and favicons, are the site's own
  bytes, and a site that serves a broken image is no fault of the archive.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Protocol

from core.extractors import registry
from core.extractors.base import FileCheck, Format, MainOutput
from core.folder.formats import FORMAT_CHECKS

# A declared output: (pattern relative to the snapshot folder, its format or check).
Declared = tuple[str, Format | FileCheck]


class RecordedOutputs(Protocol):
    """What is read of an ArchiveResult: its extractor's name and the files it recorded."""

    extractor: str
    output: str
    output_files: list[str]


def check_snapshot(folder: Path, results: Iterable[RecordedOutputs]) -> dict[str, list[str]]:
    """Check the outputs of succeeded ``results`` in the snapshot folder ``folder``.

    Return ``{extractor: problems}`` for the results with problems only (``{}`` when all are
    sound); see ``check_outputs``. The caller passes succeeded results only.
    """
    found: dict[str, list[str]] = {}
    for result in results:
        problems = check_outputs(
            folder,
            extractor=result.extractor,
            output=result.output or "",
            output_files=list(result.output_files or ()),
        )
        if problems:
            found[result.extractor] = problems
    return found


def check_outputs(
    folder: Path, *, extractor: str, output: str, output_files: list[str]
) -> list[str]:
    """Return the problems of one succeeded result's files (``[]`` when they are sound).

    ``folder`` is the snapshot folder; ``output_files`` are relative to it, ``output`` to
    ``folder/extractor``. Each file is read at most once, in chunks (a WARC is never held in
    memory). The rules are in this module's docstring.
    """
    problems: list[str] = []
    main = None
    within = _Within(folder)
    registered = registry.find_extractor(extractor)
    kind = registered.main_output if registered else MainOutput.FILE
    if kind != MainOutput.VALUE and not output:
        problems.append(f"{extractor}: no main output recorded")
    elif kind == MainOutput.DIRECTORY:
        problems += _check_directory(folder, _join(extractor, output), within=within)
    elif kind == MainOutput.FILE:
        main = _join(extractor, output)
    declared = declared_outputs()
    names = dict.fromkeys([*map(_normal, output_files), *([main] if main else [])])
    for name in names:
        problems += _check_file(
            folder, name, within=within, is_main=name == main, declared=declared
        )
    return problems


def declared_outputs() -> list[Declared]:
    """Return the outputs every registered extractor declares, in the registry's order, with
    their paths made relative to the snapshot folder (``wget/warc/*.warc.gz``)."""
    return [
        (f"{extractor.name}/{output.path}", output.check)
        for extractor in registry.EXTRACTORS
        for output in extractor.outputs
    ]


def _join(extractor: str, output: str) -> str:
    """Return the main output's path relative to the snapshot folder."""
    return _normal(f"{extractor}/{output}")


def _normal(name: str) -> str:
    """Return ``name`` with repeated and trailing slashes and ``.`` parts removed (``..`` kept)."""
    return PurePosixPath(name).as_posix() if name else name


def _check_file(
    folder: Path, name: str, *, within: _Within, is_main: bool, declared: list[Declared]
) -> list[str]:
    """Return the problems of the listed file ``name``: where it is, its size, its format."""
    info, problem = _locate(folder, name, within=within)
    if problem:
        return [problem]
    check = _check_for(name, declared)
    if info.st_size == 0 and (is_main or check is not None):
        return [f"empty: {name}"]
    if check is None:
        return []
    try:
        details = check(folder / name)
    except OSError as error:  # the disk, not the format: an I/O error or a vanished file
        details = [f"cannot be read ({error.strerror or error})"]
    return [f"{name}: {detail}" for detail in details]


def _check_directory(folder: Path, name: str, *, within: _Within) -> list[str]:
    """Return the problems of a main output that is a folder (git's mirror): it must be one."""
    info, problem = _locate(folder, name, within=within, regular=False)
    if problem:
        return [problem]
    return [] if stat.S_ISDIR(info.st_mode) else [f"{name}: not a folder"]


def _locate(
    folder: Path, name: str, *, within: _Within, regular: bool = True
) -> tuple[os.stat_result, None] | tuple[None, str]:
    """Return (``name``'s status, None) if it is inside ``folder`` (``within``) and no symbolic
    link, else (None, the problem). With ``regular``, it must also be a regular file.

    lstat, not stat: a link is reported, never followed, and a FIFO is never opened (which
    would block).
    """
    relative = PurePosixPath(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        return None, f"{name or '(empty name)'}: outside the snapshot folder"
    path = folder / relative
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None, f"missing: {name}"
    except OSError as error:
        return None, f"{name}: cannot be read ({error.strerror or error})"
    if stat.S_ISLNK(info.st_mode):
        return None, f"{name}: a symbolic link, not a regular file"
    if regular and not stat.S_ISREG(info.st_mode):
        return None, f"{name}: not a regular file"
    # A linked folder on the way (wget/ -> /elsewhere) would lead out of the snapshot folder.
    if not within.holds(path):
        return None, f"{name}: outside the snapshot folder"
    return info, None


class _Within:
    """The snapshot folder of one ``check_outputs``, resolved, and the folders under it resolved
    so far: a page's requisites share a few folders, and resolving a path takes a system call
    per folder in it."""

    def __init__(self, folder: Path) -> None:
        self.root = folder.resolve()
        self._resolved: dict[Path, Path] = {}

    def holds(self, path: Path) -> bool:
        """True when ``path``, no symbolic link itself (the caller's lstat said so), resolves
        to a path inside the snapshot folder."""
        parent = path.parent
        resolved = self._resolved.get(parent)
        if resolved is None:
            resolved = self._resolved[parent] = parent.resolve()
        return (resolved / path.name).is_relative_to(self.root)


def _check_for(name: str, declared: list[Declared]) -> FileCheck | None:
    """Return the check of ``name`` (relative to the snapshot folder): that of the first
    declared output it matches (fnmatch, ``*`` spans folders), or None."""
    for pattern, check in declared:
        if fnmatchcase(name, pattern):
            return FORMAT_CHECKS[check] if isinstance(check, Format) else check
    return None
