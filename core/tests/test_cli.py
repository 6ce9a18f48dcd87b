"""The command line a person uses: ``add``, ``list``, ``status`` and ``init`` (DESIGN.md §7).

Bad input must give one clear line and change nothing. In-process checks use ``call_command``;
what the person actually sees (exit code, stderr, no traceback) is checked by running
``manage.py`` as a subprocess, either in a DATA_DIR of its own (a copy of one made by ``init``)
or against the test database (hence ``transaction=True`` there). ``list`` and ``status`` run in
process over rows made with model-bakery.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone
from model_bakery import baker

from archive.testing import shared_database_url
from core.choices import CopyStatus, FixityOutcome, ResultStatus, SnapshotStatus
from core.models import ArchiveResult, FixityCheck, Snapshot, StorageCopy, Tag
from core.services.profiles import profile_save
from crawls.choices import CrawlStatus
from crawls.management import crawl_input
from crawls.models import Crawl

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
COMMAND_TIMEOUT = 60
SEED = "http://127.0.0.1:9/page.html"  # never fetched: nothing here runs the orchestrator


# --- helpers -------------------------------------------------------------------------------------


def manage(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess:
    """Run ``manage.py <args>`` with this test's database and DATA_DIR (or ``env`` overrides)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_SUPERUSER_")}
    full_env["DATABASE_URL"] = shared_database_url()
    full_env["DJANGO_SETTINGS_MODULE"] = "archive.settings_for_tests"
    full_env.update(env or {})
    completed = subprocess.run(
        [sys.executable, MANAGE, *args],
        env=full_env,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=COMMAND_TIMEOUT,
        cwd=settings.BASE_DIR,
    )
    return subprocess.CompletedProcess(
        completed.args,
        completed.returncode,
        completed.stdout.decode("utf-8", "replace"),
        completed.stderr.decode("utf-8", "replace"),
    )


def source_files() -> set[str]:
    """Names of the saved inputs in DATA_DIR/sources (empty if the folder does not exist)."""
    folder = settings.SOURCES_DIR
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def init_env(data_dir: Path) -> dict[str, str]:
    """The environment of a command that uses ``data_dir`` and its own SQLite database."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "DATABASE_URL" and not k.startswith("DJANGO_SUPERUSER_")
    }
    env.update({"DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "archive.settings_for_tests"})
    return env


def run_init(data_dir: Path, *args: str, env: dict[str, str] | None = None):
    """Run ``manage.py init`` against ``data_dir`` with its own SQLite database."""
    full_env = {**init_env(data_dir), **(env or {})}
    return subprocess.run(
        [sys.executable, MANAGE, "init", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        cwd=settings.BASE_DIR,
    )


def users(data_dir: Path) -> list[tuple[str, bool]]:
    """(username, is_superuser) of every user in ``data_dir``'s database."""
    with closing(sqlite3.connect(data_dir / "db.sqlite3")) as db:
        rows = db.execute("SELECT username, is_superuser FROM auth_user ORDER BY username")
        return [(name, bool(superuser)) for name, superuser in rows]


def copy_data_dir(source: Path, target: Path) -> Path:
    """Copy an initialized DATA_DIR (but its collected static files) to ``target``."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("static"))
    return target


@dataclass
class Initialized:
    """A DATA_DIR made by a first ``manage.py init``, and what that run printed."""

    data_dir: Path
    run: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def initialized(tmp_path_factory: pytest.TempPathFactory) -> Initialized:
    data_dir = tmp_path_factory.mktemp("cli-init") / "not" / "yet" / "data"
    done = run_init(data_dir)
    assert done.returncode == 0, done.stderr
    return Initialized(data_dir, done)


# --- bad input -----------------------------------------------------------------------------------

# Each case: (id, builds the arguments in a temporary folder, expected words of the message).
BadCase = tuple[str, Callable[[Path], list[str]], str]


def write(tmp: Path, name: str, data: bytes) -> str:
    path = tmp / name
    path.write_bytes(data)
    return str(path)


BAD_INPUTS: list[BadCase] = [
    ("invalid-url", lambda t: ["not a url"], "is not an absolute URL"),
    ("relative-url", lambda t: ["/just/a/path"], "is not an absolute URL"),
    ("file-scheme", lambda t: ["file:///etc/passwd"], "only http and https"),
    ("javascript-scheme", lambda t: ["javascript:alert(1)"], "only http and https"),
    ("data-scheme", lambda t: ["data:text/html,<b>hi</b>"], "only http and https"),
    ("credentials", lambda t: ["http://user:pw@example.com/"], "credentials"),
    ("one-bad-among-good", lambda t: [SEED, "ftp://example.com/x"], "line 2"),
    ("empty-file", lambda t: ["--file", write(t, "empty.txt", b"")], "contains no URLs"),
    (
        "comments-only-file",
        lambda t: ["--file", write(t, "comments.txt", b"# nothing\n\n   \n")],
        "contains no URLs",
    ),
    (
        "binary-file",
        lambda t: ["--file", write(t, "image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" * 4)],
        "binary data",
    ),
    (
        "latin1-file",
        lambda t: [
            "--file",
            write(t, "latin1.txt", "http://caf\u00e9.example/\n".encode("latin-1")),
        ],
        "not UTF-8",
    ),
    ("missing-file", lambda t: ["--file", str(t / "no-such-file.txt")], "cannot read"),
    # Issue 3, item 7: hostile input files.
    (
        "garbage-10mb-file",
        lambda t: ["--file", write(t, "garbage.bin", random.Random(7).randbytes(10 * 2**20))],
        "garbage.bin is binary data, not a list of URLs",
    ),
    (
        "invalid-utf8-file",
        lambda t: ["--file", write(t, "bad.txt", b"http://a.example/\n\xc3\x28\n")],
        "bad.txt is not UTF-8 text (line 2, byte 18)",
    ),
    (
        "utf16-file",
        lambda t: ["--file", write(t, "utf16.txt", "http://a.example/\n".encode("utf-16"))],
        "utf16.txt is UTF-16 text; save it as UTF-8",
    ),
    ("directory-as-file", lambda t: ["--file", str(t)], "Is a directory"),
    ("depth-11", lambda t: ["--depth", "11", SEED], "depth must be between 0 and 10, not 11"),
    ("depth-negative", lambda t: ["--depth", "-1", SEED], "depth must be between 0 and 10"),
    (
        "urls-and-file",
        lambda t: [SEED, "--file", write(t, "urls.txt", f"{SEED}\n".encode())],
        "exactly one",
    ),
    ("stdin-and-url", lambda t: ["-", SEED], "exactly one"),
    ("no-input", lambda t: [], "exactly one"),
    ("bad-tag", lambda t: ["--tag", "ok,has\ttab", SEED], "invalid tag"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("build", "message"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS]
)
def test_add_rejects_bad_input_in_process(build, message: str, tmp_path: Path) -> None:
    sources_before = source_files()

    with pytest.raises(CommandError) as raised:
        call_command("add", *build(tmp_path), stdout=io.StringIO())

    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert Crawl.objects.count() == 0
    assert Tag.objects.count() == 0
    assert source_files() == sources_before


@pytest.mark.django_db
def test_add_refuses_a_depth_whose_steps_find_no_links(settings) -> None:
    """Links are followed from what the outlinks extractor finds: a crawl with depth whose steps
    do not run it would archive its seeds alone, and say nothing."""
    settings.EXTRACTORS = ["headers", "wget", "title"]
    profile_save(name="quick", steps=["title"])

    with pytest.raises(CommandError, match="the default steps \\(EXTRACTORS\\) do not run it"):
        call_command("add", "--depth", "1", SEED, stdout=io.StringIO())
    with pytest.raises(CommandError) as raised:
        call_command("add", "--depth", "2", "--profile", "quick", SEED, stdout=io.StringIO())

    assert str(raised.value) == (
        "depth 2 follows the links that the outlinks extractor finds, and profile 'quick' does "
        "not run it: add outlinks to the steps, or archive at depth 0"
    )
    assert Crawl.objects.count() == 0
    call_command("add", "--profile", "quick", SEED, stdout=io.StringIO())  # depth 0: no links
    profile_save(name="deep", steps=["wget", "outlinks"])
    call_command("add", "--depth", "1", "--profile", "deep", SEED, stdout=io.StringIO())
    assert list(Crawl.objects.values_list("depth", flat=True).order_by("pk")) == [0, 1]


# What the person sees is checked for the cases named in the issues. Each runs concurrently (the
# suite stays quick) in its own copy of one freshly initialized DATA_DIR, so that whatever a case
# might change is its own to inspect.
SUBPROCESS_CASES = (
    "invalid-url",
    "file-scheme",
    "javascript-scheme",
    "data-scheme",
    "empty-file",
    "binary-file",
    "garbage-10mb-file",
    "invalid-utf8-file",
    "missing-file",
    "depth-11",
    "urls-and-file",
)


@dataclass
class Run:
    """One ``manage.py add`` run in a DATA_DIR of its own."""

    data_dir: Path
    returncode: int
    stdout: str
    stderr: str

    def crawls(self) -> int:
        with closing(sqlite3.connect(self.data_dir / "db.sqlite3")) as db:
            return db.execute("SELECT count(*) FROM crawls_crawl").fetchone()[0]

    def sources(self) -> list[str]:
        return sorted(p.name for p in (self.data_dir / "sources").iterdir())


@pytest.fixture(scope="module")
def add_runs(initialized: Initialized, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Run ``manage.py add`` for every subprocess case (and ``--bogus``) at once."""
    cases = {case_id: build for case_id, build, _message in BAD_INPUTS}
    wanted = {case_id: cases[case_id] for case_id in SUBPROCESS_CASES}
    wanted["unknown-option"] = lambda t: ["--bogus", SEED]
    started: dict[str, tuple[Path, subprocess.Popen]] = {}
    runs = {}
    try:
        for case_id, build in wanted.items():
            folder = tmp_path_factory.mktemp(case_id)
            data_dir = copy_data_dir(initialized.data_dir, folder / "data")
            process = subprocess.Popen(
                [sys.executable, MANAGE, "add", *build(folder)],
                env=init_env(data_dir),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=settings.BASE_DIR,
            )
            started[case_id] = (data_dir, process)
        for case_id, (data_dir, process) in started.items():
            out, err = process.communicate(timeout=COMMAND_TIMEOUT)
            runs[case_id] = Run(data_dir, process.returncode, out, err)
    finally:
        for _data_dir, process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return runs


MESSAGES = {case_id: message for case_id, _build, message in BAD_INPUTS}


@pytest.mark.parametrize("case_id", SUBPROCESS_CASES)
def test_add_shows_one_line_for_bad_input(case_id: str, add_runs: dict[str, Run]) -> None:
    run = add_runs[case_id]

    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stdout + run.stderr
    (line,) = lines(run.stderr)
    assert line.startswith("CommandError: ")
    assert MESSAGES[case_id] in line
    assert run.stdout == ""
    assert run.crawls() == 0
    assert run.sources() == []


def test_add_with_an_unknown_option_is_a_usage_error(add_runs: dict[str, Run]) -> None:
    run = add_runs["unknown-option"]

    assert run.returncode == 2
    assert "Traceback" not in run.stdout + run.stderr
    assert lines(run.stderr)[0].startswith("usage: manage.py add")
    assert lines(run.stderr)[-1] == "manage.py add: error: unrecognized arguments: --bogus"
    assert run.crawls() == 0
    assert run.sources() == []


@pytest.mark.django_db
@pytest.mark.parametrize("priority", ["40000", "-40000"])
def test_add_rejects_a_priority_out_of_range(priority: str) -> None:
    sources_before = source_files()

    with pytest.raises(CommandError, match="priority"):
        call_command("add", "--priority", priority, SEED, stdout=io.StringIO())

    assert Crawl.objects.count() == 0
    assert source_files() == sources_before


@pytest.mark.django_db
@pytest.mark.parametrize("source", ["stdin", "file"])
def test_add_refuses_input_larger_than_its_limit_instead_of_cutting_it(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(crawl_input, "MAX_INPUT_BYTES", 1024)
    data = f"{SEED}\n".encode() * 100  # about 3 KiB of valid URLs: cut at 1 KiB, a line breaks
    path = tmp_path / "urls.txt"
    path.write_bytes(data)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    args = ["-"] if source == "stdin" else ["--file", str(path)]
    sources_before = source_files()

    with pytest.raises(CommandError, match=r"^(stdin|\S*urls.txt) is larger than "):
        call_command("add", *args, stdout=io.StringIO())

    assert Crawl.objects.count() == 0
    assert source_files() == sources_before


@pytest.mark.django_db
def test_add_with_an_unknown_option_in_process() -> None:
    with pytest.raises(CommandError, match="unrecognized arguments: --bogus"):
        call_command("add", "--bogus", SEED)
    assert Crawl.objects.count() == 0


# --- good input ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_add_reads_urls_from_stdin_and_keeps_the_input() -> None:
    data = (
        b"# my reading list\n"
        b"HTTP://Example.COM:80/a#frag\n"
        b"\n"
        b"https://example.org/b?q=1\n"
        b"http://example.com/a\n"  # the same page as the first, once normalized
    )
    sources_before = source_files()

    done = manage("add", "-", stdin=data)

    assert done.returncode == 0, done.stderr
    crawl = Crawl.objects.get()
    assert crawl.seed_list() == ["http://example.com/a", "https://example.org/b?q=1"]
    assert crawl.status == CrawlStatus.QUEUED and crawl.depth == 0
    assert f"Crawl {crawl.pk} queued: 2 URL(s), depth 0." in done.stdout
    (new_source,) = source_files() - sources_before
    assert new_source.endswith("-stdin.txt")
    assert crawl.source_file == f"sources/{new_source}"
    assert (settings.DATA_DIR / crawl.source_file).read_bytes() == data
    assert done.stderr == ""


@pytest.mark.django_db(transaction=True)
def test_add_reads_a_feed_queues_its_entries_and_names_the_one_left_out() -> None:
    feed = (
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>'
        b"<item><title>One</title><link>https://news.example/1</link>"
        b"<category>world</category></item>"
        b"<item><title>Broken</title><link>ftp://news.example/2</link></item>"
        b"<item><title>Three</title><link>https://news.example/3</link></item>"
        b"</channel></rss>"
    )

    done = manage("add", "-", stdin=feed)

    assert done.returncode == 0, done.stderr
    crawl = Crawl.objects.get()
    assert f"Crawl {crawl.pk} queued: 2 URL(s) from a feed, depth 0." in done.stdout
    assert lines(done.stderr) == [
        "1 entry left out:",
        "  stdin entry 2 ('Broken'): 'ftp://news.example/2': only http and https URLs can be "
        "archived, not ftp:",
    ]
    assert crawl.seed_details == {
        "https://news.example/1": {"title": "One", "tags": ["world"]},
        "https://news.example/3": {"title": "Three", "tags": []},
    }


@pytest.mark.django_db(transaction=True)
def test_add_counts_a_tag_left_out_apart_from_the_entries_left_out() -> None:
    """A bookmark kept without one of its tags is no entry left out (it was counted as one)."""
    long_tag = "x" * 150
    bookmarks = (
        "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n"
        f'<DT><A HREF="https://a.example/sea" TAGS="{long_tag},ok">Sea page</A>\n'
        '<DT><A HREF="place:sort=8">Recent</A>\n'
        "</DL><p>\n"
    ).encode()

    done = manage("add", "-", stdin=bookmarks)

    assert done.returncode == 0, done.stderr
    crawl = Crawl.objects.get()
    assert crawl.seed_details == {"https://a.example/sea": {"title": "Sea page", "tags": ["ok"]}}
    assert lines(done.stderr) == [
        "1 entry left out, 1 tag left out:",
        f"  stdin line 3: tag '{long_tag[:40]}' left out (printable, at most 100 chars)",
        "  stdin line 4: 'place:sort=8': only http and https URLs can be archived, not place:",
    ]
    assert crawl.input_left_out == "1 entry left out, 1 tag left out"


@pytest.mark.django_db(transaction=True)
def test_add_parser_option_overrides_detection() -> None:
    done = manage("add", "--parser", "json", "-", stdin=b"https://a.example/\n")

    assert done.returncode == 1
    assert lines(done.stderr) == [
        "CommandError: stdin is not valid JSON (line 1, column 1: Expecting value)"
    ]
    assert not Crawl.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_add_with_tags_depth_and_priority() -> None:
    done = manage("add", "--tag", "a,b", "--tag", " c ,a", "--depth", "2", "--priority", "4", SEED)

    assert done.returncode == 0, done.stderr
    crawl = Crawl.objects.get()
    assert sorted(crawl.tags.values_list("name", flat=True)) == ["a", "b", "c"]
    assert (crawl.depth, crawl.priority, crawl.any_host) == (2, 4, False)
    assert "depth 2" in done.stdout


@pytest.mark.django_db
def test_add_from_a_file_in_process(tmp_path: Path) -> None:
    urls = tmp_path / "bookmarks.txt"
    urls.write_bytes(b"\xef\xbb\xbfhttp://example.com/one\r\nhttp://example.com/two\r\n")
    out = io.StringIO()

    call_command("add", "--file", str(urls), "--any-host", stdout=out)

    crawl = Crawl.objects.get()
    assert crawl.seed_list() == ["http://example.com/one", "http://example.com/two"]
    assert crawl.any_host is True
    assert "bookmarks" in crawl.source_file
    assert (settings.DATA_DIR / crawl.source_file).read_bytes() == urls.read_bytes()
    assert f"Crawl {crawl.pk} queued: 2 URL(s)" in out.getvalue()


# --- list ----------------------------------------------------------------------------------------


@pytest.fixture
def listed(db) -> dict[str, Snapshot]:
    """Two crawls: a sealed snapshot with results and tags, a queued one, and one elsewhere."""
    news = baker.make(Tag, name="news")
    first = baker.make(Crawl, status=CrawlStatus.STARTED)
    sealed = baker.make(
        Snapshot,
        crawl=first,
        url="http://example.com/a",
        title="Page A",
        status=SnapshotStatus.SEALED,
        retry_at=None,
        created_at=timezone.now() - timedelta(seconds=30),
    )
    sealed.tags.add(news)
    baker.make(
        ArchiveResult,
        snapshot=sealed,
        extractor="wget",
        status=ResultStatus.SUCCEEDED,
        output="example.com/a.html",
        attempts=1,
        retry_at=None,
    )
    baker.make(
        ArchiveResult,
        snapshot=sealed,
        extractor="title",
        status=ResultStatus.FAILED,
        error="HTTP 404 from http://example.com/a",
        attempts=2,
        retry_at=None,
    )
    queued = baker.make(
        Snapshot,
        crawl=first,
        url="http://example.com/b",
        created_at=timezone.now() - timedelta(seconds=20),
    )
    other = baker.make(
        Snapshot,
        crawl=baker.make(Crawl),
        url="http://example.org/c",
        created_at=timezone.now() - timedelta(seconds=10),
    )
    other.tags.add(news, baker.make(Tag, name="later"))
    return {"sealed": sealed, "queued": queued, "other": other}


def list_json(*args: str) -> list[dict]:
    out = io.StringIO()
    call_command("list", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def test_list_json_schema(listed) -> None:
    rows = list_json()

    assert [row["url"] for row in rows] == [
        "http://example.com/a",
        "http://example.com/b",
        "http://example.org/c",
    ]
    first = rows[0]
    assert {"id", "url", "status", "results", "crawl", "title", "depth", "tags"} <= first.keys()
    assert first["id"] == str(listed["sealed"].pk)
    assert first["status"] == "sealed"
    assert first["crawl"] == listed["sealed"].crawl_id
    assert first["tags"] == ["news"]
    assert first["results"]["wget"] == {
        "status": "succeeded",
        "output": "example.com/a.html",
        "error": "",
        "attempts": 1,
    }
    assert first["results"]["title"]["status"] == "failed"
    assert first["results"]["title"]["error"] == "HTTP 404 from http://example.com/a"
    assert rows[1]["status"] == "queued" and rows[1]["results"] == {}
    assert rows[2]["tags"] == ["later", "news"]


def test_list_filters(listed) -> None:
    crawl = listed["sealed"].crawl_id

    assert {r["url"] for r in list_json("--crawl", str(crawl))} == {
        "http://example.com/a",
        "http://example.com/b",
    }
    assert [r["url"] for r in list_json("--state", "sealed")] == ["http://example.com/a"]
    assert [r["url"] for r in list_json("--state", "queued", "--crawl", str(crawl))] == [
        "http://example.com/b"
    ]
    assert [r["url"] for r in list_json("--tag", "news")] == [
        "http://example.com/a",
        "http://example.org/c",
    ]
    assert [r["url"] for r in list_json("--tag", "later")] == ["http://example.org/c"]
    assert list_json("--tag", "nobody-uses-this") == []
    assert list_json("--crawl", "999999") == []


def test_list_rejects_an_unknown_state(listed) -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("list", "--state", "bogus", stdout=io.StringIO())


def test_list_csv(listed) -> None:
    out = io.StringIO()
    call_command("list", "--csv", stdout=out)

    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows[0] == [
        "id", "crawl", "status", "url", "title", "depth", "tags", "created_at", "results",
    ]  # fmt: skip
    assert len(rows) == 4
    by_url = {row[3]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}
    sealed = by_url["http://example.com/a"]
    assert sealed["id"] == str(listed["sealed"].pk)
    assert sealed["status"] == "sealed"
    assert sealed["title"] == "Page A"
    assert sealed["tags"] == "news"
    assert set(sealed["results"].split()) == {"wget:succeeded", "title:failed"}
    assert by_url["http://example.org/c"]["tags"] == "later,news"


def test_list_table_mentions_every_snapshot(listed) -> None:
    out = io.StringIO()
    call_command("list", stdout=out)

    text = out.getvalue()
    for snapshot in listed.values():
        assert snapshot.url in text
    assert "3 snapshot(s)" in text


# --- status --------------------------------------------------------------------------------------


def test_status_json_counts_every_state(db) -> None:
    now = timezone.now()
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=now + timedelta(seconds=60))
    baker.make(Crawl, status=CrawlStatus.HELD)
    baker.make(Snapshot, crawl=crawl, retry_at=now - timedelta(seconds=1))
    baker.make(Snapshot, crawl=crawl, status=SnapshotStatus.SEALED, retry_at=None)
    started = baker.make(
        Snapshot, crawl=crawl, status=SnapshotStatus.STARTED, retry_at=now + timedelta(seconds=60)
    )
    baker.make(ArchiveResult, snapshot=started, extractor="wget", retry_at=now)
    baker.make(
        ArchiveResult,
        snapshot=started,
        extractor="title",
        status=ResultStatus.BACKOFF,
        retry_at=now + timedelta(seconds=60),
    )
    baker.make(
        ArchiveResult, snapshot=started, extractor="headers", status=ResultStatus.SKIPPED,
        retry_at=None,
    )  # fmt: skip
    out = io.StringIO()

    call_command("status", "--json", stdout=out)

    counts = json.loads(out.getvalue())
    assert counts["data_dir"] == str(settings.DATA_DIR)
    assert counts["crawl"] == {"queued": 0, "started": 1, "sealed": 0, "held": 1, "due": 0}
    assert counts["snapshot"] == {
        "queued": 1, "started": 1, "finalizing": 0, "sealed": 1, "failed": 0, "due": 1,
    }  # fmt: skip
    assert counts["archiveresult"] == {
        "queued": 1, "started": 0, "backoff": 1, "succeeded": 0, "failed": 0, "skipped": 1,
        "due": 1,
    }  # fmt: skip


# --- init ----------------------------------------------------------------------------------------


def test_init_creates_the_data_folder(initialized: Initialized) -> None:
    data_dir = initialized.data_dir

    assert f"Data folder ready: {data_dir}" in initialized.run.stdout
    assert "Traceback" not in initialized.run.stderr
    for name in ("archive", "sources", "logs", "static"):
        assert (data_dir / name).is_dir(), name
    assert (data_dir / "db.sqlite3").is_file()
    assert users(data_dir) == []
    assert not (data_dir / "admin-password").exists()


def test_init_again_keeps_what_is_there(initialized: Initialized, tmp_path: Path) -> None:
    data_dir = copy_data_dir(initialized.data_dir, tmp_path / "data")
    (data_dir / "sources" / "kept.txt").write_text("http://example.com/\n")
    (data_dir / "archive" / "some-snapshot").mkdir()

    again = run_init(data_dir)

    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr
    assert (data_dir / "sources" / "kept.txt").read_text() == "http://example.com/\n"
    assert (data_dir / "archive" / "some-snapshot").is_dir()
    assert (data_dir / "static").is_dir()
    assert users(data_dir) == []


def test_init_create_admin_once_with_a_private_password_file(
    initialized: Initialized, tmp_path: Path
) -> None:
    data_dir = copy_data_dir(initialized.data_dir, tmp_path / "data")

    first = run_init(data_dir, "--create-admin")

    assert first.returncode == 0, first.stderr
    assert users(data_dir) == [("admin", True)]
    password_file = data_dir / "admin-password"
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    password = password_file.read_text().strip()
    assert len(password) >= 12
    assert password in first.stdout  # shown once, so the person can log in

    second = run_init(data_dir, "--create-admin")

    assert second.returncode == 0, second.stderr
    assert users(data_dir) == [("admin", True)]
    assert password_file.read_text().strip() == password
    assert password not in second.stdout


def test_init_creates_the_superuser_named_in_the_environment(
    initialized: Initialized, tmp_path: Path
) -> None:
    data_dir = copy_data_dir(initialized.data_dir, tmp_path / "data")
    env = {"DJANGO_SUPERUSER_USERNAME": "curator", "DJANGO_SUPERUSER_PASSWORD": "a-long-secret-9"}

    first = run_init(data_dir, env=env)
    second = run_init(data_dir, "--create-admin", env=env)  # the named user wins, once

    assert first.returncode == 0, first.stderr
    assert "Admin user 'curator' created" in first.stdout
    assert second.returncode == 0, second.stderr
    assert "already exists" in second.stdout
    assert users(data_dir) == [("curator", True)]
    assert not (data_dir / "admin-password").exists()


def test_init_refuses_a_superuser_without_a_password(
    initialized: Initialized, tmp_path: Path
) -> None:
    data_dir = copy_data_dir(initialized.data_dir, tmp_path / "data")

    done = run_init(data_dir, env={"DJANGO_SUPERUSER_USERNAME": "curator"})

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert lines(done.stderr) == [
        "CommandError: DJANGO_SUPERUSER_USERNAME is set but DJANGO_SUPERUSER_PASSWORD is not"
    ]
    assert users(data_dir) == []


def make_sealed(crawl: Crawl, url: str) -> Snapshot:
    return baker.make(Snapshot, crawl=crawl, url=url, status=SnapshotStatus.SEALED, retry_at=None)


def test_status_shows_what_fixity_audits_flagged(db, settings) -> None:
    settings.STORAGE_TARGETS = {}
    crawl = baker.make(Crawl, status=CrawlStatus.SEALED, retry_at=None)
    last = timezone.now() - timedelta(hours=3)
    flagged = make_sealed(crawl, "http://flagged.example/")
    baker.make(FixityCheck, snapshot=flagged, location="local", outcome=FixityOutcome.FLAGGED,
               checked_at=last - timedelta(days=1), problems=["missing: index.json"])  # fmt: skip
    sound = make_sealed(crawl, "http://sound.example/")
    baker.make(FixityCheck, snapshot=sound, location="local", outcome=FixityOutcome.OK,
               checked_at=last)  # fmt: skip
    make_sealed(crawl, "http://never.example/")
    unreachable_only = make_sealed(crawl, "http://unreachable.example/")
    baker.make(FixityCheck, snapshot=unreachable_only, location="s3",
               outcome=FixityOutcome.UNREACHABLE, checked_at=last - timedelta(hours=1))  # fmt: skip
    baker.make(StorageCopy, snapshot=flagged, target="s3", status=CopyStatus.DAMAGED,
               retry_at=None)  # fmt: skip
    text, as_json = io.StringIO(), io.StringIO()

    call_command("status", stdout=text)
    call_command("status", "--json", stdout=as_json)

    document = json.loads(as_json.getvalue())
    assert document["fixity"] == {
        "flagged": 1, "unchecked": 2, "last_checked_at": last.isoformat(),
    }  # fmt: skip
    assert document["storagecopy"]["damaged"] == 1
    lines = [line.rstrip() for line in text.getvalue().splitlines()]
    assert "storage copies" in lines
    assert "  damaged           1" in lines
    assert "fixity" in lines
    assert "  flagged snapshots 1" in lines
    assert "  never checked     2" in lines
    assert f"  last check        {last:%Y-%m-%d %H:%M} UTC (3 hours ago)" in lines
    assert (
        "1 snapshot flagged by fixity audits: manage.py verify --all, then manage.py restore "
        "--flagged (from a storage copy) or manage.py rearchive --flagged" in lines
    )
    assert (
        "No storage targets configured (STORAGE_TARGETS): snapshots are kept in DATA_DIR only."
        in lines
    )


def test_status_when_nothing_was_ever_checked(db, settings) -> None:
    settings.STORAGE_TARGETS = {"m": {"BACKEND": "django.core.files.storage.FileSystemStorage"}}
    text, as_json = io.StringIO(), io.StringIO()

    call_command("status", stdout=text)
    call_command("status", "--json", stdout=as_json)

    assert json.loads(as_json.getvalue())["fixity"] == {
        "flagged": 0, "unchecked": 0, "last_checked_at": None,
    }  # fmt: skip
    lines = [line.rstrip() for line in text.getvalue().splitlines()]
    assert "  last check        never" in lines
    assert not any("flagged by fixity audits" in line for line in lines)
    assert not any("No storage targets" in line for line in lines)
