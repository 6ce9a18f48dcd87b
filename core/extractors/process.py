"""Run an extractor's binary as a subprocess in its own process group, with a timeout.

On timeout, or when the actor is asked to stop, the whole group is killed (SIGKILL), so a tool that
forks helpers (wget, chromium) leaves nothing behind (DESIGN.md §3).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Set by the actor's signal handler; a running command is killed at the next poll.
cancel_requested = threading.Event()

POLL_SECONDS = 0.1
MAX_CAPTURE_BYTES = 1024 * 1024


class CommandCancelled(Exception):
    """The actor was asked to stop while the command ran; its process group was killed."""


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: exit code (None if killed), timeout flag, seconds, stdout."""

    exit_code: int | None
    timed_out: bool
    duration: float
    stdout: str = ""


def run_command(
    cmd: list[str],
    *,
    cwd: Path,
    timeout: float,
    log_path: Path,
    capture_stdout: bool = False,
) -> CommandResult:
    """Run ``cmd`` in ``cwd`` for at most ``timeout`` seconds; append its stderr to ``log_path``.

    stdout goes to the log too, unless ``capture_stdout`` (then up to 1 MiB is returned).
    Raises CommandCancelled if ``cancel_requested`` is set while it runs, and OSError if the
    binary cannot be started.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # Captured stdout goes to a temporary file, not a pipe: a pipe nobody reads while the command
    # runs would fill up (64 KiB) and stall it until the timeout.
    with open(log_path, "ab") as log, tempfile.TemporaryFile() as captured:
        log.write(f"$ {' '.join(cmd)}\n".encode())
        log.flush()
        process = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=captured if capture_stdout else log,
            stderr=log,
            start_new_session=True,
        )
        timed_out = _wait(process, timeout)
        captured.seek(0)
        stdout = captured.read(MAX_CAPTURE_BYTES) if capture_stdout else b""
    return CommandResult(
        exit_code=None if timed_out else process.returncode,
        timed_out=timed_out,
        duration=time.monotonic() - started,
        stdout=stdout.decode("utf-8", "replace"),
    )


def _wait(process: subprocess.Popen, timeout: float) -> bool:
    """Wait for ``process``; kill its group on timeout or cancel. Return True if it timed out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            process.wait(timeout=POLL_SECONDS)
            return False
        except subprocess.TimeoutExpired:
            pass
        if cancel_requested.is_set():
            _kill_group(process)
            raise CommandCancelled(f"stopped while running {process.args[0]}")
        if time.monotonic() >= deadline:
            _kill_group(process)
            return True


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def find_binary(name: str) -> str | None:
    """Return the absolute path of ``name`` on PATH, or None."""
    return shutil.which(name)


@lru_cache(maxsize=32)
def binary_version(path: str) -> str:
    """Return the first line of ``path --version`` (at most 128 chars), or "" if it fails."""
    try:
        completed = subprocess.run(
            [path, "--version"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (completed.stdout or completed.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0][:128] if text else ""
