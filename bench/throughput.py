"""Measure Vellum's archiving throughput against the raw commands and against its extractors.

A real site is served on 127.0.0.1: the Python documentation of Debian's python3-doc package
(/usr/share/doc/python3.11/html, installed with apt-get if missing). For each size of
``--pages`` (default 1, 50 and 200: the first N of ``library/*.html`` in sorted order) the
pages are archived by each side in turn:

- Vellum: ``manage.py add --file urls.txt --wait`` in a fresh DATA_DIR (after an untimed
  ``manage.py init``), timed from the start of that process to its exit. Afterwards
  ``manage.py status --json`` must show every snapshot sealed.
- raw: the commands a person would run instead for the same outputs, per page ``curl -D``
  (headers), ``wget --warc-file --page-requisites`` (the page, its requisites and a WARC; the
  title is read from it) and ``curl`` of ``/favicon.ico``; every (page, command) pair is fed to
  ``xargs -P <jobs>`` (default: the number of CPUs), timed from the start of xargs to its end.
  For one page the commands run one after the other (``-P 1``), as a person types them. Every
  page must end with its three files (headers, WARC, favicon) non-empty.
- extractors: Vellum's own extractor classes of the profile, in registry order, called directly
  (``should_run`` then ``run(SimpleNamespace(url=url), fresh out_dir)``) for every (page,
  extractor) pair in a ProcessPoolExecutor of ACTORS_ARCHIVERESULT workers (the parallelism of
  Vellum's result actors). The workers are started and Django is set up in them before the clock
  starts: this baseline is the extractors' own work and nothing else. Its outcomes per state
  must match Vellum's.

``--baseline`` picks the sides measured beside Vellum: ``raw``, ``extractors`` or ``both`` (the
default: issue 19 asks for both ratios from one run, and the workers' start-up is not timed).
The extractors run are ``--extractors`` (default headers, wget, title and favicon, the four the
raw commands stand for; the environment's EXTRACTORS is ignored; ``all`` runs every registered
one, against the extractor classes only). All sides fetch from the same server, a thread of this
process.

With ``--rounds K`` each size is measured K times, the sides in a rotating order (raw, Vellum,
extractors; then Vellum, extractors, raw; ...) so that each round's ratios compare runs made under
the same load. The report gives per size the median seconds of each side, the median of the
rounds' ratios Vellum/raw and Vellum/extractors (the goal is at most 1.3 from 50 pages on), the
CPU seconds of every process each side started (Vellum's split by process, in milliseconds a
page: the ``add`` process with its orchestrator, each kind of actor, and the commands they ran,
from the CPU figures each actor logs as it exits), and the load average before and after (these
machines are shared: quote ratios, not seconds); ``--json`` prints it all as JSON. The exit status
is 1 when a check fails (snapshots not all sealed, a page without its raw outputs, outcomes that
differ).

Run it from the repository root (with 1, 50 and 200 pages, some minutes per round):

    .venv/bin/python bench/throughput.py [--pages 1,50,200] [--rounds 1]
                                         [--baseline raw|extractors|both] [--jobs N]
                                         [--extractors headers,wget,title,favicon]
                                         [--json] [--keep] [--timeout 3600]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shlex
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
GOAL_RATIO = 1.3  # Vellum's seconds over a baseline's, from GOAL_FROM_PAGES pages on
GOAL_FROM_PAGES = 50  # issue 19 sets the goal for 50 and 200 pages; one page is mostly start-up
DEFAULT_SIZES = "1,50,200"
RAW_EXTRACTORS = "headers,wget,title,favicon"  # the outputs the raw commands make
SIDES = ("raw", "vellum", "extractors")  # a round's order, rotated by one each round
# Per page, the file each raw command must leave non-empty (this site answers /favicon.ico with
# a 404 page, which curl saves too).
RAW_OUTPUTS = {"headers": "headers.txt", "wget": "warc.warc.gz", "favicon": "favicon.ico"}
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
    """One timed run of one side: wall seconds, the CPU seconds (user + system) of every process
    it ran, extractor commands included, and its outcomes: results per state (for raw: pages
    per output made) and ``snapshots`` per state (Vellum only)."""

    kind: str
    seconds: float
    cpu_seconds: float
    results: dict[str, int]
    snapshots: dict[str, int] = field(default_factory=dict)
    # Vellum only: ``cpu_seconds`` split by process (``cpu_by_process``)
    cpu_split: dict[str, float] = field(default_factory=dict)


def children_cpu() -> float:
    """Return the CPU seconds used so far by this process's waited-for descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    """Return the machine's load averages over 1, 5 and 15 minutes (/proc/loadavg)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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


# --- Django, in this process and in the extractors' workers --------------------------------------


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


# --- extractors: the extractor classes called directly -------------------------------------------


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


def run_extractors(urls: list[str], names: list[str], workers: int, folder: Path) -> RunResult:
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
        kind="extractors",
        seconds=seconds,
        cpu_seconds=children_cpu() - cpu_before - sum(start_up.values()),
        results=dict(sorted(states.items())),
    )


# --- raw: the commands a person would run --------------------------------------------------------


def raw_commands(url: str, folder: Path) -> list[list[str]]:
    """curl -D for the headers, wget with requisites and a WARC, curl for the favicon."""
    origin = url.split("/", 3)
    favicon = f"{origin[0]}//{origin[2]}/favicon.ico"
    return [
        ["curl", "--silent", "--location", "-D", str(folder / "headers.txt"), "-o", "/dev/null",
         url],
        ["wget", "--quiet", "--page-requisites", "--adjust-extension", "--convert-links",
         f"--warc-file={folder / 'warc'}", "--directory-prefix", str(folder / "wget"), url],
        ["curl", "--silent", "--location", "-o", str(folder / "favicon.ico"), favicon],
    ]  # fmt: skip


@dataclass
class XargsRun:
    """One xargs run: wall seconds, CPU seconds of xargs and of every command it ran, its exit
    status (123: a command exited with 1 to 125) and its stderr."""

    seconds: float
    cpu_seconds: float
    returncode: int
    stderr: str


def run_xargs(items: list[str], command: list[str], jobs: int, per_command: int = 1) -> XargsRun:
    """Run ``command`` with ``per_command`` of ``items`` appended, ``jobs`` at once, through
    ``xargs -P``; time it from the start of xargs to its end."""
    xargs = ["xargs", "--null", "--max-args", str(per_command), "--max-procs", str(jobs)]
    stdin = "".join(f"{item}\0" for item in items).encode()
    cpu_before = children_cpu()
    started = time.monotonic()
    done = subprocess.run([*xargs, *command], input=stdin, capture_output=True)
    seconds = time.monotonic() - started
    stderr = done.stderr.decode(errors="replace")
    return XargsRun(seconds, children_cpu() - cpu_before, done.returncode, stderr)


def run_raw(urls: list[str], jobs: int, folder: Path) -> RunResult:
    """Run the raw commands of every page, all (page, command) pairs under ``xargs -P jobs``
    (one page: one after the other); count the pages each output was made for.

    Exits when xargs ends otherwise than with every command run (its status 0 or 123).
    """
    pages = [_mkdir(folder / f"{index:04d}") for index in range(len(urls))]
    commands = [
        shlex.join(cmd)
        for url, page in zip(urls, pages, strict=True)
        for cmd in raw_commands(url, page)
    ]
    run = run_xargs(commands, ["sh", "-c"], jobs if len(urls) > 1 else 1)
    if run.returncode not in (0, 123):  # 123: a command failed; the outputs' count shows it
        sys.exit(f"error: xargs exited with {run.returncode}:\n{run.stderr[-2000:]}")
    made = {
        name: sum((page / file).is_file() and (page / file).stat().st_size > 0 for page in pages)
        for name, file in RAW_OUTPUTS.items()
    }
    return RunResult(kind="raw", seconds=run.seconds, cpu_seconds=run.cpu_seconds, results=made)


# --- Vellum: manage.py add --wait ----------------------------------------------------------------


def vellum_env(data_dir: Path) -> dict[str, str]:
    """Return this process's environment with DATA_DIR and the settings module set, and
    LOG_LEVEL at INFO: the CPU split reads the lines actors log as they exit."""
    return {**os.environ, "DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
            "LOG_LEVEL": "INFO"}  # fmt: skip


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
        cpu_split=cpu_by_process(data_dir / "logs", cpu_seconds),
    )


def cpu_by_process(logs: Path, total: float) -> dict[str, float]:
    """Split ``total``, the CPU seconds of one ``add --wait`` and all it ran, by process: each
    kind of actor's own (``<kind> actors``), the commands they ran (``commands``: wget, curl,
    a browser, in part: orchestrator/usage.py), and what is left, the ``add`` process itself
    with its orchestrator, from the lines each actor and the orchestrator log as they exit
    (``logs``: DATA_DIR/logs). An actor that logged none (one killed) counts in what is left:
    a warning says so."""
    # Imported here, as this script's other Vellum imports: the repository joins sys.path in
    # setup_django, which main() calls first.
    from orchestrator.usage import ACTOR_EXIT, ORCHESTRATOR_STOP

    split: Counter[str] = Counter()
    exits = list(ACTOR_EXIT.finditer(_read(logs / "actors.log")))
    for match in exits:
        split[f"{match['kind']} actors"] += float(match["own"])
        split["commands"] += float(match["commands"])
    spawned = sum(
        int(m["spawned"]) for m in ORCHESTRATOR_STOP.finditer(_read(logs / "orchestrator.log"))
    )
    if len(exits) != spawned:
        log(f"warning: {len(exits)} actors logged their CPU of {spawned} spawned; "
            "the rest counts as the add process's")  # fmt: skip
    return {"add and its orchestrator": max(total - sum(split.values()), 0.0), **split}


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


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


# --- sizes, rounds and the report ----------------------------------------------------------------


def run_rounds(
    urls: list[str],
    sides: list[str],
    names: list[str],
    workers: int,
    args: argparse.Namespace,
    root: Path,
) -> list[dict[str, RunResult]]:
    """Run every side on ``urls`` ``args.rounds`` times, the order rotated by one each round;
    return each round's runs by side."""
    runners = {
        "raw": lambda folder: run_raw(urls, args.jobs, folder),
        "vellum": lambda folder: run_vellum(urls, _mkdir(folder), args.timeout),
        "extractors": lambda folder: run_extractors(urls, names, workers, folder),
    }
    rounds = []
    for number in range(args.rounds):
        turn = number % len(sides)
        runs = {}
        for side in sides[turn:] + sides[:turn]:
            log(f"{len(urls)} pages, round {number + 1}/{args.rounds}: {side} ...")
            runs[side] = runners[side](root / f"round-{number + 1}" / side)
            log(f"  {side} {runs[side].seconds:.2f} s")
        rounds.append({side: runs[side] for side in sides})
    return rounds


def summarize(rounds: list[dict[str, RunResult]], pages: int) -> dict:
    """Return one size's summary: medians per side, ratios to each baseline, the checks."""
    baselines = [side for side in rounds[0] if side != "vellum"]
    checks = {
        "all_snapshots_sealed": all(r["vellum"].snapshots == {"sealed": pages} for r in rounds)
    }
    if "raw" in baselines:
        made = dict.fromkeys(RAW_OUTPUTS, pages)
        checks["raw_outputs_made"] = all(r["raw"].results == made for r in rounds)
    if "extractors" in baselines:
        checks["same_outcomes"] = all(
            r["vellum"].results == r["extractors"].results for r in rounds
        )
    ratios = [{side: r["vellum"].seconds / r[side].seconds for side in baselines} for r in rounds]
    return {
        "pages": pages,
        "rounds": [
            {**{side: asdict(run) for side, run in r.items()}, "ratios": ratio}
            for r, ratio in zip(rounds, ratios, strict=True)
        ],
        **{side: _side([r[side] for r in rounds], pages) for side in rounds[0]},
        # Each round's ratio compares runs under the same load; their median is the headline.
        "ratios": {side: statistics.median(ratio[side] for ratio in ratios) for side in baselines},
        "goal_ratio": GOAL_RATIO if pages >= GOAL_FROM_PAGES else None,
        "checks": checks,
    }


def _side(runs: list[RunResult], pages: int) -> dict:
    """Medians of one side's runs; outcomes (and snapshots) of the last one."""
    seconds = statistics.median(run.seconds for run in runs)
    side = {
        "seconds": seconds,
        "pages_per_second": pages / seconds,
        "cpu_seconds": statistics.median(run.cpu_seconds for run in runs),
        "results": runs[-1].results,
    }
    if runs[-1].kind != "vellum":
        return side
    names = dict.fromkeys(name for run in runs for name in run.cpu_split)
    split = {name: statistics.median(run.cpu_split.get(name, 0) for run in runs) for name in names}
    return {**side, "snapshots": runs[-1].snapshots, "cpu_split": split}


def print_report(summary: dict) -> None:
    """Print the summary for people: a table of the sizes, then outcomes and checks."""
    sizes = summary["sizes"]
    baselines = [side for side in SIDES if side in sizes[0] and side != "vellum"]
    print(f"site         Python docs on 127.0.0.1; {summary['cpus']} CPUs; load "
          f"{summary['load_before']} before, {summary['load_after']} after")  # fmt: skip
    print(f"extractors   {', '.join(summary['extractors'])}")
    if "raw" in baselines:
        print(f"raw          curl -D, wget --warc-file --page-requisites, curl /favicon.ico; "
              f"xargs -P{summary['jobs']} (one page: one after the other)")  # fmt: skip
    if "extractors" in baselines:
        workers = summary["actors_archiveresult"]
        print(f"classes      the extractor classes called directly, {workers} processes "
              "(ACTORS_ARCHIVERESULT)")  # fmt: skip
    print(f"rounds       {summary['rounds']} (medians; a ratio is the median of the rounds')")
    columns = ["pages", *(f"{side} s" for side in baselines), "Vellum s"]
    columns += [f"Vellum/{side}" for side in baselines] + ["goal"]
    widths = [max(10, len(column)) for column in columns]
    print()
    print("  ".join(f"{column:>{width}}" for column, width in zip(columns, widths, strict=True)))
    for size in sizes:
        cells = [str(size["pages"]), *(f"{size[side]['seconds']:.2f}" for side in baselines)]
        cells += [f"{size['vellum']['seconds']:.2f}"]
        cells += [f"{size['ratios'][side]:.2f}" for side in baselines]
        cells += [f"{size['goal_ratio']}" if size["goal_ratio"] else "-"]
        print("  ".join(f"{cell:>{width}}" for cell, width in zip(cells, widths, strict=True)))
    print()
    for size in sizes:
        cpu = ", ".join(
            f"{side} {size[side]['cpu_seconds']:.1f}" for side in [*baselines, "vellum"]
        )
        pages = f"{size['pages']} page" + ("s" if size["pages"] > 1 else "")
        print(f"{pages}: CPU seconds {cpu}")
        split = size["vellum"]["cpu_split"]
        print("  Vellum CPU ms a page by process: " + ", ".join(
            f"{name} {seconds / size['pages'] * 1000:.0f}" for name, seconds in split.items()
        ))  # fmt: skip
        print(f"  Vellum results: {_counts(size['vellum']['results'])}; "
              f"snapshots: {_counts(size['vellum']['snapshots'])}")  # fmt: skip
        if "extractors" in baselines:
            print(f"  extractors results: {_counts(size['extractors']['results'])}")
        if "raw" in baselines:
            print(f"  raw, pages per output: {_counts(size['raw']['results'])}")
        for side, ratio in size["ratios"].items():
            if size["goal_ratio"]:
                verdict = "within" if ratio <= size["goal_ratio"] else "OVER"
                print(f"  Vellum/{side} {ratio:.2f}: {verdict} the {size['goal_ratio']} goal")
        for check, passed in size["checks"].items():
            print(f"  check {check.replace('_', ' ')}: {'yes' if passed else 'NO'}")


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
    parser.add_argument(
        "--pages", default=DEFAULT_SIZES, help=f"Sizes, comma-separated (default {DEFAULT_SIZES})."
    )
    parser.add_argument("--rounds", type=int, default=1, help="Rounds per size (default 1).")
    parser.add_argument(
        "--baseline", choices=("raw", "extractors", "both"), default="both",
        help="What Vellum is measured against (default both).",
    )  # fmt: skip
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count(), help="xargs -P of the raw commands (CPUs)."
    )
    parser.add_argument(
        "--extractors", default=RAW_EXTRACTORS, help=f"Extractors to run (default {RAW_EXTRACTORS}"
        ", the raw commands' outputs; all: every registered one, against the classes only).",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folders.")
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="Seconds one Vellum run may take (default 3600).",
    )
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(size) for size in args.pages.split(",")]
    except ValueError:
        parser.error(f"--pages takes whole numbers separated by commas, not {args.pages!r}")
    if min(args.sizes) < 1 or args.rounds < 1 or args.jobs < 1:
        parser.error("--pages, --rounds and --jobs must be at least 1")
    if args.baseline != "extractors" and args.extractors.split(",") != RAW_EXTRACTORS.split(","):
        parser.error(f"the raw commands stand for {RAW_EXTRACTORS}: use --baseline extractors")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_docs()
    if os.environ.get("EXTRACTORS", args.extractors) != args.extractors:
        log(f"EXTRACTORS is ignored: --extractors {args.extractors}")
    if args.extractors == "all":
        os.environ.pop("EXTRACTORS", None)
    else:
        os.environ["EXTRACTORS"] = args.extractors  # for Vellum's processes and this one's Django
    sides = [side for side in SIDES if side == "vellum" or args.baseline in (side, "both")]
    root = Path(tempfile.mkdtemp(prefix="vellum-bench-"))
    load_before = load()
    try:
        setup_django(str(_mkdir(root / "django")))
        names, workers = profile()
        with DocsServer(DOCS_DIR) as server:
            sizes = []
            for size in args.sizes:
                urls = page_urls(server.base_url, size)
                rounds = run_rounds(urls, sides, names, workers, args, root / f"pages-{size}")
                sizes.append(summarize(rounds, size))
    finally:
        if args.keep:
            log(f"temporary folders kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    summary = {
        "extractors": names,
        "jobs": args.jobs,
        "actors_archiveresult": workers,
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "load_before": load_before,
        "load_after": load(),
        "sizes": sizes,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_report(summary)
    return 0 if all(all(size["checks"].values()) for size in sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
