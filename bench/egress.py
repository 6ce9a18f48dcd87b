"""Measure what the address policy costs: wget and curl through Vellum's egress proxy against
the same commands run directly, on the same pages in the same run.

The site is the Python documentation of Debian's python3-doc package, served on 127.0.0.1 (as
in bench/throughput.py), opened to the policy with ALLOWED_PRIVATE_NETWORKS=127.0.0.1. For each
of N pages (default 30, the first N of ``library/*.html``):

- wget: ``wget --page-requisites --warc-file`` of the page (with its stylesheets, scripts and
  images), as the wget extractor fetches it;
- curl: ``curl -D`` of the page, as the headers extractor fetches it.

Each command runs directly (the baseline a user could run instead) and through an EgressProxy,
started and stopped for the run as ``run_command`` does, the two taking turns page by page for
``--rounds`` rounds. The report gives the median seconds per page of each and their ratio
(proxied / direct).

Run it from the repository root:

    .venv/bin/python bench/egress.py [--pages 30] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from throughput import DOCS_DIR, DocsServer, ensure_docs, log, page_urls, setup_django

TOOL_TIMEOUT = 60  # seconds for one command


def commands(url: str, folder: Path) -> dict[str, list[str]]:
    """The two commands for ``url``, writing into ``folder``."""
    return {
        "wget": ["wget", "--no-config", "--quiet", "--page-requisites", "--span-hosts",
                 "-e", "robots=off", "--warc-file=page", "--directory-prefix=site", url],
        "curl": ["curl", "-q", "--silent", "--dump-header", "headers.txt", "--output", "body",
                 url],
    }  # fmt: skip


def timed(cmd: list[str], folder: Path, *, proxied: bool) -> float:
    """Run ``cmd`` in ``folder`` (directly, or through a new EgressProxy); return seconds."""
    from core.extractors.egress import EgressProxy

    folder.mkdir(parents=True)
    started = time.perf_counter()
    if proxied:
        with EgressProxy() as proxy:
            env = {**os.environ, **proxy.environment()}
            subprocess.run(cmd, cwd=folder, env=env, check=True, timeout=TOOL_TIMEOUT)
            if proxy.refusals:
                raise SystemExit(f"error: the proxy refused {proxy.refusals[0]}")
    else:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        subprocess.run(cmd, cwd=folder, env=env, check=True, timeout=TOOL_TIMEOUT)
    return time.perf_counter() - started


def run_round(urls: list[str], root: Path, number: int) -> dict[str, dict[str, float]]:
    """One round: every page, every tool, direct and proxied in turn; seconds per side."""
    totals = {tool: {"direct": 0.0, "proxied": 0.0} for tool in ("wget", "curl")}
    for index, url in enumerate(urls):
        sides = ("direct", "proxied") if (index + number) % 2 == 0 else ("proxied", "direct")
        for side in sides:
            for tool, cmd in commands(url, root).items():
                folder = root / f"{number}-{index}-{tool}-{side}"
                totals[tool][side] += timed(cmd, folder, proxied=side == "proxied")
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    options = parser.parse_args()
    ensure_docs()
    with tempfile.TemporaryDirectory(prefix="vellum-bench-egress-") as work:
        setup_django(str(Path(work) / "data"))
        with DocsServer(DOCS_DIR) as server:
            urls = page_urls(server.base_url, options.pages)
            rounds = []
            for number in range(options.rounds):
                rounds.append(run_round(urls, Path(work) / "runs", number))
                log(f"round {number + 1}/{options.rounds} done")
    report = summarize(rounds, len(urls))
    print(json.dumps(report, indent=2) if options.json else format_report(report))


def summarize(rounds: list[dict], pages: int) -> dict:
    """Median seconds per page of each tool and side over the rounds, and the ratios."""
    report = {"pages": pages, "rounds": len(rounds)}
    for tool in ("wget", "curl"):
        direct = statistics.median(r[tool]["direct"] for r in rounds) / pages
        proxied = statistics.median(r[tool]["proxied"] for r in rounds) / pages
        report[tool] = {
            "direct_s_per_page": round(direct, 4),
            "proxied_s_per_page": round(proxied, 4),
            "ratio": round(proxied / direct, 2),
        }
    return report


def format_report(report: dict) -> str:
    lines = [f"{report['pages']} pages, {report['rounds']} rounds (medians)"]
    for tool in ("wget", "curl"):
        figures = report[tool]
        lines.append(
            f"{tool}: direct {figures['direct_s_per_page'] * 1000:.1f} ms/page, "
            f"through the egress proxy {figures['proxied_s_per_page'] * 1000:.1f} ms/page, "
            f"ratio {figures['ratio']:.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
