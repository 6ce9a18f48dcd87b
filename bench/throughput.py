"""Measure Vellum's archiving throughput against running its extractors directly.

A real site is served on 127.0.0.1: the Python documentation of Debian's python3-doc package
(/usr/share/doc/python3.11/html, installed with apt-get if missing). N of its pages (default 200,
the first N of ``library/*.html`` in sorted order) are archived twice:

- Vellum: ``manage.py add --file urls.txt --wait`` in a fresh DATA_DIR (after an untimed
  ``manage.py init``), timed from the start of that process to its exit. Afterwards
  ``manage.py status --json`` must show every snapshot sealed.
- Baseline: the very same extractors (``default_profile()``, in registry order) called directly,
  ``should_run`` then ``run(SimpleNamespace(url=url), fresh out_dir)``, page by page, in a
  ProcessPoolExecutor with ACTORS_ARCHIVERESULT workers (the parallelism of Vellum's result
  actors). The workers are started and Django is set up in them before the clock starts: the
  baseline is the extractors' own work and nothing else.

Both runs read the same environment (EXTRACTORS, EXTRACTOR_TIMEOUT, ACTORS_ARCHIVERESULT, ...)
and fetch from the same server, a thread of this process. The report gives both wall times,
pages per second, the CPU seconds of every process each run started (extractor commands
included; the baseline's worker start-up excluded), the ratio Vellum/baseline (the goal is at
most 1.3) and the outcomes per state of both runs, which must match. With ``--rounds K`` the two
runs alternate K times and the medians are reported; the headline ratio is the median of the
rounds' ratios, each measured under the same load. The exit status is 1 when a check fails
(snapshots not all sealed, or outcomes that differ).

Run it from the repository root (a few minutes per round with 200 pages):

    .venv/bin/python bench/throughput.py [--pages 200] [--rounds 1] [--json] [--keep]
                                         [--timeout 3600]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
MANAGE = REPO / "manage.py"
SETTINGS_MODULE = "archive.settings"
DOCS_DIR = Path("/usr/share/doc/python3.11/html")
# The documentation is served on 127.0.0.1, which the address policy refuses unless opened
# (README "Security"); every bench script imports this module, and Vellum's runs inherit it.
os.environ.setdefault("ALLOWED_PRIVATE_NETWORKS", "127.0.0.1")
DOCS_PACKAGE = "python3-doc"
PAGES_GLOB = "library/*.html"
GOAL_RATIO = 1.3
# Outcome (core/extractors/errors.py) -> the ArchiveResult state Vellum records for it.
# A temporary error is retried by Vellum; the baseline does not retry and counts it as backoff.
OUTCOME_STATES = {
    "succeeded": "succeeded",
    "skipped": "skipped",
    "fatal": "failed",
    "temporary": "backoff",
}


@dataclass
class RunResult:
    """One timed run: wall seconds, outcomes per state (``snapshots`` for Vellum only) and the
    CPU seconds (user + system) of every process it ran, extractor commands included."""

    kind: str
    seconds: float
    cpu_seconds: float
    results: dict[str, int]
    snapshots: dict[str, int] = field(default_factory=dict)


def children_cpu() -> float:
    """Return the CPU seconds used so far by this process's waited-for descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- the site ------------------------------------------------------------------------------------


def ensure_docs() -> None:
    """Install python3-doc with apt-get if its HTML is missing; exit with a message on failure."""
    if (DOCS_DIR / "library").is_dir():
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*sudo, "apt-get", "install", "-y", "--no-install-recommends", DOCS_PACKAGE]
    log(f"{DOCS_DIR} is missing: installing {DOCS_PACKAGE}")
    try:
        if subprocess.run(install, env=env).returncode != 0:
            subprocess.run([*sudo, "apt-get", "update"], env=env, check=True)
            subprocess.run(install, env=env, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"error: cannot install {DOCS_PACKAGE} ({error}); install it by hand")
    if not (DOCS_DIR / "library").is_dir():
        sys.exit(f"error: {DOCS_PACKAGE} is installed but {DOCS_DIR}/library is missing")


class QuietHandler(SimpleHTTPRequestHandler):
    """Serve files without logging every request to stderr."""

    def log_message(self, format: str, *args) -> None:
        pass


class DocsServer:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port) serving ``root`` from a thread."""

    def __init__(self, root: Path):
        handler = partial(QuietHandler, directory=str(root))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> DocsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def page_urls(base_url: str, count: int) -> list[str]:
    """Return the URLs of the first ``count`` pages of ``library/*.html``, sorted by path."""
    pages = sorted(DOCS_DIR.glob(PAGES_GLOB))
    if len(pages) < count:
        sys.exit(f"error: only {len(pages)} pages in {DOCS_DIR / PAGES_GLOB}, asked for {count}")
    return [f"{base_url}/{page.relative_to(DOCS_DIR).as_posix()}" for page in pages[:count]]


# --- Django, in this process and in the baseline's workers --------------------------------------


def setup_django(data_dir: str) -> None:
    """Configure Django with archive.settings and ``data_dir`` as DATA_DIR."""
    os.environ["DATA_DIR"] = data_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()


def profile() -> tuple[list[str], int]:
    """Return the extractor names of the default profile and ACTORS_ARCHIVERESULT."""
    from django.conf import settings

    from core.extractors.registry import default_profile

    return default_profile(), settings.ACTORS_ARCHIVERESULT


# --- baseline: the extractors called directly ----------------------------------------------------


def extract(url: str, name: str, out_dir: str) -> str:
    """Run extractor ``name`` on ``url`` into ``out_dir`` as Vellum would; return the state."""
    from core.extractors.registry import get_extractor

    extractor = get_extractor(name)
    snapshot = SimpleNamespace(url=url)
    applies, _reason = extractor.should_run(snapshot)
    if not applies:
        return "skipped"
    Path(out_dir).mkdir(parents=True)
    try:
        output = extractor.run(snapshot, Path(out_dir))
    except OSError:
        return "backoff"  # Vellum's _run_extractor: a temporary error
    except Exception:
        return "failed"
    return OUTCOME_STATES[output.outcome.value]


def _ready() -> tuple[int, float]:
    """Return this worker's pid and the CPU seconds its start-up took."""
    time.sleep(0.2)  # long enough that each warm-up task lands in a different worker
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return os.getpid(), usage.ru_utime + usage.ru_stime


def run_baseline(urls: list[str], names: list[str], workers: int, folder: Path) -> RunResult:
    """Run every extractor on every page in a pool of ``workers`` processes; time the work."""
    context = multiprocessing.get_context("spawn")  # no fork of a process running a server
    django_dir = folder / "django"
    django_dir.mkdir(parents=True)
    cpu_before = children_cpu()  # the workers count once the pool has joined them
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=setup_django, initargs=(str(django_dir),)
    ) as pool:
        start_up = dict(future.result() for future in [pool.submit(_ready) for _ in range(workers)])
        started = time.monotonic()
        futures = [
            pool.submit(extract, url, name, str(folder / "out" / f"{index:04d}" / name))
            for index, url in enumerate(urls)
            for name in names
        ]
        states = Counter(future.result() for future in futures)
        seconds = time.monotonic() - started
    return RunResult(
        kind="baseline",
        seconds=seconds,
        cpu_seconds=children_cpu() - cpu_before - sum(start_up.values()),
        results=dict(sorted(states.items())),
    )


# --- Vellum: manage.py add --wait ----------------------------------------------------------------


def vellum_env(data_dir: Path) -> dict[str, str]:
    """Return this process's environment with DATA_DIR and the settings module set."""
    return {**os.environ, "DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE}


def manage(args: list[str], env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    """Run ``manage.py <args>`` with this Python, from the repository root."""
    return subprocess.run([sys.executable, str(MANAGE), *args], cwd=REPO, env=env, **kwargs)


def run_vellum(urls: list[str], folder: Path, timeout: float) -> RunResult:
    """Archive ``urls`` with ``manage.py add --wait`` in a fresh DATA_DIR; time that process."""
    data_dir = folder / "data"
    env = vellum_env(data_dir)
    manage(["init"], env, check=True, capture_output=True)
    urls_file = folder / "urls.txt"
    urls_file.write_text("\n".join(urls) + "\n")
    cpu_before = children_cpu()  # add's orchestrator waits for its actors, they for extractors
    seconds = _timed_add(urls_file, env, folder / "add.log", timeout)
    cpu_seconds = children_cpu() - cpu_before
    counts = json.loads(manage(["status", "--json"], env, check=True, capture_output=True).stdout)
    return RunResult(
        kind="vellum",
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        results=_nonzero(counts["archiveresult"]),
        snapshots=_nonzero(counts["snapshot"]),
    )


def _timed_add(urls_file: Path, env: dict[str, str], log_path: Path, timeout: float) -> float:
    """Run ``add --file urls_file --wait``; return its wall seconds. Exit if it fails."""
    cmd = [sys.executable, str(MANAGE), "add", "--file", str(urls_file), "--wait"]
    with open(log_path, "wb") as log_file:
        started = time.monotonic()
        process = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # on timeout, its orchestrator and actors go too
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
            seconds = None
        else:
            seconds = time.monotonic() - started
    if seconds is None or code != 0:
        tail = log_path.read_text(errors="replace")[-2000:]
        what = f"took over {timeout:g} s" if seconds is None else f"exited with {code}"
        sys.exit(f"error: manage.py add --wait {what} (--keep keeps its DATA_DIR):\n{tail}")
    return seconds


def _nonzero(states: dict[str, int]) -> dict[str, int]:
    return {state: n for state, n in sorted(states.items()) if n and state != "due"}


# --- rounds and the report -----------------------------------------------------------------------


def run_rounds(
    urls: list[str], names: list[str], workers: int, args: argparse.Namespace, root: Path
) -> list[dict]:
    """Alternate baseline and Vellum ``args.rounds`` times; return each round's two runs."""
    rounds = []
    for number in range(1, args.rounds + 1):
        folder = root / f"round-{number}"
        log(f"round {number}/{args.rounds}: baseline ...")
        baseline = run_baseline(urls, names, workers, folder / "baseline")
        log(f"  baseline {baseline.seconds:.1f} s; Vellum ...")
        vellum = run_vellum(urls, _mkdir(folder / "vellum"), args.timeout)
        log(f"  vellum {vellum.seconds:.1f} s (ratio {vellum.seconds / baseline.seconds:.2f})")
        rounds.append({"baseline": baseline, "vellum": vellum})
    return rounds


def summarize(rounds: list[dict], urls: list[str], names: list[str], workers: int) -> dict:
    """Return the machine-readable summary: medians, pages/s, ratios and the checks."""
    pages = len(urls)
    sealed = all(r["vellum"].snapshots == {"sealed": pages} for r in rounds)
    same = all(r["vellum"].results == r["baseline"].results for r in rounds)
    return {
        "pages": pages,
        "extractors": names,
        "parallelism": workers,
        "cpus": os.cpu_count(),
        "rounds": [_round_summary(r) for r in rounds],
        "baseline": _side([r["baseline"] for r in rounds], pages),
        "vellum": _side([r["vellum"] for r in rounds], pages),
        # Each round's ratio compares two runs under the same load; their median is the headline.
        "ratio": statistics.median(r["vellum"].seconds / r["baseline"].seconds for r in rounds),
        "goal_ratio": GOAL_RATIO,
        "checks": {"all_snapshots_sealed": sealed, "same_outcomes": same},
    }


def _round_summary(runs: dict[str, RunResult]) -> dict:
    ratio = runs["vellum"].seconds / runs["baseline"].seconds
    return {**{kind: asdict(run) for kind, run in runs.items()}, "ratio": ratio}


def _side(runs: list[RunResult], pages: int) -> dict:
    """Medians of one kind's runs; outcomes (and snapshots) of the last one."""
    seconds = statistics.median(run.seconds for run in runs)
    side = {
        "seconds": seconds,
        "pages_per_second": pages / seconds,
        "cpu_seconds": statistics.median(run.cpu_seconds for run in runs),
        "results": runs[-1].results,
    }
    return {**side, "snapshots": runs[-1].snapshots} if runs[-1].kind == "vellum" else side


def print_report(summary: dict) -> None:
    """Print the summary for people."""
    names = ", ".join(summary["extractors"])
    print(f"pages        {summary['pages']} (Python docs on 127.0.0.1)")
    print(f"extractors   {len(summary['extractors'])}: {names}")
    print(f"parallelism  {summary['parallelism']} (ACTORS_ARCHIVERESULT), {summary['cpus']} CPUs")
    for number, r in enumerate(summary["rounds"], 1):
        baseline, vellum = r["baseline"]["seconds"], r["vellum"]["seconds"]
        print(
            f"round {number:<6} baseline {baseline:7.1f} s  vellum {vellum:7.1f} s  "
            f"ratio {r['ratio']:.2f}"
        )
    median = " (median)" if len(summary["rounds"]) > 1 else ""
    for kind in ("baseline", "vellum"):
        side = summary[kind]
        rate = side["pages_per_second"]
        print(
            f"{kind + median:<19} {side['seconds']:7.1f} s  {rate:6.2f} pages/s  "
            f"CPU {side['cpu_seconds']:6.1f} s  results: {_counts(side['results'])}"
        )
    print(f"vellum snapshots: {_counts(summary['vellum']['snapshots'])}")
    verdict = "within" if summary["ratio"] <= GOAL_RATIO else "over"
    which = " (median of the rounds' ratios)" if median else ""
    print(f"ratio Vellum/baseline{which}: {summary['ratio']:.2f} ({verdict} the {GOAL_RATIO} goal)")
    for check, passed in summary["checks"].items():
        print(f"check {check.replace('_', ' ')}: {'yes' if passed else 'NO'}")


def _counts(states: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in states.items()) or "none"


def log(message: str) -> None:
    """Progress goes to stderr, so that ``--json`` keeps stdout machine-readable."""
    print(message, file=sys.stderr, flush=True)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200, help="Pages to archive (default 200).")
    parser.add_argument("--rounds", type=int, default=1, help="Baseline/Vellum pairs (default 1).")
    parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folders.")
    parser.add_argument(
        "--timeout", type=float, default=3600, help="Seconds Vellum's run may take (default 3600)."
    )
    args = parser.parse_args(argv)
    if args.pages < 1 or args.rounds < 1:
        parser.error("--pages and --rounds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_docs()
    root = Path(tempfile.mkdtemp(prefix="vellum-bench-"))
    try:
        setup_django(str(_mkdir(root / "django")))
        names, workers = profile()
        with DocsServer(DOCS_DIR) as server:
            urls = page_urls(server.base_url, args.pages)
            rounds = run_rounds(urls, names, workers, args, root)
        summary = summarize(rounds, urls, names, workers)
    finally:
        if args.keep:
            log(f"temporary folders kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_report(summary)
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
