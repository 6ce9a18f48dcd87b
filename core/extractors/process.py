"""Run an extractor's binary as a subprocess in its own process group, bounded in time and size.

On timeout, when what it writes grows past its limit, or when the actor is asked to stop, the
whole group is killed (SIGKILL), so a tool that forks helpers (wget, chromium) leaves nothing
behind (DESIGN.md §3). The command also dies with the process that started it: util-linux's
``setpriv --pdeathsig KILL`` asks the kernel to SIGKILL it when its parent dies (prctl
PR_SET_PDEATHSIG), so an actor that is itself killed (SIGKILL, out of memory) does not leave a
download running in its detached session; ``prlimit --fsize`` bounds any one file it writes.
Both are small exec wrappers rather than a ``preexec_fn``, which would make every spawn fork the
whole actor instead of vfork-ing it (measured: 6.7 ms a command instead of 1.5 ms).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path

from core.extractors import preloading
from core.extractors.addresses import Refusal
from core.extractors.egress import EgressProxy
from core.extractors.redaction import redact_command

# Set by the actor's signal handler; a running command is killed at the next poll.
cancel_requested = threading.Event()

logger = logging.getLogger(__name__)
_shutdown_hooks: list[Callable[[], None]] = []

POLL_SECONDS = 0.1
MAX_CAPTURE_BYTES = 1024 * 1024

# util-linux, part of every Debian and Ubuntu system; without them commands run unconfined.
SETPRIV = shutil.which("setpriv")
PRLIMIT = shutil.which("prlimit")


class CommandCancelled(Exception):
    """The actor was asked to stop while the command ran; its process group was killed."""


@dataclass(frozen=True)
class OutputLimit:
    """How much a command may write, in bytes.

    ``file_bytes`` bounds any one file the command writes, wherever it is (the kernel stops the
    write: RLIMIT_FSIZE, then SIGXFSZ); ``total_bytes`` bounds everything under ``folder``
    together (polled every POLL_SECONDS while the command runs, and once more when it ends).
    """

    folder: Path
    file_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left.

    ``exit_code`` is None if the command was killed for running too long (``timed_out``) or for
    writing too much (``too_large``); ``duration`` is in seconds; ``stdout`` is the captured
    output, if asked for.
    """

    exit_code: int | None
    timed_out: bool
    duration: float
    stdout: str = ""
    too_large: bool = False
    refusals: list[Refusal] = field(default_factory=list)  # what the address policy refused
    unreachable: list[Refusal] = field(default_factory=list)  # hosts the proxy could not reach


class _Stop(enum.Enum):
    """Why ``_wait`` killed the command."""

    TIMEOUT = "timeout"
    TOO_LARGE = "too large"


def run_command(
    cmd: list[str],
    *,
    cwd: Path,
    timeout: float,
    log_path: Path,
    capture_stdout: bool = False,
    limit: OutputLimit | None = None,
    env: dict[str, str] | None = None,
) -> CommandResult:
    """Run ``cmd`` in ``cwd`` for at most ``timeout`` seconds; append its stderr to ``log_path``.

    stdout goes to the log too, unless ``capture_stdout`` (then up to 1 MiB is returned). With a
    ``limit``, a command that writes more than it allows is killed and reported ``too_large``.
    ``env`` adds variables to (or overrides) the inherited environment, which runs in the C locale.
    Raises CommandCancelled if ``cancel_requested`` is set while it runs, and OSError if the
    binary cannot be started.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # Captured stdout goes to a temporary file, not a pipe: a pipe nobody reads while the command
    # runs would fill up (64 KiB) and stall it until the timeout.
    # Every fetch of the tool passes the address policy (core/extractors/egress.py).
    with (
        EgressProxy() as proxy,
        open(log_path, "ab") as log,
        tempfile.TemporaryFile() as captured,
    ):
        log.write(f"$ {' '.join(redact_command(cmd))}\n".encode())  # no credentials in logs
        log.flush()
        process = subprocess.Popen(
            _confined(cmd, limit),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=captured if capture_stdout else log,
            stderr=log,
            start_new_session=True,
            # The C locale: wget's messages, which its log reader matches, read the same anywhere.
            env={**os.environ, "LC_ALL": "C", **proxy.environment(), **(env or {})},
        )
        preloading.start()  # what the actor's extractors import later, while it only waits
        stopped = _wait(process, timeout, limit, tool=cmd[0])
        captured.seek(0)
        stdout = captured.read(MAX_CAPTURE_BYTES) if capture_stdout else b""
    too_large = stopped is _Stop.TOO_LARGE or (
        stopped is None and limit is not None and _wrote_too_much(process, limit)
    )
    return CommandResult(
        exit_code=None if stopped or too_large else process.returncode,
        timed_out=stopped is _Stop.TIMEOUT,
        duration=time.monotonic() - started,
        stdout=stdout.decode("utf-8", "replace"),
        too_large=too_large,
        refusals=proxy.refusals,
        unreachable=proxy.unreachable,
    )


def _confined(cmd: list[str], limit: OutputLimit | None) -> list[str]:
    """Return ``cmd`` behind the wrappers that make it die with its parent and, with a
    ``limit``, stop any one file at ``limit.file_bytes`` (RLIMIT_FSIZE: the kernel refuses the
    write and sends SIGXFSZ; one byte more than allowed shows the excess) without a core dump."""
    prefix = []
    if SETPRIV:
        prefix += [SETPRIV, "--pdeathsig", "KILL", "--"]
    if limit is not None and PRLIMIT:
        prefix += [PRLIMIT, f"--fsize={limit.file_bytes + 1}", "--core=0", "--"]
    return prefix + cmd


def _wait(
    process: subprocess.Popen, timeout: float, limit: OutputLimit | None, *, tool: str
) -> _Stop | None:
    """Wait for ``process``; kill its group on timeout, excess output or cancel; say why."""
    deadline = time.monotonic() + timeout
    with _exit_watch(process) as exited:
        while True:
            if exited(POLL_SECONDS):
                process.wait()
                return None
            if stopped := _stop_reason(process, deadline, limit, tool):
                return stopped


@contextlib.contextmanager
def _exit_watch(process: subprocess.Popen):
    """Yield ``exited(seconds)``: wait up to ``seconds`` for ``process`` to end, True once it
    has (not yet reaped).

    Linux's pidfd (5.3 and later) wakes the waiter as the process exits. Popen.wait with a
    timeout sleeps instead, in steps that double up to 50 ms: a command of 70 ms was seen to
    end at 101 ms, and its actor held the host's place (HOST_CONCURRENCY) that much longer.
    Elsewhere, or where pidfd_open is refused, that polling serves.
    """
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
        yield partial(_popen_exited, process)
        return
    try:
        yield lambda seconds: bool(select.select([pidfd], [], [], seconds)[0])
    finally:
        os.close(pidfd)


def _popen_exited(process: subprocess.Popen, seconds: float) -> bool:
    try:
        process.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def _stop_reason(
    process: subprocess.Popen, deadline: float, limit: OutputLimit | None, tool: str
) -> _Stop | None:
    """Between two waits: kill ``process``'s group and say why when it is past ``deadline`` or
    over ``limit``; raise CommandCancelled when the actor was asked to stop; else None."""
    if cancel_requested.is_set():
        _kill_group(process)
        raise CommandCancelled(f"stopped while running {tool}")
    if limit is not None and _over(limit):
        _kill_group(process)
        return _Stop.TOO_LARGE
    if time.monotonic() >= deadline:
        _kill_group(process)
        return _Stop.TIMEOUT
    return None


def _wrote_too_much(process: subprocess.Popen, limit: OutputLimit) -> bool:
    """Tell whether a command that ended by itself passed its ``limit``.

    Killed by SIGXFSZ: a file reached ``file_bytes``. A tool that ignores the signal gets EFBIG
    instead and leaves a file one byte over the limit, which ``_over`` sees.
    """
    return process.returncode == -signal.SIGXFSZ or _over(limit)


def _over(limit: OutputLimit) -> bool:
    """Tell whether ``limit.folder`` holds more than ``total_bytes``, or one file over
    ``file_bytes``."""
    total = 0
    for size in _file_sizes(limit.folder):
        if size > limit.file_bytes:
            return True
        total += size
    return total > limit.total_bytes


def _file_sizes(folder: Path):
    """Yield the size in bytes of every file under ``folder`` (symlinks not followed).

    Files that vanish while the folder is read (a tool renaming its temporary files) are skipped.
    """
    stack = [folder]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        yield entry.stat(follow_symlinks=False).st_size


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


# Where the project installs tools of its own (bash .ci/install): the virtualenv's bin (yt-dlp)
# and node_modules/.bin (single-file). They are searched after PATH, so a tool on PATH wins and
# an actor started without the virtualenv on its PATH still finds them.
PROJECT_DIR = Path(__file__).resolve().parents[2]
PROJECT_BIN_DIRS = (Path(sys.executable).parent, PROJECT_DIR / "node_modules" / ".bin")


def process_state(pid: int) -> str | None:
    """Return the state of process ``pid`` as /proc/<pid>/stat gives it (``R``, ``S``, ``D``,
    ``Z`` a zombie, ``T`` or ``t`` stopped: proc(5)), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]  # after the command name, which may hold ") "


def find_binary(name: str) -> str | None:
    """Return the absolute path of ``name`` on PATH or in ``PROJECT_BIN_DIRS``, or None."""
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), *map(str, PROJECT_BIN_DIRS)])
    return shutil.which(name, path=search)


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


def on_shutdown(hook: Callable[[], None]) -> Callable[[], None]:
    """Register ``hook`` to run when this process's worker stops (``run_shutdown_hooks``), and
    return it. This is how something an extractor keeps between runs, such as the shared
    browser, is released by the actor that never heard of it. A hook registered twice runs once.
    """
    if hook not in _shutdown_hooks:
        _shutdown_hooks.append(hook)
    return hook


def run_shutdown_hooks() -> None:
    """Run every hook ``on_shutdown`` registered, newest first. A hook that raises is logged
    and the others still run: one stuck resource must not leave the rest behind."""
    for hook in reversed(_shutdown_hooks):
        try:
            hook()
        except Exception:
            logger.exception("shutdown hook %s failed", getattr(hook, "__qualname__", hook))
