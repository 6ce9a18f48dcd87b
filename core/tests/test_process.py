"""run_command() bounds (core/extractors/process.py): output size, and dying with its parent.

The commands are small real programs (Python, dd, sleep) so that the kernel's own limits and
signals are what is tested, not a stand-in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings

from archive.testing import child_pids, is_running
from core.extractors import process
from core.extractors.browser import close_shared_browser
from core.extractors.process import OutputLimit, run_command

MiB = 1024**2
TIMEOUT = 20  # seconds: far longer than any command here needs


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def watched(tmp_path: Path) -> Path:
    folder = tmp_path / "watched"
    folder.mkdir()
    return folder


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_a_file_growing_past_file_bytes_is_stopped_at_the_limit(
    watched: Path, tmp_path: Path
) -> None:
    # dd gets SIGXFSZ from the kernel when its file reaches the limit.
    limit = OutputLimit(folder=watched, file_bytes=1 * MiB, total_bytes=10 * MiB)

    done = run_command(
        ["dd", "if=/dev/zero", "of=big", "bs=64k", "count=80"],  # 5 MiB unbounded
        cwd=watched,
        timeout=TIMEOUT,
        log_path=tmp_path / "cmd.log",
        limit=limit,
    )

    assert done.too_large
    assert not done.timed_out
    assert done.exit_code is None
    assert (watched / "big").stat().st_size == 1 * MiB + 1
    assert sorted(p.name for p in watched.iterdir()) == ["big"]  # no core dump beside it


def test_a_file_outside_the_folder_is_bounded_too(watched: Path, tmp_path: Path) -> None:
    # Like wget's WARC temporary file in /tmp: the polled folder never sees it, the kernel does.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    limit = OutputLimit(folder=watched, file_bytes=1 * MiB, total_bytes=10 * MiB)

    done = run_command(
        ["dd", "if=/dev/zero", f"of={elsewhere / 'big'}", "bs=64k", "count=80"],
        cwd=watched,
        timeout=TIMEOUT,
        log_path=tmp_path / "cmd.log",
        limit=limit,
    )

    assert done.too_large
    assert (elsewhere / "big").stat().st_size == 1 * MiB + 1


def test_a_tool_that_ignores_sigxfsz_is_still_reported_too_large(
    watched: Path, tmp_path: Path
) -> None:
    # Python ignores SIGXFSZ, so its write fails with EFBIG instead; it then exits 0 regardless.
    limit = OutputLimit(folder=watched, file_bytes=1 * MiB, total_bytes=10 * MiB)
    code = """
        import contextlib
        with open("big", "wb") as f, contextlib.suppress(OSError):
            for _ in range(80):
                f.write(bytes(65536))
    """

    done = run_command(
        python(code), cwd=watched, timeout=TIMEOUT, log_path=tmp_path / "cmd.log", limit=limit
    )

    assert done.too_large
    assert done.exit_code is None
    assert (watched / "big").stat().st_size == 1 * MiB + 1


def test_many_small_files_past_total_bytes_are_stopped_while_running(
    watched: Path, tmp_path: Path
) -> None:
    limit = OutputLimit(folder=watched, file_bytes=1 * MiB, total_bytes=2 * MiB)
    # 100 files of 100 KiB (10 MiB), 20 a second: the limit is passed after about a second.
    code = """
        import time
        for n in range(100):
            with open(f"part-{n}", "wb") as f:
                f.write(bytes(102400))
            time.sleep(0.05)
        open("finished", "w").close()
    """
    started = time.monotonic()

    done = run_command(
        python(code), cwd=watched, timeout=TIMEOUT, log_path=tmp_path / "cmd.log", limit=limit
    )

    assert done.too_large
    assert not done.timed_out
    assert time.monotonic() - started < TIMEOUT
    assert not (watched / "finished").exists()
    # Stopped at the first poll past the limit: at most a poll's worth of files more.
    assert 2 * MiB < folder_bytes(watched) <= 2 * MiB + 4 * 102400


def test_output_within_the_limit_is_not_too_large(watched: Path, tmp_path: Path) -> None:
    limit = OutputLimit(folder=watched, file_bytes=1 * MiB, total_bytes=2 * MiB)

    done = run_command(
        ["dd", "if=/dev/zero", "of=exact", "bs=1024", "count=1024"],  # exactly file_bytes
        cwd=watched,
        timeout=TIMEOUT,
        log_path=tmp_path / "cmd.log",
        limit=limit,
    )

    assert not done.too_large
    assert done.exit_code == 0
    assert (watched / "exact").stat().st_size == 1 * MiB


def test_without_a_limit_nothing_is_bounded(watched: Path, tmp_path: Path) -> None:
    done = run_command(
        ["dd", "if=/dev/zero", "of=big", "bs=64k", "count=48"],  # 3 MiB
        cwd=watched,
        timeout=TIMEOUT,
        log_path=tmp_path / "cmd.log",
    )

    assert not done.too_large
    assert done.exit_code == 0
    assert (watched / "big").stat().st_size == 3 * MiB


def test_env_is_added_to_the_inherited_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VELLUM_INHERITED", "kept")
    monkeypatch.setenv("VELLUM_OVERRIDDEN", "before")
    code = """
        import os
        print(os.environ["VELLUM_INHERITED"], os.environ["VELLUM_OVERRIDDEN"],
              os.environ["VELLUM_ADDED"], os.environ["LC_ALL"])
    """

    done = run_command(
        python(code),
        cwd=tmp_path,
        timeout=TIMEOUT,
        log_path=tmp_path / "cmd.log",
        capture_stdout=True,
        env={"VELLUM_ADDED": "new", "VELLUM_OVERRIDDEN": "after"},
    )

    assert done.exit_code == 0
    assert done.stdout.split() == ["kept", "after", "new", "C"]
    assert os.environ["VELLUM_OVERRIDDEN"] == "before"  # the caller's own environment is untouched


# --- waiting for the end: pidfd, or Popen's polling where there is none --------------------------


@pytest.fixture(params=["pidfd", "polling"])
def waiting(request, monkeypatch: pytest.MonkeyPatch):
    """Run the test with each way _wait learns that a command ended: Linux's pidfd (checked to
    be the one used), and Popen.wait's polling, which serves where os.pidfd_open is missing or
    refused."""
    opened = []
    if request.param == "polling":

        def refused(pid: int) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(process.os, "pidfd_open", refused, raising=False)
    elif hasattr(os, "pidfd_open"):
        real = os.pidfd_open
        monkeypatch.setattr(process.os, "pidfd_open", lambda pid: opened.append(pid) or real(pid))
    else:
        pytest.skip("no os.pidfd_open on this system")
    yield request.param
    assert bool(opened) == (request.param == "pidfd")


def test_a_command_that_ends_gives_its_exit_code(waiting: str, tmp_path: Path) -> None:
    done = run_command(
        python("import sys; sys.exit(3)"), cwd=tmp_path, timeout=TIMEOUT, log_path=tmp_path / "l"
    )

    assert done.exit_code == 3
    assert not done.timed_out and not done.too_large


def test_a_command_past_its_timeout_is_killed_with_its_helpers(
    waiting: str, tmp_path: Path
) -> None:
    # A shell that forks a helper and waits for it: the whole group goes at the deadline.
    code = """
        import subprocess, sys
        helper = subprocess.Popen(["sleep", "60"])
        print(helper.pid, flush=True)
        helper.wait()
    """
    started = time.monotonic()

    done = run_command(
        python(code), cwd=tmp_path, timeout=1, log_path=tmp_path / "l", capture_stdout=True
    )

    assert done.timed_out and done.exit_code is None
    assert time.monotonic() - started < TIMEOUT
    assert wait_until(lambda: not is_running(int(done.stdout)), 5), "the helper outlived it"


def test_a_command_is_killed_when_the_actor_is_asked_to_stop(
    waiting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "cancel_requested", process.threading.Event())
    process.cancel_requested.set()

    with pytest.raises(process.CommandCancelled, match="stopped while running sleep"):
        run_command(["sleep", "60"], cwd=tmp_path, timeout=TIMEOUT, log_path=tmp_path / "l")


# --- what the extractors import lazily -----------------------------------------------------------


def test_every_extractors_lazy_imports_can_be_imported() -> None:
    """A misspelt name would only be logged, at debug, and the preload silently lost."""
    import importlib

    from core.extractors.registry import EXTRACTORS

    declared = {module for extractor in EXTRACTORS for module in extractor.lazy_imports}
    assert {"bs4.dammit", "playwright.sync_api", "core.extractors.article"} <= declared
    for module in sorted(declared):
        importlib.import_module(module)


# --- dying with the parent ---------------------------------------------------------------------

PARENT = """
    import sys
    from pathlib import Path
    from core.extractors.process import run_command
    folder = Path(sys.argv[1])
    run_command(["sleep", "60"], cwd=folder, timeout=120, log_path=folder / "sleep.log")
"""


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_command_dies_when_the_process_that_ran_it_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(PARENT), str(tmp_path)],
        cwd=settings.BASE_DIR,
        env={**os.environ, "PYTHONPATH": str(settings.BASE_DIR)},
    )
    child = None
    try:
        assert wait_until(lambda: child_pids(parent.pid), 20), "sleep never started"
        (child,) = child_pids(parent.pid)
        assert (Path("/proc") / str(child) / "cmdline").read_bytes().split(b"\0")[0] == b"sleep"
        assert os.getsid(child) == child  # its own session: killing the parent's group misses it

        parent.send_signal(signal.SIGKILL)  # as the OOM killer or `kill -9` would
        parent.wait(timeout=10)

        assert wait_until(lambda: not is_running(child), 2), "sleep outlived its parent"
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if child is not None and is_running(child):
            os.kill(child, signal.SIGKILL)


def test_shutdown_hooks_run_newest_first_once_each_and_past_a_failing_one(monkeypatch, caplog):
    monkeypatch.setattr(process, "_shutdown_hooks", [])
    ran = []

    def first():
        ran.append("first")

    def broken():
        raise RuntimeError("stuck")

    def last():
        ran.append("last")

    for hook in (first, broken, last, first):
        assert process.on_shutdown(hook) is hook
    process.run_shutdown_hooks()

    assert ran == ["last", "first"]
    assert "shutdown hook" in caplog.text and "broken" in caplog.text


def test_the_shared_browser_registers_its_own_shutdown_hook():
    """The actor runs the hooks without knowing of Chromium (orchestrator/actor.py)."""
    assert close_shared_browser in process._shutdown_hooks
