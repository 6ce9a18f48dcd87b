"""Measure how long one URL takes with ``manage.py add --wait``, against the raw commands.

One page of the Python documentation (Debian's python3-doc, served on 127.0.0.1 as in
bench/throughput.py; default ``library/os.html``) is archived, in turn, ``--rounds`` times each
(default 5):

- raw: the commands a person would run for the same four outputs, one after the other:
  ``curl -D`` (headers), ``wget --warc-file --page-requisites`` (the page, its requisites and a
  WARC) and ``curl`` of ``/favicon.ico``; timed from the first command's start to the last one's
  end;
- Vellum: ``manage.py add --wait URL`` in a fresh DATA_DIR (after an untimed ``manage.py init``)
  with EXTRACTORS=headers,wget,title,favicon, timed from the start of that process to its exit
  (issue 19's "from process start"). The checkout's bytecode is compiled first, once and
  untimed, as an installed copy has it (pip compiles what it installs, and Python caches what
  a checkout imports): where PYTHONDONTWRITEBYTECODE is set, as on these machines, every
  process would otherwise compile Vellum's ~140 modules from source again, some 0.1 s of each
  start-up that no user pays. ``--no-compile`` leaves the checkout as it is. Afterwards
  ``manage.py status --json`` must show the snapshot sealed. Its logs give where the time
  went: until the orchestrator started (the process's own start-up: Python, Django, the
  crawl), until the crawl sealed (the pipeline), and until the process exited. With
  ``--resident`` an idle ``manage.py orchestrator`` is started first in the same DATA_DIR
  (untimed), as supervisord keeps one running, and ``add --wait`` leaves the crawl to it
  (orchestrator/handover.py): start-up then ends where the crawl is handed over.

The two alternate (raw, Vellum, raw, Vellum, ...), so each ratio compares runs made under the same
load; the report gives medians, the median of the per-round ratios, and the machine's load
average before and after (these machines are shared: quote ratios, not seconds). ``--repo``
runs another checkout's manage.py (e.g. a worktree of an older commit) for before/after figures
in one run. The exit status is 1 when a snapshot was not sealed.

Run it from the repository root:

    .venv/bin/python bench/one_url.py [--rounds 5] [--page library/os.html] [--repo PATH]
                                      [--json] [--no-compile] [--resident]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from throughput import DOCS_DIR, REPO, DocsServer, ensure_docs, load, log, raw_commands

EXTRACTORS = "headers,wget,title,favicon"
TIMEOUT = 300  # seconds one add --wait may take
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \d+ \w+ [\w.]+: (.*)$")


# --- raw commands --------------------------------------------------------------------------------


def run_raw(url: str, folder: Path) -> float:
    """Run the raw commands one after the other in ``folder``; return their wall seconds."""
    folder.mkdir(parents=True)
    started = time.monotonic()
    for cmd in raw_commands(url, folder):
        subprocess.run(cmd, cwd=folder, check=False, stdin=subprocess.DEVNULL)
    return time.monotonic() - started


# --- Vellum --------------------------------------------------------------------------------------


def vellum_env(data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "archive.settings",
        "EXTRACTORS": EXTRACTORS,
    }


def run_vellum(url: str, folder: Path, repo: Path, *, resident: bool = False) -> dict:
    """Archive ``url`` with ``add --wait`` in a fresh DATA_DIR; return its seconds, the phases
    read from its logs and whether the snapshot was sealed. ``resident``: an orchestrator
    started first (untimed), idle, as supervisord keeps one, archives it."""
    data_dir = folder / "data"
    env = vellum_env(data_dir)
    manage = [sys.executable, str(repo / "manage.py")]
    subprocess.run([*manage, "init"], cwd=repo, env=env, check=True, capture_output=True)
    orchestrator = start_orchestrator(manage, repo, env, data_dir) if resident else None
    try:
        wall_start = time.time()
        started = time.monotonic()
        done = subprocess.run(
            [*manage, "add", "--wait", url], cwd=repo, env=env, capture_output=True,
            timeout=TIMEOUT,
        )  # fmt: skip
        seconds = time.monotonic() - started
    finally:
        if orchestrator is not None:
            stop_orchestrator(orchestrator)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace")[-2000:]
        sys.exit(f"error: add --wait exited with {done.returncode}:\n{tail}")
    status = subprocess.run(
        [*manage, "status", "--json"], cwd=repo, env=env, check=True, capture_output=True
    )
    sealed = json.loads(status.stdout)["snapshot"].get("sealed", 0) == 1
    marks = phases(data_dir / "logs", wall_start)
    # A resident orchestrator's start (which may come a few ms before: start_orchestrator polls)
    # and stop fall outside the timed command; log stamps are cut to milliseconds, hence 10 ms
    # of margin at the end.
    marks = {mark: at for mark, at in marks.items() if 0 <= at <= seconds + 0.01}
    return {"seconds": seconds, "phases": marks, "sealed": sealed}


def stop_orchestrator(process: subprocess.Popen) -> None:
    """Stop a resident orchestrator (TERM), or kill it when it does not stop within 60 s."""
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_orchestrator(
    manage: list[str], repo: Path, env: dict, data_dir: Path
) -> subprocess.Popen:
    """Start ``manage.py orchestrator`` and return its process once it listens (its log says
    it started: its FIFO is made before that line), with nothing to do yet."""
    process = subprocess.Popen([*manage, "orchestrator"], cwd=repo, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    log_file = data_dir / "logs" / "orchestrator.log"
    deadline = time.monotonic() + 60
    while not (log_file.exists() and "orchestrator started" in log_file.read_text()):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            sys.exit("error: the resident orchestrator did not start")
        time.sleep(0.05)
    return process


def compile_bytecode(repo: Path) -> None:
    """Write the bytecode of ``repo``'s Python modules into its ``__pycache__`` folders (ignored
    by git), as Python does on a checkout's first run unless PYTHONDONTWRITEBYTECODE is set."""
    folders = [
        str(repo / name) for name in ("manage.py", "archive", "core", "crawls", "orchestrator")
    ]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip


def phases(logs: Path, wall_start: float) -> dict[str, float]:
    """Seconds from the process's start to the orchestrator's start, the first claim, the crawl's
    seal and the orchestrator's stop, read from the logs (local time, milliseconds)."""
    marks: dict[str, float] = {}
    patterns = {
        "orchestrator started": "orchestrator started",
        "handed over": "left to the orchestrator",  # add --wait, with --resident
        "first claim": "claimed ",
        "crawl sealed": "crawl ",  # "crawl 1 sealed"
        "orchestrator stopped": "orchestrator stopped",
    }
    for name in ("orchestrator.log", "actors.log"):
        path = logs / name
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        for line in lines:
            match = LOG_TIME.match(line)
            if not match:
                continue
            stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp() - wall_start
            for mark, text in patterns.items():
                found = match[2].startswith(text) if mark == "crawl sealed" else text in match[2]
                if found and (mark != "crawl sealed" or match[2].endswith(" sealed")):
                    marks[mark] = min(stamp, marks.get(mark, stamp))
    return marks


# --- rounds and report ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="Raw/Vellum pairs (default 5).")
    parser.add_argument("--page", default="library/os.html", help="Page of the docs to archive.")
    parser.add_argument("--repo", type=Path, default=REPO, help="Checkout whose manage.py runs.")
    parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
    parser.add_argument(
        "--no-compile", action="store_true", help="Do not compile the checkout's bytecode first."
    )
    parser.add_argument(
        "--resident",
        action="store_true",
        help="Start an orchestrator first in each round (untimed), as supervisord runs one: "
        "add --wait leaves the crawl to it.",
    )
    args = parser.parse_args(argv)
    ensure_docs()
    if not args.no_compile:
        compile_bytecode(args.repo.resolve())
    root = Path(tempfile.mkdtemp(prefix="vellum-one-url-"))
    load_before = load()
    rounds = []
    try:
        with DocsServer(DOCS_DIR) as server:
            url = f"{server.base_url}/{args.page}"
            run_raw(url, root / "warm-up")  # the page in the page cache for both
            for number in range(1, args.rounds + 1):
                raw = run_raw(url, root / f"raw-{number}")
                vellum = run_vellum(
                    url, root / f"vellum-{number}", args.repo.resolve(), resident=args.resident
                )
                rounds.append({"raw": raw, **vellum, "ratio": vellum["seconds"] / raw})
                log(f"round {number}: raw {raw:.2f} s, vellum {vellum['seconds']:.2f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {
        "page": args.page,
        "extractors": EXTRACTORS,
        "repo": str(args.repo.resolve()),
        "bytecode_compiled": not args.no_compile,
        "resident_orchestrator": args.resident,
        "load_before": load_before,
        "load_after": load(),
        "cpus": os.cpu_count(),
        "rounds": rounds,
        "raw_median": statistics.median(r["raw"] for r in rounds),
        "vellum_median": statistics.median(r["seconds"] for r in rounds),
        "ratio_median": statistics.median(r["ratio"] for r in rounds),
        "phases_median": {
            mark: statistics.median(r["phases"][mark] for r in rounds if mark in r["phases"])
            for mark in dict.fromkeys(mark for r in rounds for mark in r["phases"])
        },
        "all_sealed": all(r["sealed"] for r in rounds),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_report(summary)
    return 0 if summary["all_sealed"] else 1


def print_report(summary: dict) -> None:
    print(f"page         {summary['page']} (Python docs on 127.0.0.1), extractors {EXTRACTORS}")
    compiled = "compiled first" if summary["bytecode_compiled"] else "as it was (--no-compile)"
    print(f"checkout     {summary['repo']} (bytecode {compiled})")
    if summary["resident_orchestrator"]:
        print("orchestrator started first in each round, untimed (--resident)")
    print(f"load         {summary['load_before']} before, {summary['load_after']} after "
          f"({summary['cpus']} CPUs)")  # fmt: skip
    for number, r in enumerate(summary["rounds"], 1):
        print(f"round {number:<6} raw {r['raw']:6.2f} s  vellum {r['seconds']:6.2f} s  "
              f"ratio {r['ratio']:6.1f}")  # fmt: skip
    raw, vellum = summary["raw_median"], summary["vellum_median"]
    print(f"median       raw {raw:6.2f} s  vellum {vellum:6.2f} s  "
          f"ratio {summary['ratio_median']:.1f} (median of the rounds' ratios)")  # fmt: skip
    marks = ", ".join(f"{mark} {s:.2f} s" for mark, s in summary["phases_median"].items())
    print(f"vellum phases (median, from process start): {marks}")
    print(f"check all snapshots sealed: {'yes' if summary['all_sealed'] else 'NO'}")


if __name__ == "__main__":
    sys.exit(main())
