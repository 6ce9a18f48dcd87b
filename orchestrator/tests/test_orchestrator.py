"""End to end: ``manage.py add --wait`` and ``manage.py orchestrator`` with real actors, real
extractors (curl, wget) and the live test site, each test in a DATA_DIR of its own.

Every command runs as a subprocess with a timeout, and the outcome is read the way a person
would: ``list --json``, ``status --json``, the snapshot folders and the logs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings

from archive.testing import child_pids, process_cmdline
from core.folder.manifest import read_manifest, verify_manifest
from core.tests.site import LiveSite
from crawls.seeds import normalize_url

pytestmark = pytest.mark.slow

MANAGE = str(Path(settings.BASE_DIR) / "manage.py")
WARCIO = str(Path(sys.executable).parent / "warcio")
FINAL = {"succeeded", "failed", "skipped"}
# How a timeout reads in a result's error: "curl: operation timed out (exit 28)", "wget timed out
# after 2 s", or, when wget's own --timeout (equal to the kill deadline) wins the race, "wget:
# network failure (timeout, refused or reset) (exit 4)".
TIMEOUT = re.compile(r"timed out|\btimeout\b")
COMMAND_TIMEOUT = 60
CRAWL_TIMEOUT = 120


class Vellum:
    """One installation: a DATA_DIR with its own SQLite database, driven through manage.py."""

    def __init__(self, data_dir: Path, **env: str):
        self.data_dir = data_dir
        self.base_env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "VELLUM_TEST_DATA_DIR_CREATED")
            and not k.startswith("DJANGO_SUPERUSER_")
        }
        self.base_env.update(
            DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="archive.settings_for_tests", **env
        )

    def env(self, **extra: str) -> dict[str, str]:
        return {**self.base_env, **extra}

    def manage(
        self, *args: str, timeout: float = COMMAND_TIMEOUT, **env: str
    ) -> subprocess.CompletedProcess:
        """Run ``manage.py <args>``; fail the test if it takes longer than ``timeout``."""
        return subprocess.run(
            [sys.executable, MANAGE, *args],
            env=self.env(**env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=settings.BASE_DIR,
        )

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        """Start ``manage.py <args>`` in the background (the caller waits for it)."""
        return subprocess.Popen(
            [sys.executable, MANAGE, *args],
            env=self.env(**env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=settings.BASE_DIR,
        )

    def list_json(self, *args: str) -> list[dict]:
        done = self.manage("list", "--json", *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def status(self) -> dict:
        done = self.manage("status", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def log(self, name: str) -> str:
        path = self.data_dir / "logs" / name
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def vellum(tmp_path: Path) -> Vellum:
    """A freshly initialized installation (``manage.py init``) with 10 s extractor timeouts."""
    instance = Vellum(tmp_path / "data", EXTRACTOR_TIMEOUT="10")
    done = instance.manage("init")
    assert done.returncode == 0, done.stderr
    return instance


def wait_for(condition: Callable[[], object], *, timeout: float, what: str) -> object:
    """Poll ``condition`` until it returns something true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def stop(process: subprocess.Popen) -> None:
    """Kill a process this test started if it is still running (cleanup after a failure)."""
    if process.poll() is None:
        process.kill()
        process.communicate(timeout=10)


def assert_idle(status: dict) -> None:
    """Nothing active and nothing due, of any kind."""
    assert status["crawl"]["queued"] == status["crawl"]["started"] == 0
    for kind, active in (
        ("snapshot", ("queued", "started", "finalizing")),
        ("archiveresult", ("queued", "started", "backoff")),
    ):
        assert [status[kind][state] for state in active] == [0] * len(active), status[kind]
        assert status[kind]["due"] == 0


def assert_folder_is_complete(row: dict) -> dict:
    """Check a sealed snapshot's folder: index.json, a valid manifest, WARCs that parse.

    Return the parsed index.json.
    """
    folder = Path(row["folder"])
    index = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    assert index["snapshot"]["id"] == row["id"]
    assert index["snapshot"]["url"] == row["url"]
    assert {r["extractor"]: r["status"] for r in index["results"]} == {
        name: detail["status"] for name, detail in row["results"].items()
    }
    assert "index.json" in read_manifest(folder)
    assert verify_manifest(folder) == []
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]
    for result in index["results"]:
        for name in result["output_files"]:
            assert (folder / name).is_file(), name
        if result["extractor"] == "wget" and result["status"] == "succeeded":
            warcs = [name for name in result["output_files"] if name.endswith(".warc.gz")]
            assert warcs, result["output_files"]
            for warc in warcs:
                check = subprocess.run(
                    [WARCIO, "check", str(folder / warc)],
                    capture_output=True,
                    text=True,
                    timeout=COMMAND_TIMEOUT,
                )
                assert check.returncode == 0, check.stdout + check.stderr
    return index


def busy_result_actor(orchestrator_pid: int) -> tuple[int, int] | None:
    """The (actor pid, wget pid) of an archiveresult actor of ours that is running wget."""
    for pid in child_pids(orchestrator_pid):
        cmd = " ".join(process_cmdline(pid)).split()  # a forked actor's title is one string
        if "manage.py" not in " ".join(cmd) or cmd[-2:] != ["actor", "archiveresult"]:
            continue
        for child in child_pids(pid):
            child_cmd = process_cmdline(child)
            if child_cmd and Path(child_cmd[0]).name == "wget":
                return pid, child
    return None


# --- (a) a crawl with depth ----------------------------------------------------------------------


def test_depth_one_archives_the_page_and_its_same_host_links(
    vellum: Vellum, live_site: LiveSite
) -> None:
    index_url = live_site.url("/index.html")

    done = vellum.manage("add", "--depth", "1", "--wait", index_url, timeout=CRAWL_TIMEOUT)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "Crawl 1 sealed" in done.stdout
    rows = vellum.list_json()
    urls = [row["url"] for row in rows]
    expected = [
        normalize_url(live_site.url(path))
        for path in ("/index.html", "/page2.html", "/page3.html", "/missing.html")
    ]
    assert sorted(urls) == sorted(expected)  # each once: "/page2.html#section" is page2 too
    assert not [url for url in urls if "example.invalid" in url or url.startswith("mailto:")]
    by_url = {row["url"]: row for row in rows}
    assert by_url[index_url]["depth"] == 0
    assert {by_url[url]["depth"] for url in expected[1:]} == {1}

    for row in rows:
        assert row["status"] == "sealed", row
        assert row["results"], row
        for name, result in row["results"].items():
            assert result["status"] in FINAL, (row["url"], name, result)
            if result["status"] != "succeeded":
                assert result["error"].strip(), (row["url"], name, result)
        index = assert_folder_is_complete(row)
        parent = index["snapshot"]["parent_id"]
        assert parent == (None if row["url"] == index_url else by_url[index_url]["id"])

    home = by_url[index_url]
    assert {name: r["status"] for name, r in home["results"].items()} == {
        name: "succeeded" for name in home["results"]
    }
    assert "wget" in home["results"]
    assert home["title"] == "Vellum Test Home"

    missing = by_url[normalize_url(live_site.url("/missing.html"))]
    for name, result in missing["results"].items():
        assert result["status"] == "failed", (name, result)
        assert "404" in result["error"], (name, result)
        assert result["attempts"] == 1, (name, result)  # a 404 is not retried

    status = vellum.status()
    assert status["crawl"]["sealed"] == 1
    assert status["snapshot"]["sealed"] == 4
    assert_idle(status)


# --- (b) depth 0, any host, tags -----------------------------------------------------------------


def test_depth_zero_archives_only_the_seed_with_its_tags(
    vellum: Vellum, live_site: LiveSite
) -> None:
    """The outlinks extractor finds links to this host and another; depth 0 follows none."""
    url = live_site.url("/index.html")

    done = vellum.manage(
        "add", "--depth", "0", "--any-host", "--tag", "a,b", "--tag", "c", "--wait", url,
        timeout=CRAWL_TIMEOUT, EXTRACTORS="outlinks,title",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    (row,) = vellum.list_json()
    assert row["url"] == url
    assert row["status"] == "sealed"
    assert row["results"]["outlinks"]["status"] == "succeeded"
    outlinks = json.loads((Path(row["folder"]) / "outlinks" / "outlinks.json").read_text())
    assert "http://example.invalid/x" in outlinks
    assert row["tags"] == ["a", "b", "c"]
    assert [r["url"] for r in vellum.list_json("--tag", "b")] == [url]
    assert vellum.list_json("--tag", "d") == []
    index = assert_folder_is_complete(row)
    assert index["snapshot"]["tags"] == ["a", "b", "c"]


# --- (c) a server that never answers -------------------------------------------------------------


def test_an_unresponsive_server_fails_after_bounded_retries(
    vellum: Vellum, live_site: LiveSite
) -> None:
    url = live_site.url("/slow")
    started = time.monotonic()

    done = vellum.manage(
        "add", "--wait", url, EXTRACTOR_TIMEOUT="2", MAX_ATTEMPTS="2", BACKOFF_BASE="0.2",
        timeout=60,
    )  # fmt: skip

    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 60
    (row,) = vellum.list_json()
    assert row["status"] == "sealed"
    assert row["results"]
    for name, result in row["results"].items():
        assert result["status"] == "failed", (name, result)
        assert "attempts exhausted" in result["error"], (name, result)
        assert TIMEOUT.search(result["error"]), (name, result)
        assert result["attempts"] == 2, (name, result)  # one backoff, one more try, no more
    assert "attempts exhausted" in done.stdout
    assert_folder_is_complete(row)
    assert_idle(vellum.status())


# --- (d) orchestrator --exit-on-idle -------------------------------------------------------------


def test_exit_on_idle_with_nothing_queued_returns_at_once(vellum: Vellum) -> None:
    started = time.monotonic()

    done = vellum.manage("orchestrator", "--exit-on-idle", timeout=30)

    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 10
    assert "Traceback" not in done.stderr
    stopped = "orchestrator stopped; 0 actors spawned, 0 crashed; CPU "
    assert re.search(
        re.escape(stopped) + r"\d+\.\d\d s, its actors and their commands 0\.00 s",
        vellum.log("orchestrator.log"),
    )


def test_exit_on_idle_archives_what_is_queued_then_exits(
    vellum: Vellum, live_site: LiveSite
) -> None:
    url = live_site.url("/page3.html")
    queued = vellum.manage("add", url)
    assert queued.returncode == 0, queued.stderr
    assert vellum.status()["crawl"]["queued"] == 1

    done = vellum.manage(
        "orchestrator", "--exit-on-idle", timeout=CRAWL_TIMEOUT, EXTRACTORS="wget,title"
    )

    assert done.returncode == 0, done.stderr
    (row,) = vellum.list_json()
    assert row["url"] == url
    assert row["status"] == "sealed"
    assert list(row["results"]) == ["wget", "title"]
    assert row["results"]["wget"]["status"] == "succeeded"
    assert row["results"]["title"] == {
        "status": "skipped",
        "output": "",
        "error": "page has no <title>",
        "attempts": 1,
    }
    assert_folder_is_complete(row)
    status = vellum.status()
    assert status["crawl"]["sealed"] == 1
    assert_idle(status)


# --- (e) signals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_an_idle_orchestrator_cleanly(vellum: Vellum, signum: int) -> None:
    process = vellum.start("orchestrator")
    try:
        wait_for(
            lambda: "orchestrator started" in vellum.log("orchestrator.log"),
            timeout=30,
            what="the orchestrator to start",
        )
        time.sleep(0.5)  # a few idle ticks
        assert process.poll() is None, process.communicate()

        process.send_signal(signum)
        signalled = time.monotonic()
        _out, err = process.communicate(timeout=10)
    finally:
        stop(process)

    assert process.returncode == 0, err
    assert time.monotonic() - signalled < 5
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "orchestrator stopped" in vellum.log("orchestrator.log")


def test_sigterm_stops_a_busy_orchestrator_and_its_extractors(
    vellum: Vellum, live_site: LiveSite
) -> None:
    """TERM stops at once: the running wget's group is killed and its result backs off."""
    env = {"EXTRACTORS": "wget", "EXTRACTOR_TIMEOUT": "30", "MAX_ATTEMPTS": "3"}
    assert vellum.manage("add", live_site.url("/slow"), **env).returncode == 0
    orchestrator = vellum.start("orchestrator", **env)
    extractor = None
    try:
        _actor, extractor = wait_for(
            lambda: busy_result_actor(orchestrator.pid),
            timeout=30,
            what="an archiveresult actor running wget",
        )
        orchestrator.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        _out, err = orchestrator.communicate(timeout=20)
    finally:
        stop(orchestrator)

    assert orchestrator.returncode == 0, err
    assert time.monotonic() - signalled < 15  # not the 30 s the extractor was allowed
    assert "wget" not in " ".join(process_cmdline(extractor))  # its process group was killed
    (row,) = vellum.list_json()
    wget = row["results"]["wget"]
    assert wget["status"] == "backoff", wget
    assert wget["attempts"] == 1
    assert "interrupted" in wget["error"]
    assert row["status"] == "started"  # resumes with the next orchestrator


def interrupt_add_wait(vellum: Vellum, url: str, **env: str) -> tuple[int, str, str, float]:
    """Start ``add --wait url``, SIGINT it (as Ctrl-C would) while wget runs, and wait.

    Return its exit code, stdout, stderr and the seconds it took to exit after the signal.
    """
    add = vellum.start("add", "--wait", url, **env)
    try:
        wait_for(lambda: busy_result_actor(add.pid), timeout=30, what="wget to run")
        add.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        out, err = add.communicate(timeout=30)
        return add.returncode, out, err, time.monotonic() - signalled
    finally:
        stop(add)


def test_ctrl_c_during_add_wait_drains_and_the_crawl_resumes_later(
    vellum: Vellum, live_site: LiveSite
) -> None:
    """INT drains: the running attempt ends as it would have (a timeout, then backoff), nothing
    is left started, and the next orchestrator finishes the crawl."""
    env = {"EXTRACTORS": "wget", "EXTRACTOR_TIMEOUT": "3", "MAX_ATTEMPTS": "2"}

    code, out, err, took = interrupt_add_wait(vellum, live_site.url("/slow"), **env)

    assert code == 130, err
    assert "Traceback" not in err
    assert took < 3 + 10
    (row,) = vellum.list_json()
    assert row["status"] == "started"
    wget = row["results"]["wget"]
    assert (wget["status"], wget["attempts"]) == ("backoff", 1), wget
    assert TIMEOUT.search(wget["error"]), wget
    assert "sealed" not in out

    done = vellum.manage("orchestrator", "--exit-on-idle", timeout=CRAWL_TIMEOUT, **env)

    assert done.returncode == 0, done.stderr
    (row,) = vellum.list_json()
    assert row["status"] == "sealed"
    assert row["results"]["wget"]["status"] == "failed"
    assert row["results"]["wget"]["attempts"] == 2
    assert_idle(vellum.status())


def test_ctrl_c_during_add_wait_says_how_the_crawl_resumes(
    vellum: Vellum, live_site: LiveSite
) -> None:
    env = {"EXTRACTORS": "wget", "EXTRACTOR_TIMEOUT": "2"}

    code, out, err, _took = interrupt_add_wait(vellum, live_site.url("/slow"), **env)

    assert code == 130, err  # the shell's code for "ended by SIGINT": the crawl is not done
    assert "Crawl 1 is unfinished (interrupted)" in out
    assert "released" not in out  # nothing is held: there is nothing to release


# --- (f) an actor that dies mid-run --------------------------------------------------------------


def test_a_killed_actor_is_recovered_when_its_lease_runs_out(
    vellum: Vellum, live_site: LiveSite
) -> None:
    """SIGKILL the actor running wget on /slow: nothing is left started for ever.

    The lease of a result is its extractor's timeout plus LEASE_MARGIN (here 5 + 0 s). When it
    runs out, the next claim counts the dead attempt and backs off; the second attempt times out
    and, at MAX_ATTEMPTS=2, the result fails as exhausted.
    """
    env = {"EXTRACTORS": "wget", "EXTRACTOR_TIMEOUT": "5", "LEASE_MARGIN": "0", "MAX_ATTEMPTS": "2"}
    url = live_site.url("/slow")
    assert vellum.manage("add", url, **env).returncode == 0
    orchestrator = vellum.start("orchestrator", "--exit-on-idle", **env)
    orphan = None
    try:
        actor, orphan = wait_for(
            lambda: busy_result_actor(orchestrator.pid),
            timeout=30,
            what="an archiveresult actor running wget",
        )
        os.kill(actor, signal.SIGKILL)
        killed = time.monotonic()

        _out, err = orchestrator.communicate(timeout=90)
    finally:
        stop(orchestrator)
        if orphan is not None and "wget" in " ".join(process_cmdline(orphan)):
            os.kill(orphan, signal.SIGKILL)  # the dead actor's wget, in its own session

    assert orchestrator.returncode == 0, err
    assert time.monotonic() - killed < 60
    (row,) = vellum.list_json()
    assert row["status"] == "sealed"
    assert list(row["results"]) == ["wget"]
    wget = row["results"]["wget"]
    assert wget["status"] == "failed"
    assert wget["attempts"] == 2  # the killed attempt counted, then one more
    assert wget["error"].startswith("attempts exhausted (2): ")
    assert TIMEOUT.search(wget["error"]), wget
    assert f"archiveresult actor pid {actor} exited with -9" in vellum.log("orchestrator.log")
    assert (
        f"recovered wget of {row['id']}: worker stopped before finishing (lease expired)"
        in vellum.log("actors.log")
    )
    assert_folder_is_complete(row)
    assert_idle(vellum.status())


# --- (g) an orchestrator already running (orchestrator/handover.py) ------------------------------


def start_orchestrator(vellum: Vellum, **env: str) -> subprocess.Popen:
    """Start ``manage.py orchestrator``, as supervisord keeps one, and return it once it
    listens (it logs its start after making its FIFO)."""
    process = vellum.start("orchestrator", **env)
    wait_for(
        lambda: (
            process.poll() is not None or "orchestrator started" in vellum.log("orchestrator.log")
        ),
        timeout=30,
        what="the orchestrator to start",
    )
    assert process.poll() is None, process.communicate()
    return process


def end(process: subprocess.Popen) -> None:
    """Stop an orchestrator as supervisord does (TERM), or kill it if it does not stop."""
    if process.poll() is None:
        process.terminate()
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            stop(process)


def orchestrators_started(vellum: Vellum) -> list[int]:
    """The pids of the orchestrators that started in this installation, in order."""
    return [int(pid) for pid in re.findall(r"orchestrator started \(pid (\d+)\)",
                                           vellum.log("orchestrator.log"))]  # fmt: skip


def wait_until_sealed(vellum: Vellum, *, crawls: int) -> None:
    """Wait until ``crawls`` crawls are sealed (by an orchestrator the test started)."""
    wait_for(
        lambda: vellum.status()["crawl"].get("sealed") == crawls,
        timeout=CRAWL_TIMEOUT,
        what=f"{crawls} crawl(s) sealed",
    )


def waiting_for_the_orchestrator(vellum: Vellum, add: subprocess.Popen) -> bool:
    """True once ``add --wait`` waits for the staying orchestrator: its ``watch`` FIFO exists
    (made after its signal handlers are set, orchestrator/handover.py)."""
    return any((vellum.data_dir / "run").glob(f"*/wake/*/watch.{add.pid}.*"))


# A crawl the staying orchestrator is busy with for a while: wget on a page that never ends,
# until its 10 s timeout; one attempt more for the case where the orchestrator is stopped.
BUSY_ENV = {"EXTRACTORS": "wget", "EXTRACTOR_TIMEOUT": "10", "MAX_ATTEMPTS": "2"}


def test_add_wait_leaves_the_crawl_to_the_orchestrator_already_running(
    vellum: Vellum, live_site: LiveSite
) -> None:
    env = {"EXTRACTORS": "wget,title"}
    resident = start_orchestrator(vellum, **env)
    try:
        queued = vellum.manage("add", live_site.url("/page2.html"), **env)
        done = vellum.manage("add", "--wait", live_site.url("/page3.html"),
                             timeout=CRAWL_TIMEOUT, **env)  # fmt: skip
        still_running = resident.poll() is None
        wait_until_sealed(vellum, crawls=2)  # the one queued without --wait too
    finally:
        end(resident)

    running = f"The orchestrator running on this machine (pid {resident.pid})"
    assert f"{running} archives it." in queued.stdout
    assert done.returncode == 0, done.stderr
    assert f"{running} archives crawl 2; waiting for the crawl" in done.stdout
    assert "Crawl 2 sealed" in done.stdout
    assert still_running  # it goes on, as supervisord's would
    assert orchestrators_started(vellum) == [resident.pid]  # add --wait started none of its own
    (row,) = vellum.list_json("--crawl", "2")
    assert row["results"]["wget"]["status"] == "succeeded"
    assert_folder_is_complete(row)


def test_add_wait_archives_the_rest_itself_when_the_running_orchestrator_stops(
    vellum: Vellum, live_site: LiveSite
) -> None:
    resident = start_orchestrator(vellum, **BUSY_ENV)
    add = vellum.start("add", "--wait", live_site.url("/slow"), **BUSY_ENV)
    try:
        wait_for(lambda: busy_result_actor(resident.pid), timeout=30, what="its wget to run")
        assert waiting_for_the_orchestrator(vellum, add)
        end(resident)  # as supervisord stops it: its wget is killed, the result backs off
        out, err = add.communicate(timeout=CRAWL_TIMEOUT)
    finally:
        stop(add)
        end(resident)

    assert add.returncode == 0, err
    assert f"The orchestrator (pid {resident.pid}) stopped; crawl 1 goes on here." in out
    assert "Crawl 1 sealed" in out
    assert orchestrators_started(vellum) == [resident.pid, add.pid]
    (row,) = vellum.list_json()
    wget = row["results"]["wget"]
    assert (wget["status"], wget["attempts"]) == ("failed", 2), wget  # one in each orchestrator


def test_ctrl_c_after_add_wait_handed_over_stops_only_the_waiting(
    vellum: Vellum, live_site: LiveSite
) -> None:
    env = {**BUSY_ENV, "MAX_ATTEMPTS": "1"}
    resident = start_orchestrator(vellum, **env)
    add = vellum.start("add", "--wait", live_site.url("/slow"), **env)
    try:
        wait_for(lambda: waiting_for_the_orchestrator(vellum, add), timeout=30,
                 what="add --wait to wait for the orchestrator")  # fmt: skip
        add.send_signal(signal.SIGINT)
        out, err = add.communicate(timeout=30)
        wait_until_sealed(vellum, crawls=1)  # by the orchestrator, after wget's timeout
    finally:
        stop(add)
        end(resident)

    assert add.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert f"Stopped waiting; crawl 1 goes on in the orchestrator (pid {resident.pid})." in out
    assert "sealed" not in out
    assert not waiting_for_the_orchestrator(vellum, add)  # its FIFO went with it
    assert orchestrators_started(vellum) == [resident.pid]


def test_add_wait_leaves_no_crawl_to_an_orchestrator_on_another_database(
    vellum: Vellum, live_site: LiveSite
) -> None:
    """One DATA_DIR, two databases (supervisord's orchestrator with a DATABASE_URL, a shell's
    ``add`` without): the orchestrator would never see the crawl, so ``add --wait`` archives
    it itself instead of waiting for it."""
    env = {"EXTRACTORS": "wget,title"}
    other = {"DATABASE_URL": f"sqlite:///{vellum.data_dir / 'other.sqlite3'}"}
    migrated = vellum.manage("migrate", "--no-input", **other)
    assert migrated.returncode == 0, migrated.stderr
    resident = start_orchestrator(vellum, **env, **other)
    try:
        done = vellum.manage("add", "--wait", live_site.url("/page2.html"),
                             timeout=CRAWL_TIMEOUT, **env)  # fmt: skip
        still_running = resident.poll() is None
    finally:
        end(resident)

    assert done.returncode == 0, done.stderr
    assert "The orchestrator running on this machine" not in done.stdout
    assert "Crawl 1 sealed" in done.stdout
    assert still_running
    started = orchestrators_started(vellum)
    assert len(started) == 2 and started[0] == resident.pid  # add --wait ran one of its own
    (row,) = vellum.list_json()
    assert row["results"]["wget"]["status"] == "succeeded"
