"""Measure what the browser's one visit per page saves (issue 18), against the raw tools a user
would run instead, each part with its baseline measured in the same run.

The site is the Python documentation of Debian's python3-doc package, served on 127.0.0.1 (as
in bench/throughput.py); the pages are the first N of ``library/*.html``.

(a) Browser outputs from one visit against four separate loads (default 20 pages). Per page:

- Vellum: every registered extractor that shares the browser's visit (``shares_visit``:
  screenshot, pdf, dom, singlefile, and warc once it is registered), in registry order, each
  ``run(snapshot, out_dir)`` in turn in this process, as one result actor runs them: one shared
  browser (core/extractors/browser.py ``shared_browser``), which loads the page once for all
  of them. Starting and stopping that browser is timed apart and counted in the total.
- raw tools: ``chromium --headless --screenshot``, ``--print-to-pdf`` and ``--dump-dom`` (each a
  new browser with a new profile, with the headless flags of bench/chromium_reuse.py) and
  ``single-file <url>`` (node_modules/.bin/single-file with its own defaults, on
  /usr/bin/chromium with the same flags), one after the other: four loads of the page.

The two sides alternate page by page (which goes first alternates too), so that both meet the
same load on the machine. The report gives each side's median seconds per page, its total, each
tool's median, and the ratio Vellum/raw of the medians (the goal is at most 0.4) and of the
totals. Vellum's full-page screenshot and WARC are more than the raw tools make.

(b) The full default profile end to end (default 100 pages):

- Vellum: ``manage.py add --file urls.txt --wait`` in a fresh DATA_DIR with the orchestrator, as
  bench/throughput.py runs it, every extractor of the default profile (EXTRACTORS is ignored
  here; media and git skip these pages). Every snapshot must end sealed.
- raw tools: per page ``wget --page-requisites --warc-file``, ``curl --dump-header`` and the four
  loads of (a), each (page, tool) pair one command, run by ``xargs -P <jobs>`` (default: the
  number of CPUs), as bench/throughput.py's baseline runs (page, extractor) pairs in a pool.

The two alternate run by run. The report gives the seconds per page of both (the goal for
Vellum is at most 1.5), the CPU seconds of every process each started and the ratio
Vellum/raw. With ``--runs K`` each part is measured K times and the medians are reported. The
exit status is 1 when a check fails (a missing or empty output, a snapshot not sealed).

Run it from the repository root (on two busy cores, part (a) with 20 pages took ten minutes
and part (b) with 100 pages half an hour; most of it is the raw tools):

    .venv/bin/python bench/capture.py [--part a|b|all] [--pages N] [--runs 1] [--jobs N]
                                      [--json] [--keep] [--timeout 3600]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path
from types import SimpleNamespace

from chromium_reuse import LAUNCH_TIMEOUT, separate_flags
from throughput import (
    DOCS_DIR,
    DocsServer,
    ensure_docs,
    log,
    page_urls,
    profile,
    run_vellum,
    run_xargs,
    setup_django,
)

GOAL_VISIT_RATIO = 0.4  # part (a): Vellum's seconds per page over the four separate loads'
GOAL_SECONDS_PER_PAGE = 1.5  # part (b): Vellum's seconds per page, end to end
DEFAULT_PAGES = {"a": 20, "b": 100}
VISIT_TOOLS = ("screenshot", "pdf", "dom", "singlefile")  # the four separate loads
PAGE_TOOLS = ("wget", "curl", *VISIT_TOOLS)  # part (b)'s raw tools, per page

# One raw tool on one page: ``sh tools.sh TOOL OUT_DIR URL`` writes the tool's output into
# OUT_DIR; a run that leaves it missing or empty is tried again (saying "retry:" on stderr), up
# to ATTEMPTS runs in all, as a user's script would. The binaries and flags are filled in.
ATTEMPTS = 3
TOOLS_SCRIPT = """\
set -u
tool=$1 out=$2 url=$3
mkdir -p "$out" && cd "$out" || exit 1
chromium() {{
  profile=$(mktemp -d) || return 1
  timeout {timeout} {chromium} {flags} --user-data-dir="$profile" "$@"
  status=$?
  rm -rf "$profile"
  return $status
}}
attempt() {{
  case $tool in
    wget)
      # exit 8: a requisite answered an error status; the page and its WARC are still there
      timeout {timeout} {wget} --no-config --no-verbose --page-requisites --span-hosts \\
        --adjust-extension --convert-links -e robots=off --tries=1 --warc-file=archive "$url" \\
        || [ $? -eq 8 ]
      file=archive.warc.gz ;;
    curl)
      timeout {timeout} {curl} --silent --show-error --location --dump-header headers.txt \\
        --output /dev/null "$url"
      file=headers.txt ;;
    screenshot)
      chromium --screenshot="$out/screenshot.png" "$url" 2>/dev/null
      file=screenshot.png ;;
    pdf)
      chromium --print-to-pdf="$out/output.pdf" "$url" 2>/dev/null
      file=output.pdf ;;
    dom)
      chromium --dump-dom "$url" >dom.html 2>/dev/null
      file=dom.html ;;
    singlefile)
      timeout {timeout} {single_file} --browser-executable-path={chromium} \\
        --browser-args={browser_args} "$url" singlefile.html >/dev/null
      file=singlefile.html ;;
    *) echo "unknown tool $tool" >&2; exit 2 ;;
  esac
  [ -s "$file" ]
}}
for try in $(seq {attempts}); do
  attempt && exit 0
  echo "retry: $tool of $url left no $file (run $try)" >&2
  find . -mindepth 1 -delete
done
echo "error: $tool of $url left no $file in $out after {attempts} runs" >&2
exit 1
"""


def write_tools_script(folder: Path) -> Path:
    """Write TOOLS_SCRIPT with this machine's binaries into ``folder``; return its path.

    Exits with a message when wget, curl, chromium or single-file is missing.
    """
    from core.extractors.process import find_binary

    binaries = {name: find_binary(name) for name in ("wget", "curl", "chromium", "single-file")}
    if missing := [name for name, path in binaries.items() if path is None]:
        sys.exit(f"error: not installed: {', '.join(missing)} (bash .ci/install installs them)")
    flags = separate_flags()
    script = folder / "tools.sh"
    script.write_text(
        TOOLS_SCRIPT.format(
            timeout=LAUNCH_TIMEOUT,
            chromium=shlex.quote(binaries["chromium"]),
            flags=shlex.join(flags),
            wget=shlex.quote(binaries["wget"]),
            curl=shlex.quote(binaries["curl"]),
            single_file=shlex.quote(binaries["single-file"]),
            browser_args=shlex.quote(json.dumps(flags)),
            attempts=ATTEMPTS,
        )
    )
    return script


def run_tool(script: Path, tool: str, out_dir: Path, url: str, retries: Counter) -> None:
    """Run one raw tool on one page with ``script``, counting its retries in ``retries["raw"]``;
    exit with its message if it fails ATTEMPTS times."""
    done = subprocess.run(
        ["sh", str(script), tool, str(out_dir), url], stdin=subprocess.DEVNULL, capture_output=True
    )
    stderr = done.stderr.decode(errors="replace")
    retries["raw"] += _log_retries(stderr)
    if done.returncode != 0:
        sys.exit(f"error: {tool} of {url} exited with {done.returncode}: {stderr[-2000:]}")


def _log_retries(stderr: str) -> int:
    """Log the script's "retry:" lines; return how many there were."""
    lines = [line for line in stderr.splitlines() if line.startswith("retry:")]
    for line in lines:
        log(f"  {line}")
    return len(lines)


def has_output(path: Path) -> bool:
    """True if ``path`` is a non-empty file or a folder holding one."""
    files = [path] if path.is_file() else list(path.rglob("*")) if path.is_dir() else []
    return any(file.is_file() and file.stat().st_size for file in files)


# --- (a) one visit against four loads -----------------------------------------------------------


def visit_extractors() -> list:
    """Return the registered extractors that capture the shared browser's visit, in order."""
    from core.extractors.registry import EXTRACTORS

    return [extractor for extractor in EXTRACTORS if extractor.shares_visit]


def vellum_page(extractors: list, url: str, folder: Path, retries: Counter) -> dict[str, float]:
    """Run ``extractors`` on ``url`` one after the other, as one result actor does; return the
    seconds each took, its failed runs included. An extractor that does not succeed is run
    again (counted in ``retries["vellum"]``), up to ATTEMPTS runs; exits when none did."""
    seconds = {}
    for extractor in extractors:
        started = time.monotonic()
        for attempt in range(1, ATTEMPTS + 1):
            out_dir = folder / extractor.name
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True)
            output = extractor.run(SimpleNamespace(url=url), out_dir)
            if _succeeded(output, out_dir):
                break
            reason = f"{extractor.name} of {url}: {output.outcome.value}: {output.error}"
            if attempt == ATTEMPTS:
                sys.exit(f"error: {reason} (after {ATTEMPTS} runs)")
            log(f"  retry: {reason} (run {attempt})")
            retries["vellum"] += 1
        seconds[extractor.name] = time.monotonic() - started
    return seconds


def _succeeded(output, out_dir: Path) -> bool:
    from core.extractors.errors import Outcome

    return output.outcome is Outcome.SUCCEEDED and has_output(out_dir / output.output)


def raw_page(script: Path, url: str, folder: Path, retries: Counter) -> dict[str, float]:
    """Run the four separate loads of ``url``; return the seconds each took."""
    seconds = {}
    for tool in VISIT_TOOLS:
        started = time.monotonic()
        run_tool(script, tool, folder / tool, url, retries)
        seconds[tool] = time.monotonic() - started
    return seconds


def measure_visit(urls: list[str], script: Path, folder: Path, number: int) -> dict:
    """Run part (a) once: both sides on every page, alternating; return its figures."""
    from core.extractors.browser import close_shared_browser, shared_browser

    extractors = visit_extractors()
    started = time.monotonic()
    shared_browser()  # an actor starts it on its first page: timed apart, counted in the total
    browser_start = time.monotonic() - started
    vellum: list[dict[str, float]] = []
    raw: list[dict[str, float]] = []
    retries: Counter = Counter(vellum=0, raw=0)
    try:
        for index, url in enumerate(urls):
            page_folder = folder / f"{index:04d}"
            vellum_first = (index + number) % 2 == 0
            if vellum_first:
                vellum.append(vellum_page(extractors, url, page_folder / "vellum", retries))
            raw.append(raw_page(script, url, page_folder / "raw", retries))
            if not vellum_first:
                vellum.append(vellum_page(extractors, url, page_folder / "vellum", retries))
            log(
                f"  page {index + 1}/{len(urls)}: vellum {sum(vellum[-1].values()):.2f} s, "
                f"raw {sum(raw[-1].values()):.2f} s"
            )
    finally:
        started = time.monotonic()
        close_shared_browser()  # an actor stops its browser too
        browser_stop = time.monotonic() - started
    return {
        **_visit_figures(vellum, raw, browser_start, browser_stop),
        "retries": dict(retries),
    }


def _visit_figures(vellum: list[dict], raw: list[dict], start: float, stop: float) -> dict:
    vellum_pages = [sum(page.values()) for page in vellum]
    raw_pages = [sum(page.values()) for page in raw]
    vellum_total = sum(vellum_pages) + start + stop
    return {
        "vellum": {
            "median_seconds_per_page": statistics.median(vellum_pages),
            "seconds": vellum_total,
            "browser_start_seconds": start,
            "browser_stop_seconds": stop,
            "median_seconds_per_page_by_extractor": _medians(vellum),
        },
        "raw": {
            "median_seconds_per_page": statistics.median(raw_pages),
            "seconds": sum(raw_pages),
            "median_seconds_per_page_by_tool": _medians(raw),
        },
        "ratio": statistics.median(vellum_pages) / statistics.median(raw_pages),
        "ratio_of_totals": vellum_total / sum(raw_pages),
    }


def _medians(pages: list[dict[str, float]]) -> dict[str, float]:
    return {name: statistics.median(page[name] for page in pages) for name in pages[0]}


def part_visit(urls: list[str], runs: int, root: Path) -> dict:
    """Measure part (a) ``runs`` times; return each run's figures and their medians."""
    script = write_tools_script(root)
    names = [extractor.name for extractor in visit_extractors()]
    rounds = []
    for number in range(runs):
        log(f"(a) run {number + 1}/{runs}: {', '.join(names)} against four loads ...")
        rounds.append(measure_visit(urls, script, root / f"visit-{number}", number))
        log(f"  ratio {rounds[-1]['ratio']:.2f}")
    return {
        "pages": len(urls),
        "extractors": names,
        "raw_tools": list(VISIT_TOOLS),
        "runs": rounds,
        "vellum_median_seconds_per_page": _median_of(rounds, "vellum"),
        "raw_median_seconds_per_page": _median_of(rounds, "raw"),
        "ratio": statistics.median(r["ratio"] for r in rounds),
        "ratio_of_totals": statistics.median(r["ratio_of_totals"] for r in rounds),
        "goal_ratio": GOAL_VISIT_RATIO,
    }


def _median_of(rounds: list[dict], side: str) -> float:
    return statistics.median(r[side]["median_seconds_per_page"] for r in rounds)


# --- (b) the full default profile ---------------------------------------------------------------


def run_raw_profile(urls: list[str], script: Path, jobs: int, folder: Path) -> dict:
    """Run PAGE_TOOLS on every page with ``xargs -P jobs``; return seconds and CPU seconds.

    Exits when a tool fails (xargs carries on with the others, then reports it).
    """
    items = [
        item
        for index, url in enumerate(urls)
        for tool in PAGE_TOOLS
        for item in (tool, str(folder / f"{index:04d}" / tool), url)
    ]
    run = run_xargs(items, ["sh", str(script)], jobs, per_command=3)
    if run.returncode != 0:
        sys.exit(f"error: xargs exited with {run.returncode}:\n{run.stderr[-2000:]}")
    return {
        "retries": _log_retries(run.stderr),
        "seconds": run.seconds,
        "seconds_per_page": run.seconds / len(urls),
        "cpu_seconds": run.cpu_seconds,
    }


def part_profile(urls: list[str], args: argparse.Namespace, root: Path) -> dict:
    """Measure part (b) ``args.runs`` times, alternating sides; return figures and medians."""
    names, actors = profile()
    script = write_tools_script(root)
    rounds = []
    for number in range(args.runs):
        folder = root / f"profile-{number}"
        sides = {
            "raw": partial(run_raw_profile, urls, script, args.jobs, folder / "raw"),
            "vellum": partial(_vellum_profile, urls, folder / "vellum", args.timeout),
        }
        order = ["raw", "vellum"] if number % 2 == 0 else ["vellum", "raw"]
        figures = {}
        for side in order:
            log(f"(b) run {number + 1}/{args.runs}: {side} on {len(urls)} pages ...")
            figures[side] = sides[side]()
            log(f"  {side} {figures[side]['seconds_per_page']:.2f} s/page")
        figures["ratio"] = figures["vellum"]["seconds"] / figures["raw"]["seconds"]
        rounds.append(figures)
        if not args.keep:
            shutil.rmtree(folder)
    sealed = all(r["vellum"]["snapshots"] == {"sealed": len(urls)} for r in rounds)
    return {
        "pages": len(urls),
        "extractors": names,
        "actors_archiveresult": actors,
        "raw_tools": list(PAGE_TOOLS),
        "jobs": args.jobs,
        "runs": rounds,
        "vellum_seconds_per_page": statistics.median(
            r["vellum"]["seconds_per_page"] for r in rounds
        ),
        "raw_seconds_per_page": statistics.median(r["raw"]["seconds_per_page"] for r in rounds),
        "ratio": statistics.median(r["ratio"] for r in rounds),
        "goal_seconds_per_page": GOAL_SECONDS_PER_PAGE,
        "checks": {"all_snapshots_sealed": sealed},
    }


def _vellum_profile(urls: list[str], folder: Path, timeout: float) -> dict:
    folder.mkdir(parents=True)
    run = run_vellum(urls, folder, timeout)
    return {
        "seconds": run.seconds,
        "seconds_per_page": run.seconds / len(urls),
        "cpu_seconds": run.cpu_seconds,
        "results": run.results,
        "snapshots": run.snapshots,
    }


# --- the report ---------------------------------------------------------------------------------


def print_visit(report: dict) -> None:
    """Print part (a) for people."""
    runs = len(report["runs"])
    print(f"(a) one visit against four loads: {report['pages']} pages, {runs} run(s)")
    last = report["runs"][-1]
    vellum, raw = last["vellum"], last["raw"]
    print(
        f"  Vellum, one browser ({', '.join(report['extractors'])})\n"
        f"    median {report['vellum_median_seconds_per_page']:6.2f} s/page"
        f"   total {vellum['seconds']:6.1f} s (browser start {vellum['browser_start_seconds']:.1f}"
        f" s, stop {vellum['browser_stop_seconds']:.1f} s)\n"
        f"    by extractor: {_by_name(vellum['median_seconds_per_page_by_extractor'])}"
    )
    print(
        "  raw tools, a load each "
        "(chromium --screenshot, --print-to-pdf, --dump-dom; single-file)\n"
        f"    median {report['raw_median_seconds_per_page']:6.2f} s/page"
        f"   total {raw['seconds']:6.1f} s\n"
        f"    by tool: {_by_name(raw['median_seconds_per_page_by_tool'])}"
    )
    verdict = "within" if report["ratio"] <= GOAL_VISIT_RATIO else "over"
    print(
        f"  ratio Vellum/raw: {report['ratio']:.2f} per page (median), "
        f"{report['ratio_of_totals']:.2f} of the totals ({verdict} the {GOAL_VISIT_RATIO} goal)"
    )
    retries = Counter()
    for run in report["runs"]:
        retries.update(run["retries"])
    print(f"  runs that failed and were made again: {_counts(retries)}")


def print_profile(report: dict) -> None:
    """Print part (b) for people."""
    runs = len(report["runs"])
    print(
        f"(b) full default profile: {report['pages']} pages, {runs} run(s)\n"
        f"  extractors ({len(report['extractors'])}): {', '.join(report['extractors'])}"
    )
    last = report["runs"][-1]
    vellum, raw = last["vellum"], last["raw"]
    print(
        f"  Vellum, manage.py add --wait ({report['actors_archiveresult']} result actors)\n"
        f"    {report['vellum_seconds_per_page']:6.2f} s/page   {vellum['seconds']:6.1f} s"
        f"   CPU {vellum['cpu_seconds']:6.1f} s\n"
        f"    results: {_counts(vellum['results'])}; snapshots: {_counts(vellum['snapshots'])}"
    )
    print(
        f"  raw tools ({', '.join(report['raw_tools'])}), xargs -P{report['jobs']}\n"
        f"    {report['raw_seconds_per_page']:6.2f} s/page   {raw['seconds']:6.1f} s"
        f"   CPU {raw['cpu_seconds']:6.1f} s   retried {raw['retries']}"
    )
    verdict = "within" if report["vellum_seconds_per_page"] <= GOAL_SECONDS_PER_PAGE else "over"
    print(
        f"  ratio Vellum/raw: {report['ratio']:.2f}; Vellum {report['vellum_seconds_per_page']:.2f}"
        f" s/page ({verdict} the {GOAL_SECONDS_PER_PAGE} s goal)"
    )
    for check, passed in report["checks"].items():
        print(f"  check {check.replace('_', ' ')}: {'yes' if passed else 'NO'}")


def _by_name(seconds: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in seconds.items())


def _counts(states: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in states.items()) or "none"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--part", choices=("a", "b", "all"), default="all", help="which part (default all)"
    )
    parser.add_argument(
        "--pages", type=int, help="pages per part (default 20 for (a), 100 for (b))"
    )
    parser.add_argument("--runs", type=int, default=1, help="runs of each part (default 1)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count(), help="xargs -P of (b)'s raw tools (CPUs)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument(
        "--timeout", type=float, default=3600, help="seconds (b)'s Vellum run may take"
    )
    args = parser.parse_args(argv)
    if (args.pages is not None and args.pages < 1) or args.runs < 1 or args.jobs < 1:
        parser.error("--pages, --runs and --jobs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_docs()
    if os.environ.pop("EXTRACTORS", None) is not None:
        log("EXTRACTORS is ignored: this measures the full default profile")
    parts = ("a", "b") if args.part == "all" else (args.part,)
    root = Path(tempfile.mkdtemp(prefix="vellum-bench-capture-"))
    report = {"cpus": os.cpu_count()}
    try:
        setup_django(str(root / "django"))
        with DocsServer(DOCS_DIR) as server:
            for part in parts:
                urls = page_urls(server.base_url, args.pages or DEFAULT_PAGES[part])
                if part == "a":
                    report["visit"] = part_visit(urls, args.runs, root)
                else:
                    report["profile"] = part_profile(urls, args, root)
    finally:
        if args.keep:
            log(f"temporary folders kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"Python docs on 127.0.0.1, {report['cpus']} CPUs")
        if "visit" in report:
            print_visit(report["visit"])
        if "profile" in report:
            print_profile(report["profile"])
    return 0 if all(report.get("profile", {}).get("checks", {}).values()) else 1


if __name__ == "__main__":
    sys.exit(main())
