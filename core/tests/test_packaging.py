"""WACZ packaging (core/folder/wacz.py) with the real py-wacz, checked by py-wacz's own validator.

Snapshot folders are built by hand with warcio (core/tests/warc_folders.py), and once from a
real wget capture of the live test site.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from core.extractors.errors import Outcome
from core.extractors.process import run_shutdown_hooks
from core.extractors.wget import WgetExtractor
from core.folder import pywacz_worker
from core.folder.manifest import TEMP_PREFIX
from core.folder.pywacz_worker import WaczWorker, shared_worker
from core.folder.wacz import (
    WACZ_NAME,
    PackagingError,
    PageSource,
    build_wacz,
    package_wacz,
    snapshot_warcs,
    supplement_warc,
    validate_wacz,
    warm_up_packaging,
)
from core.tests.site import PIXEL_PNG, LiveSite
from core.tests.warc_folders import WARC_DATE, WARC_PATH, make_snapshot_folder, write_warc
from orchestrator.forking import fork_process

URL = "http://example.test/page"
ARCHIVED_AT = datetime(2025, 3, 4, 5, 0, 0, tzinfo=UTC)
TIMEOUT = 120


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A snapshot folder with a WARC of URL and a screenshot."""
    return make_snapshot_folder(tmp_path / "0195d2a0-0000-7000-8000-00000000000a", URL)


def build(folder: Path, **options) -> Path | None:
    options = {
        "url": URL,
        "title": "A page",
        "archived_at": ARCHIVED_AT,
        "timeout": TIMEOUT,
        **options,
    }
    return build_wacz(folder, **options)


def members(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as wacz:
        return sorted(wacz.namelist())


def read_member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as wacz:
        return wacz.read(name)


def pages(path: Path) -> list[dict]:
    text = read_member(path, "pages/pages.jsonl").decode()
    return [json.loads(line) for line in text.splitlines()]


def records(warc: bytes) -> list[tuple[str, str, str, bytes]]:
    """(type, target URI, Content-Type, content) of every record in a WARC's bytes."""
    found = []
    for record in ArchiveIterator(io.BytesIO(warc)):
        found.append(
            (
                record.rec_type,
                record.rec_headers.get_header("WARC-Target-URI"),
                record.rec_headers.get_header("Content-Type"),
                record.content_stream().read(),
            )
        )
    return found


def leftovers(folder: Path) -> list[str]:
    return [path.name for path in folder.rglob(f"{TEMP_PREFIX}*")]


# --- build_wacz ----------------------------------------------------------------------------------


def test_build_wacz_makes_a_wacz_that_py_wacz_validates(folder: Path) -> None:
    path = build(folder)

    assert path == folder / WACZ_NAME
    assert validate_wacz(path, timeout=TIMEOUT) == []
    prefix = folder.name
    assert members(path) == sorted(
        [
            "archive/" + f"{prefix}-wget-warc-archive.warc.gz",
            "archive/" + f"{prefix}-screenshots.warc",
            "datapackage-digest.json",
            "datapackage.json",
            "indexes/index.cdx.gz",
            "indexes/index.idx",
            "pages/pages.jsonl",
        ]
    )
    assert leftovers(folder) == []


def test_build_wacz_page_list_names_the_page_at_its_capture_time(folder: Path) -> None:
    path = build(folder, title="Ünïcode title")

    header, *page_lines = pages(path)
    assert header["format"] == "json-pages-1.0"
    assert header["id"] == "pages"
    # The capture's own time (the WARC-Date), not the snapshot's archived_at:
    assert page_lines == [
        {"id": folder.name, "url": URL, "ts": WARC_DATE, "title": "Ünïcode title"}
    ]
    datapackage = json.loads(read_member(path, "datapackage.json"))
    assert datapackage["mainPageURL"] == URL
    assert datapackage["mainPageDate"] == WARC_DATE
    assert datapackage["title"] == "Ünïcode title"


def test_build_wacz_keeps_the_warc_byte_for_byte(folder: Path) -> None:
    path = build(folder)

    stored = read_member(path, f"archive/{folder.name}-wget-warc-archive.warc.gz")
    assert stored == (folder / WARC_PATH).read_bytes()
    index = gzip.decompress(read_member(path, "indexes/index.cdx.gz")).decode()
    assert f'"url": "{URL}"' in index


def test_build_wacz_stores_the_screenshot_as_browsertrix_does(folder: Path) -> None:
    path = build(folder)

    warc = read_member(path, f"archive/{folder.name}-screenshots.warc")
    found = records(warc)
    assert [kind for kind, *_ in found] == ["warcinfo", "resource"]
    _, uri, content_type, content = found[1]
    assert uri == f"urn:fullPage:{URL}"
    assert content_type == "image/png"
    assert content == PIXEL_PNG
    index = gzip.decompress(read_member(path, "indexes/index.cdx.gz")).decode()
    assert f"urn:fullPage:{URL}" in index


def test_build_wacz_without_screenshot_has_no_screenshot_warc(tmp_path: Path) -> None:
    folder = make_snapshot_folder(tmp_path / "snap", URL, screenshot=False)

    path = build(folder)

    assert [name for name in members(path) if name.startswith("archive/")] == [
        "archive/snap-wget-warc-archive.warc.gz"
    ]
    assert validate_wacz(path, timeout=TIMEOUT) == []


def test_build_wacz_from_a_real_wget_capture(live_site: LiveSite, tmp_path: Path) -> None:
    folder = tmp_path / "snap"
    (folder / "wget").mkdir(parents=True)
    url = live_site.url("/")
    output = WgetExtractor().run(SimpleNamespace(url=url), folder / "wget")
    assert output.outcome is Outcome.SUCCEEDED, output.error

    path = build(folder, url=url, title="Vellum Test Home")

    assert validate_wacz(path, timeout=TIMEOUT) == []
    (page_line,) = pages(path)[1:]
    assert page_line["url"] == url
    index = gzip.decompress(read_member(path, "indexes/index.cdx.gz")).decode()
    assert live_site.url("/static/pixel.png") in index  # the page's requisites came along


def write_plain_warc(path: Path, urls: list[str], *, log: bool = True) -> Path:
    """Write an uncompressed WARC: warcinfo, a 200 response for each of ``urls`` and, with
    ``log``, a ``resource`` record of the tool's log under a ``metadata://`` URI, as wget's."""
    with open(path, "wb") as out:
        writer = WARCWriter(out, gzip=False)
        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "tests"}))
        for url in urls:
            head = StatusAndHeaders("200 OK", [("Content-Length", "3")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(b"abc"), http_headers=head))  # fmt: skip
        if log:
            writer.write_record(writer.create_warc_record(
                "metadata://gnu.org/software/wget/warc/wget.log", "resource",
                payload=io.BytesIO(b"a log"), warc_content_type="text/plain"))  # fmt: skip
    return path


def test_supplement_warc_copies_the_records_it_keeps_byte_for_byte(tmp_path: Path) -> None:
    primary = write_warc(tmp_path / "primary.warc.gz", URL, b"recorded")
    other = write_plain_warc(tmp_path / "other.warc", [URL, "http://example.test/extra"])

    kept = supplement_warc(other, [primary], tmp_path / "kept.warc.gz")

    with open(kept, "rb") as stream:
        types = []
        for record in ArchiveIterator(stream, check_digests="raise"):
            record.content_stream().read()
            types.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI")))
    assert types == [
        ("warcinfo", None),
        ("response", "http://example.test/extra"),
        ("resource", "metadata://gnu.org/software/wget/warc/wget.log"),
    ]
    # Each record as it was written, two CRLFs included, gzipped on its own.
    original = other.read_bytes()
    assert all(gzip.decompress(member) in original for member in gzip_members(kept))


def test_supplement_warc_of_nothing_but_the_tools_log_is_none(tmp_path: Path) -> None:
    primary = write_warc(tmp_path / "primary.warc.gz", URL, b"recorded")
    other = write_plain_warc(tmp_path / "other.warc", [URL])

    assert supplement_warc(other, [primary], tmp_path / "kept.warc.gz") is None
    assert not (tmp_path / "kept.warc.gz").exists()


def gzip_members(path: Path) -> list[bytes]:
    """The gzip members of ``path``, each as its own compressed bytes."""
    data, members = path.read_bytes(), []
    while data:
        decompressor = zlib.decompressobj(wbits=31)
        decompressor.decompress(data)
        used = len(data) - len(decompressor.unused_data)
        members.append(data[:used])
        data = decompressor.unused_data
    return members


def test_build_wacz_without_warc_returns_none_and_removes_a_stale_wacz(tmp_path: Path) -> None:
    folder = make_snapshot_folder(tmp_path / "snap", URL, warc=False)
    (folder / WACZ_NAME).write_bytes(b"an earlier run's WACZ")

    assert build(folder) is None
    assert not (folder / WACZ_NAME).exists()
    assert leftovers(folder) == []


def test_warcs_of_earlier_runs_temporary_folders_and_the_mirror_are_left_out(
    folder: Path,
) -> None:
    write_warc(
        folder / "history" / "20250101T000000.000000Z" / "wget" / "warc" / "old.warc.gz",
        URL,
        b"old",
    )
    write_warc(folder / ".tmp-wget-123" / "warc" / "partial.warc.gz", URL, b"partial")
    write_warc(folder / "wget" / "warc" / ".tmp-half.warc.gz", URL, b"half")
    # A .warc.gz the archived site served, saved by wget in its mirror: content, not a capture.
    write_warc(folder / "wget" / "example.test" / "files" / "site.warc.gz", URL, b"site's")

    assert snapshot_warcs(folder) == [folder / WARC_PATH]
    path = build(folder)
    assert [name for name in members(path) if name.startswith("archive/")] == [
        f"archive/{folder.name}-screenshots.warc",
        f"archive/{folder.name}-wget-warc-archive.warc.gz",
    ]


def test_build_wacz_twice_gives_a_valid_wacz_again(folder: Path) -> None:
    first = build(folder)
    first_members = members(first)

    second = build(folder)

    assert second == first
    assert members(second) == first_members
    assert validate_wacz(second, timeout=TIMEOUT) == []
    assert leftovers(folder) == []


def test_timeout_is_a_temporary_error_that_leaves_no_temporary_file(folder: Path) -> None:
    good = build(folder).read_bytes()

    with pytest.raises(PackagingError, match="did not finish within") as raised:
        build(folder, timeout=0.001)

    assert raised.value.temporary
    assert leftovers(folder) == []
    assert (folder / WACZ_NAME).read_bytes() == good  # the earlier WACZ is untouched


def test_unreadable_warc_is_a_permanent_error(folder: Path) -> None:
    (folder / WARC_PATH).write_bytes(b"this is not a WARC at all\n" * 10)

    with pytest.raises(PackagingError, match="is not a WARC file: it does not begin") as raised:
        build(folder)

    assert not raised.value.temporary
    assert not (folder / WACZ_NAME).exists()
    assert leftovers(folder) == []


def test_a_warc_named_gz_that_is_not_gzipped_is_a_permanent_error(folder: Path) -> None:
    good = folder / WARC_PATH
    unzipped = gzip.decompress(good.read_bytes())  # a readable WARC, but not what its name says
    good.write_bytes(unzipped)

    with pytest.raises(PackagingError, match=r"ends \.gz, but it is not gzipped") as raised:
        build(folder)

    assert not raised.value.temporary
    assert not (folder / WACZ_NAME).exists()


def test_page_is_dated_by_archived_at_when_its_url_is_not_in_the_warc(folder: Path) -> None:
    path = build(folder, url="http://example.test/elsewhere")

    (page_line,) = pages(path)[1:]
    assert page_line["ts"] == "2025-03-04T05:00:00Z"
    assert "mainPageURL" not in json.loads(read_member(path, "datapackage.json"))
    assert validate_wacz(path, timeout=TIMEOUT) == []


def test_a_warc_date_that_cannot_be_read_is_a_packaging_error_not_a_crash(
    tmp_path: Path,
) -> None:
    """A WARC-Date warcio cannot read ("+00:00Z", as warcio itself writes an aware datetime)
    is refused by py-wacz's indexer: a PackagingError naming it, never a TypeError of ours."""
    folder = tmp_path / "snapshot"
    write_warc(folder / WARC_PATH, URL, b"<p>hi</p>", date="2025-03-04T05:06:07.123+00:00Z")

    with pytest.raises(PackagingError, match="py-wacz could not create it: TypeError"):
        build(folder)
    assert not (folder / WACZ_NAME).exists()


# --- package_wacz --------------------------------------------------------------------------------


def test_package_wacz_combines_several_snapshots(tmp_path: Path) -> None:
    sources = []
    for number in range(3):
        url = f"http://example.test/{number}"
        folder = make_snapshot_folder(tmp_path / f"snap-{number}", url, title=f"Page {number}")
        sources.append(
            PageSource(folder=folder, url=url, title=f"Page {number}", archived_at=ARCHIVED_AT)
        )
    output = tmp_path / "out" / "all.wacz"
    output.parent.mkdir()

    assert (
        package_wacz(sources, output, title="All", description="three", timeout=TIMEOUT) == output
    )

    assert validate_wacz(output, timeout=TIMEOUT) == []
    assert [page["url"] for page in pages(output)[1:]] == [source.url for source in sources]
    archived = [name for name in members(output) if name.startswith("archive/")]
    assert len(archived) == 6  # a WARC and a screenshot WARC each, under names of their own
    assert "mainPageURL" not in json.loads(read_member(output, "datapackage.json"))
    assert leftovers(output.parent) == []


def test_package_wacz_refuses_two_sources_with_one_folder_name(tmp_path: Path) -> None:
    one = make_snapshot_folder(tmp_path / "a" / "snap", URL)
    two = make_snapshot_folder(tmp_path / "b" / "snap", URL)
    sources = [PageSource(folder=f, url=URL, title="", archived_at=ARCHIVED_AT) for f in (one, two)]

    with pytest.raises(ValueError, match="share a folder name"):
        package_wacz(sources, tmp_path / "x.wacz", title="x", description="x", timeout=TIMEOUT)


# --- validate_wacz -------------------------------------------------------------------------------


def test_validate_wacz_gives_py_waczs_reason_for_a_tampered_member(
    folder: Path, tmp_path: Path
) -> None:
    path = build(folder)
    tampered = tmp_path / "tampered.wacz"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(tampered, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "pages/pages.jsonl":
                data = data.replace(b"A page", b"B page")
            target.writestr(item, data)

    problems = validate_wacz(tampered, timeout=TIMEOUT)

    assert len(problems) == 1
    assert problems[0].startswith(
        "frictionless: pages.jsonl: The data source does not match the expected hash count"
    )


def test_validate_wacz_of_something_else_names_the_error(tmp_path: Path) -> None:
    path = tmp_path / "not.wacz"
    path.write_bytes(b"not a zip file")

    assert validate_wacz(path, timeout=TIMEOUT) == ["zipfile.BadZipFile: File is not a zip file"]


def test_validate_wacz_of_a_relative_path(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(folder)
    monkeypatch.chdir(folder.parent)

    assert validate_wacz(Path(folder.name) / WACZ_NAME, timeout=TIMEOUT) == []


@pytest.fixture
def fresh_worker() -> Iterator[WaczWorker]:
    """This process's py-wacz worker, stopped before and after the test."""
    worker = shared_worker()
    worker.close()
    yield worker
    worker.close()


def test_py_wacz_that_cannot_start_is_a_permanent_error(
    folder: Path, monkeypatch: pytest.MonkeyPatch, fresh_worker: WaczWorker
) -> None:
    monkeypatch.setattr(pywacz_worker, "_WORKER", "import wacz_is_not_installed\n")

    with pytest.raises(PackagingError) as raised:
        build(folder)

    assert str(raised.value) == (
        "py-wacz could not start: ModuleNotFoundError: No module named 'wacz_is_not_installed'"
    )
    assert not raised.value.temporary
    assert leftovers(folder) == []


def test_a_worker_that_died_before_its_job_says_why(
    folder: Path, monkeypatch: pytest.MonkeyPatch, fresh_worker: WaczWorker
) -> None:
    """The job is written to a worker that has already exited: what it printed is still read
    (once, under load, this race left only "its worker ended (died)")."""
    monkeypatch.setattr(pywacz_worker, "_WORKER", "import wacz_is_not_installed\n")
    warm_up = WaczWorker.warm_up

    def start_and_let_die(worker: WaczWorker) -> None:
        warm_up(worker)
        worker.process.wait()

    monkeypatch.setattr(WaczWorker, "warm_up", start_and_let_die)

    with pytest.raises(PackagingError) as raised:
        build(folder)

    assert str(raised.value) == (
        "py-wacz could not start: ModuleNotFoundError: No module named 'wacz_is_not_installed'"
    )
    assert fresh_worker.process is None
    assert leftovers(folder) == []


def test_one_worker_packages_snapshot_after_snapshot(folder: Path, fresh_worker) -> None:
    build(folder)
    first = fresh_worker.process.pid

    build(folder)

    assert fresh_worker.process.pid == first
    assert validate_wacz(folder / WACZ_NAME, timeout=TIMEOUT) == []


def test_a_warmed_up_worker_runs_the_first_job(folder: Path, fresh_worker) -> None:
    warm_up_packaging()
    warmed = fresh_worker.process.pid

    build(folder)

    assert fresh_worker.process.pid == warmed
    assert validate_wacz(folder / WACZ_NAME, timeout=TIMEOUT) == []
    warm_up_packaging()  # running already: nothing new is started
    assert fresh_worker.process.pid == warmed


def test_a_killed_worker_is_replaced_by_the_next_job(folder: Path, fresh_worker) -> None:
    build(folder)
    killed = fresh_worker.process.pid
    os.kill(killed, signal.SIGKILL)
    fresh_worker.process.wait()

    build(folder)

    assert fresh_worker.process.pid != killed
    assert validate_wacz(folder / WACZ_NAME, timeout=TIMEOUT) == []


def test_an_actor_stopping_stops_and_waits_for_its_worker(fresh_worker) -> None:
    """A forked actor ends with os._exit, which runs no atexit function: its shutdown hooks
    (orchestrator/actor.py) stop the worker and wait for it."""
    warm_up_packaging()
    worker = fresh_worker.process

    run_shutdown_hooks()

    assert fresh_worker.process is None
    assert worker.returncode is not None  # waited for: its CPU time counts as the actor's


def test_a_forked_child_leaves_its_parents_worker_running(fresh_worker) -> None:
    warm_up_packaging()
    worker = fresh_worker.process

    child = fork_process(fresh_worker.close)  # a forked actor's shutdown hook
    child.join(timeout=TIMEOUT)

    assert child.exitcode == 0
    assert worker.poll() is None  # still the parent's to use
    assert fresh_worker.process is worker


def test_a_worker_past_its_timeout_is_killed_with_its_group(folder: Path, fresh_worker) -> None:
    build(folder)
    pid = fresh_worker.process.pid

    with pytest.raises(PackagingError, match="did not finish within"):
        build(folder, timeout=0.001)

    assert fresh_worker.process is None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole group is gone


# --- the worker's stand-ins ----------------------------------------------------------------------


def run_after_stand_ins(code: str, tmp_path: Path, *, path: Path | None = None) -> dict:
    """Run ``code`` in a new Python after the worker's stand-ins (pywacz_worker._STAND_INS),
    ``path`` first on its import path; return what it printed as JSON on its last line."""
    script = tmp_path / "script.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(path or tmp_path)!r})\n"
                      + pywacz_worker._STAND_INS + textwrap.dedent(code))  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_worker_packages_a_wacz_without_importing_tldextract_or_requests(
    folder: Path, tmp_path: Path
) -> None:
    """surt imports tldextract, which imports requests, and py-wacz's check imports requests:
    half of the worker's start, for options (public suffixes, a signing or verifying service)
    that Vellum never uses."""
    found = run_after_stand_ins(
        f"""
        import json
        from wacz.main import main
        from wacz.validate import Validation
        made = {str(tmp_path / "made.wacz")!r}
        code = main(["create", "-o", made, {str(folder / WARC_PATH)!r}])
        assert Validation(made).check_data_package_hash_and_sig() is True
        real = [name for name in ("tldextract", "requests", "frictionless")
                if getattr(sys.modules.get(name), "__file__", None)]  # a stand-in has none
        print(json.dumps({{"code": code, "loaded": real}}))
        """,
        tmp_path,
    )

    assert found == {"code": 0, "loaded": []}
    assert validate_wacz(tmp_path / "made.wacz", timeout=TIMEOUT) == []


def test_a_stand_in_imports_its_module_at_the_first_call_and_gives_way_to_it(
    tmp_path: Path,
) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "tldextract.py").write_text(
        "import requests.adapters  # a submodule of another stand-in's module, as requests_file\n"
        "calls = []\ndef extract(host, **options):\n"
        "    calls.append(host)\n    return f'real {host} {sorted(options)}'\n"
        "def other():\n    return 'real other'\n"
    )

    found = run_after_stand_ins(
        """
        import json
        import tldextract  # as surt imports it: the stand-in
        before = "calls" in vars(tldextract)
        first = tldextract.extract("a.example", include_psl_private_domains=True)
        second = tldextract.extract("b.example")
        real = sys.modules["tldextract"]
        print(json.dumps({"before": before, "answers": [first, second, tldextract.other()],
                          "real": real is not tldextract, "calls": real.calls,
                          "requests": hasattr(sys.modules["requests"], "__file__")}))
        """,
        tmp_path,
        path=modules,
    )

    assert found == {
        "before": False,
        "answers": [
            "real a.example ['include_psl_private_domains']",
            "real b.example []",
            "real other",  # not a named function: anything else in it is the real module's too
        ],
        "real": True,
        "calls": ["a.example", "b.example"],
        "requests": True,  # the real one, which the real tldextract imported
    }
