"""Measure what an idle orchestrator costs: CPU share of one core and resident memory.

``manage.py orchestrator`` is started in a fresh DATA_DIR (after an untimed ``manage.py init``)
with nothing queued. Once it has logged its start and settled (``--settle`` seconds), its CPU
time (utime + stime of /proc/<pid>/stat, in clock ticks) is read at the start and the end of
``--seconds`` (default 60); the share is their difference over the wall time between the two
reads. Its resident memory is read from /proc/<pid>/status (VmRSS, and VmHWM: the peak) at the
end, and so is the count of its children (none while idle). Then it is stopped with SIGINT.

Issue 19's goal: under 0.2 % of a core over 60 s, and RSS under 80 MB. With ``--repo`` another
checkout's manage.py runs (before/after figures). The exit status is 1 when the orchestrator
exits early.

Run it from the repository root:

    .venv/bin/python bench/idle.py [--seconds 60] [--settle 5] [--repo PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from throughput import REPO, log

GOAL_CPU_PERCENT = 0.2
GOAL_RSS_MB = 80
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` in clock ticks (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values


def children(pid: int) -> int:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return len(path.read_text().split()) if path.exists() else 0


def measure(repo: Path, seconds: float, settle: float, folder: Path) -> dict:
    """Start an orchestrator in a fresh DATA_DIR under ``folder``; measure it idle."""
    data_dir = folder / "data"
    env = {**os.environ, "DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "archive.settings"}
    manage = [sys.executable, str(repo / "manage.py")]
    subprocess.run([*manage, "init"], cwd=repo, env=env, check=True, capture_output=True)
    process = subprocess.Popen(
        [*manage, "orchestrator"], cwd=repo, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        log_path = data_dir / "logs" / "orchestrator.log"
        while not (log_path.exists() and "orchestrator started" in log_path.read_text()):
            if process.poll() is not None:
                sys.exit(f"error: the orchestrator exited with {process.returncode}")
            time.sleep(0.1)
        time.sleep(settle)
        start_ticks, start = cpu_ticks(process.pid), time.monotonic()
        time.sleep(seconds)
        end_ticks, end = cpu_ticks(process.pid), time.monotonic()
        memory = memory_mb(process.pid)
        actors = children(process.pid)
        alive = process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    cpu_seconds = (end_ticks - start_ticks) / TICKS
    return {
        "repo": str(repo),
        "seconds": end - start,
        "cpu_seconds": cpu_seconds,
        "cpu_percent": 100 * cpu_seconds / (end - start),
        "rss_mb": memory["VmRSS"],
        "peak_rss_mb": memory["VmHWM"],
        "children": actors,
        "stayed_up": alive,
        "load": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="Seconds measured (60).")
    parser.add_argument("--settle", type=float, default=5, help="Seconds before measuring (5).")
    parser.add_argument("--repo", type=Path, default=REPO, help="Checkout whose manage.py runs.")
    parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="vellum-idle-"))
    try:
        log(f"measuring an idle orchestrator for {args.seconds:g} s ...")
        result = measure(args.repo.resolve(), args.seconds, args.settle, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        cpu_ok = result["cpu_percent"] < GOAL_CPU_PERCENT
        rss_ok = result["rss_mb"] < GOAL_RSS_MB
        print(f"checkout   {result['repo']}")
        print(f"load       {result['load']} ({os.cpu_count()} CPUs)")
        print(f"CPU        {result['cpu_seconds']:.2f} s in {result['seconds']:.0f} s = "
              f"{result['cpu_percent']:.2f} % of a core ({'under' if cpu_ok else 'OVER'} "
              f"the {GOAL_CPU_PERCENT} % goal)")  # fmt: skip
        print(f"memory     RSS {result['rss_mb']:.0f} MB, peak {result['peak_rss_mb']:.0f} MB "
              f"({'under' if rss_ok else 'OVER'} the {GOAL_RSS_MB} MB goal)")  # fmt: skip
        print(f"children   {result['children']} (actors running while idle)")
    return 0 if result["stayed_up"] else 1


if __name__ == "__main__":
    sys.exit(main())
