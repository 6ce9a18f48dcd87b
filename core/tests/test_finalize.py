"""Files that make a snapshot folder self-describing (core/folder/manifest.py): atomic writes,
index.json, and the BagIt-style checksum manifest."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path

import pytest

from core.folder.index_json import write_index
from core.folder.manifest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    TEMP_PREFIX,
    atomic_write,
    manifest_path_encode,
    payload_files,
    read_manifest,
    sha256_file,
    verify_manifest,
    write_manifest,
)

LINE = re.compile(r"^(?P<digest>[0-9a-f]{64})  (?P<path>\S.*)$")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_files(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def manifest_lines(folder: Path) -> list[str]:
    return (folder / MANIFEST_NAME).read_bytes().decode().split("\n")[:-1]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A snapshot folder with a few extractors' outputs."""
    root = tmp_path / "snapshot"
    make_files(
        root,
        {
            "index.json": b"{}\n",
            "title/title.txt": b"Home\n",
            "wget/127.0.0.1/index.html": b"<html></html>",
            "wget/warc/archive.warc.gz": b"\x1f\x8b not really",
            "z-last.txt": b"",
        },
    )
    return root


# --- atomic_write --------------------------------------------------------------------------------


def test_atomic_write_creates_the_file_and_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "file.bin"

    atomic_write(path, b"\x00data\xff")

    assert path.read_bytes() == b"\x00data\xff"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # archive/privacy.py
    assert sorted(p.name for p in path.parent.iterdir()) == ["file.bin"]


def test_atomic_write_replaces_the_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_bytes(b"old content that is longer than the new one")

    atomic_write(path, b"new")

    assert path.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["index.json"]


def test_atomic_write_that_fails_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    path.write_bytes(b"old")

    with pytest.raises(TypeError):
        atomic_write(path, "text, not bytes")  # type: ignore[arg-type]

    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["index.json"]


def test_write_index_is_sorted_utf8_json(tmp_path: Path) -> None:
    write_index(tmp_path, {"b": 1, "a": {"title": "Café ☕"}})

    data = (tmp_path / "index.json").read_bytes()
    assert data.endswith(b"}\n")
    assert "Café ☕".encode() in data
    assert list(json.loads(data)) == ["a", "b"]


# --- write_manifest ------------------------------------------------------------------------------


def test_manifest_lists_every_file_with_its_sha256(folder: Path) -> None:
    digest = write_manifest(folder)

    lines = manifest_lines(folder)
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    entries = {m["path"]: m["digest"] for m in parsed}
    assert entries == {
        "index.json": sha256(b"{}\n"),
        "title/title.txt": sha256(b"Home\n"),
        "wget/127.0.0.1/index.html": sha256(b"<html></html>"),
        "wget/warc/archive.warc.gz": sha256(b"\x1f\x8b not really"),
        "z-last.txt": sha256(b""),
    }
    assert [m["path"] for m in parsed] == sorted(entries)
    assert digest == sha256((folder / MANIFEST_NAME).read_bytes())


def test_manifest_is_the_same_when_written_again(folder: Path) -> None:
    first = write_manifest(folder)

    assert write_manifest(folder) == first
    assert MANIFEST_NAME not in read_manifest(folder)


def test_manifest_skips_temporary_files_and_folders(folder: Path) -> None:
    make_files(
        folder,
        {
            ".tmp-abc123": b"half an index",
            ".tmp-wget-2/127.0.0.1/index.html": b"half a page",
            "wget/.tmp-old-warc/archive.warc.gz": b"stale",
            "title/.tmp-x": b"half a title",
        },
    )

    write_manifest(folder)

    assert not any(".tmp-" in path for path in read_manifest(folder))
    assert len(read_manifest(folder)) == 5


def test_manifest_does_not_follow_symlinks(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    make_files(outside, {"secret.txt": b"not part of the snapshot"})
    (folder / "link-to-file").symlink_to(outside / "secret.txt")
    (folder / "link-to-dir").symlink_to(outside, target_is_directory=True)
    (folder / "title" / "dangling").symlink_to(tmp_path / "nowhere")

    write_manifest(folder)

    assert set(read_manifest(folder)) == {
        "index.json",
        "title/title.txt",
        "wget/127.0.0.1/index.html",
        "wget/warc/archive.warc.gz",
        "z-last.txt",
    }
    assert verify_manifest(folder) == []


def test_manifest_percent_encodes_newline_cr_and_percent(folder: Path) -> None:
    odd = "wget/we%ird\nna\rme 100%.html"
    make_files(folder, {odd: b"odd"})

    write_manifest(folder)

    lines = manifest_lines(folder)
    assert f"{sha256(b'odd')}  wget/we%25ird%0Ana%0Dme 100%25.html" in lines
    assert len(lines) == 6
    assert read_manifest(folder)[odd] == sha256(b"odd")
    assert verify_manifest(folder) == []


def test_a_literal_percent_sequence_in_a_name_round_trips(folder: Path) -> None:
    odd = "title/%0A and %25.txt"
    make_files(folder, {odd: b"x"})

    write_manifest(folder)

    assert manifest_path_encode(odd) == "title/%250A and %2525.txt"
    assert odd in read_manifest(folder)
    assert verify_manifest(folder) == []


@pytest.mark.parametrize("separator", ["\x0c", "\x1e", "\x85", "\u2028"])
def test_names_with_other_line_separators_round_trip(folder: Path, separator: str) -> None:
    odd = f"wget/page{separator}two.html"
    make_files(folder, {odd: b"x"})

    write_manifest(folder)

    assert read_manifest(folder)[odd] == sha256(b"x")
    assert verify_manifest(folder) == []


def test_payload_files_leave_out_links_temporary_files_tags_and_special_files(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "snapshot"
    kept = {"index.json": b"{}", "wget/a/b.html": b"b", f"wget/{MANIFEST_NAME}": b"not a tag"}
    make_files(folder, kept)
    make_files(folder, {MANIFEST_NAME: b"", SIGNATURE_NAME: b"", f"{TEMP_PREFIX}x": b""})
    make_files(folder, {f"dom/{TEMP_PREFIX}work/page.html": b"half written"})
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/secret.txt").write_bytes(b"secret")
    (folder / "wget/linked-file").symlink_to(tmp_path / "outside/secret.txt")
    (folder / "wget/linked-folder").symlink_to(tmp_path / "outside")
    os.mkfifo(folder / "wget/fifo")

    files = payload_files(folder)

    assert [path.relative_to(folder).as_posix() for path in files] == sorted(kept)


def test_payload_files_are_sorted_paths(folder: Path) -> None:
    files = payload_files(folder)

    assert files == sorted(files)
    assert all(path.is_file() for path in files)


def test_sha256_file_reads_large_files_in_chunks(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 7)
    (tmp_path / "big").write_bytes(data)

    assert sha256_file(tmp_path / "big") == sha256(data)


# --- verify_manifest -----------------------------------------------------------------------------


def test_verify_a_good_folder(folder: Path) -> None:
    write_manifest(folder)

    assert verify_manifest(folder) == []


def test_verify_reports_a_changed_file(folder: Path) -> None:
    write_manifest(folder)
    (folder / "title/title.txt").write_bytes(b"Tampered\n")

    assert verify_manifest(folder) == ["checksum mismatch: title/title.txt"]


def test_verify_reports_a_missing_file(folder: Path) -> None:
    write_manifest(folder)
    (folder / "wget/warc/archive.warc.gz").unlink()

    assert verify_manifest(folder) == ["missing: wget/warc/archive.warc.gz"]


def test_verify_reports_a_file_not_in_the_manifest(folder: Path) -> None:
    write_manifest(folder)
    make_files(folder, {"title/extra.txt": b"added later"})

    assert verify_manifest(folder) == ["not in manifest: title/extra.txt"]


def test_verify_reports_every_problem_at_once(folder: Path) -> None:
    write_manifest(folder)
    (folder / "index.json").write_bytes(b"[]\n")
    (folder / "z-last.txt").unlink()
    make_files(folder, {"new.txt": b"x"})

    assert sorted(verify_manifest(folder)) == [
        "checksum mismatch: index.json",
        "missing: z-last.txt",
        "not in manifest: new.txt",
    ]


def test_verify_ignores_temporary_files_added_later(folder: Path) -> None:
    write_manifest(folder)
    make_files(folder, {".tmp-favicon-1/favicon.ico": b"in progress"})

    assert verify_manifest(folder) == []


def test_verify_without_a_manifest_raises(folder: Path) -> None:
    with pytest.raises(FileNotFoundError):
        verify_manifest(folder)
