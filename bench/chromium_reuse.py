"""Measure what sharing one Chromium saves: screenshot + PDF + DOM of each page, rendered by
Vellum's shared browser against three separate ``chromium --headless`` launches.

The site is the Python documentation of Debian's python3-doc package, served on 127.0.0.1 (as
in bench/throughput.py). For each of N pages (default 20, the first N of ``library/*.html``):

- shared: Vellum's ScreenshotExtractor, PdfExtractor and DomExtractor, in this process, as one
  result actor runs them one after the other: one browser (started on the first page, and
  counted), Playwright over DevTools. The page is loaded once in a fresh context (waiting for
  its network to be quiet, up to 5 s, which the separate launches below do not) and the
  three captures share that visit.
- shared, one visit each: the same, with every extractor loading the page afresh, as when
  the three results of a snapshot are run by different actors (each with its own browser).
- separate: ``chromium --screenshot``, ``--print-to-pdf`` and ``--dump-dom`` on the page,
  each a new browser with a new profile, with the same headless flags Vellum uses.

The sides take turns for ``--rounds`` rounds (the order rotates each round), and the report
gives the median seconds per page of each and their ratios to separate (the goal for shared is
at most 0.5). Every output must be a non-empty file, or the run exits with status 1.

Run it from the repository root:

    .venv/bin/python bench/chromium_reuse.py [--pages 20] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

from throughput import DOCS_DIR, DocsServer, ensure_docs, log, page_urls, setup_django

GOAL_RATIO = 0.5
LAUNCH_TIMEOUT = 60  # seconds for one separate chromium run


def run_shared(urls: list[str], folder: Path, *, reuse_visits: bool = True) -> float:
    """Render every page with the three extractors in one shared browser; return seconds."""
    from core.extractors import browser
    from core.extractors.browser import close_shared_browser
    from core.extractors.dom import DomExtractor
    from core.extractors.errors import Outcome
    from core.extractors.pdf import PdfExtractor
    from core.extractors.screenshot import ScreenshotExtractor

    extractors = (ScreenshotExtractor(), PdfExtractor(), DomExtractor())
    reuse_seconds = browser.VISIT_REUSE_SECONDS
    browser.VISIT_REUSE_SECONDS = reuse_seconds if reuse_visits else -1
    started = time.monotonic()
    try:
        for index, url in enumerate(urls):
            for extractor in extractors:
                out_dir = folder / str(index) / extractor.name
                out_dir.mkdir(parents=True)
                output = extractor.run(SimpleNamespace(url=url), out_dir)
                if output.outcome is not Outcome.SUCCEEDED:
                    sys.exit(f"error: shared {extractor.name} of {url}: {output.error}")
                check_output(out_dir / output.output)
    finally:
        close_shared_browser()  # part of the cost: an actor stops its browser too
        browser.VISIT_REUSE_SECONDS = reuse_seconds
    return time.monotonic() - started


def separate_flags() -> list[str]:
    """Return the switches of one separate ``chromium --headless`` launch: Vellum's headless
    flags (core/extractors/browser.py), no sandbox, and Vellum's window size."""
    from core.extractors.browser import CHROMIUM_FLAGS

    flags = [flag for flag in CHROMIUM_FLAGS if not flag.startswith("--remote-debugging")]
    return [*flags, "--no-sandbox", "--window-size=1280,800"]


def run_separate(urls: list[str], folder: Path) -> float:
    """Render every page with three separate chromium launches; return seconds."""
    from core.extractors.process import find_binary

    chromium = find_binary("chromium")
    flags = separate_flags()
    started = time.monotonic()
    for index, url in enumerate(urls):
        out_dir = folder / str(index)
        out_dir.mkdir(parents=True)
        for name, option in (
            ("screenshot.png", "--screenshot={}"),
            ("output.pdf", "--print-to-pdf={}"),
            ("output.html", None),
        ):
            with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
                command = [chromium, *flags, f"--user-data-dir={profile}"]
                target = out_dir / name
                if option:
                    command.append(option.format(target))
                    stdout = subprocess.DEVNULL
                else:
                    command.append("--dump-dom")
                    stdout = open(target, "wb")  # noqa: SIM115 (closed below)
                try:
                    subprocess.run(
                        [*command, url],
                        stdout=stdout,
                        stderr=subprocess.DEVNULL,
                        timeout=LAUNCH_TIMEOUT,
                        check=True,
                    )
                finally:
                    if stdout is not subprocess.DEVNULL:
                        stdout.close()
            check_output(target)
    return time.monotonic() - started


def check_output(path: Path) -> None:
    if not path.is_file() or path.stat().st_size == 0:
        sys.exit(f"error: {path} is missing or empty")


def measure(urls: list[str], rounds: int, work: Path) -> dict:
    """Alternate the two sides ``rounds`` times; return seconds per page of each round."""
    sides = {
        "shared": run_shared,
        "shared_one_visit_each": partial(run_shared, reuse_visits=False),
        "separate": run_separate,
    }
    per_page: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for number in range(rounds):
        order = names[number % len(names) :] + names[: number % len(names)]
        for name in order:
            folder = work / f"round{number}-{name}"
            seconds = sides[name](urls, folder)
            per_page[name].append(seconds / len(urls))
            log(f"round {number + 1}: {name} {seconds / len(urls):.3f} s/page")
            shutil.rmtree(folder)
    median = {name: statistics.median(values) for name, values in per_page.items()}
    return {
        "pages": len(urls),
        "rounds": rounds,
        "seconds_per_page": per_page,
        "median_seconds_per_page": median,
        "ratio": median["shared"] / median["separate"],
        "ratio_one_visit_each": median["shared_one_visit_each"] / median["separate"],
        "goal_ratio": GOAL_RATIO,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20, help="pages to render (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_docs()
    with tempfile.TemporaryDirectory(prefix="vellum-bench-chromium-") as work:
        setup_django(str(Path(work) / "data"))
        with DocsServer(DOCS_DIR) as server:
            urls = page_urls(server.base_url, args.pages)
            report = measure(urls, args.rounds, Path(work))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        median = report["median_seconds_per_page"]
        print(
            f"{report['pages']} pages x {report['rounds']} rounds, median seconds per page "
            f"(screenshot + pdf + dom):\n"
            f"  separate chromium launches      {median['separate']:.3f}\n"
            f"  shared browser, one visit       {median['shared']:.3f}"
            f"  ratio {report['ratio']:.2f} (goal <= {GOAL_RATIO})\n"
            f"  shared browser, a visit each    {median['shared_one_visit_each']:.3f}"
            f"  ratio {report['ratio_one_visit_each']:.2f}"
        )
    return 0 if report["ratio"] <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
