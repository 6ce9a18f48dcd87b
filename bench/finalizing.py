"""Measure what finalizing costs per snapshot: checks, WACZ, manifest, signature, copies.

N pages of the Python documentation (Debian's python3-doc, served on 127.0.0.1 as in
bench/throughput.py; default 20) are archived first with ``manage.py add --wait`` and the
extractors headers, wget, title and screenshot (what a WACZ packages). Then each finalizing step
is timed on every sealed snapshot folder, in this process, for ``--rounds`` rounds:

- baseline: ``sha256sum`` (GNU coreutils) over the folder's files: reading and hashing every
  byte once, the least any fixity step can cost;
- integrity: core.folder.integrity.check_snapshot over the succeeded results (WARC digests, PNG);
- wacz: core.folder.wacz.build_wacz (py-wacz in a child process, validated before it is kept);
- manifest: core.folder.manifest.write_manifest (SHA-256 of every file, written atomically);
- sign: core.folder.signing.sign_manifest (Ed25519 over the manifest);
- verify: core.services.fixity.local_problems (what ``manage.py verify`` does for the local copy);
- mirror, s3: core.folder.transfers.upload_snapshot then verify_copy, to a folder and to moto's S3
  server (``moto_server``, a process of its own on 127.0.0.1); "s3, 1 thread" the same with one
  transfer thread instead of core.folder.transfers.TRANSFER_THREADS.

The report gives the median seconds per snapshot of each step and its ratio to the baseline
measured in the same run (these machines are noisy; ratios travel better than seconds).

Run it from the repository root:

    .venv/bin/python bench/finalizing.py [--pages 20] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from throughput import DOCS_DIR, MANAGE, DocsServer, ensure_docs, log, page_urls, setup_django

EXTRACTORS = "headers,wget,title,screenshot"
WACZ_TIMEOUT = 300


def wait_for_port(port: int, timeout: float = 30) -> None:
    """Wait until something listens on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    sys.exit(f"error: nothing listens on port {port} after {timeout} s")


def archive(urls: list[str], data_dir: Path, env: dict[str, str]) -> None:
    """Archive ``urls`` into ``data_dir`` with ``manage.py add --wait`` (not timed)."""
    env = {**env, "DATA_DIR": str(data_dir), "EXTRACTORS": EXTRACTORS}
    for args in (["init"], ["add", "--wait", *urls]):
        done = subprocess.run([sys.executable, MANAGE, *args], env=env, capture_output=True,
                              text=True, cwd=MANAGE.parent)  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"error: manage.py {args[0]} failed: {done.stderr[-2000:]}")


def steps(targets: list[str]) -> dict[str, Callable]:
    """Return ``{name: step(snapshot)}`` in the order finalizing runs them, baseline first."""
    from django.conf import settings

    from core.folder import transfers as storage
    from core.folder.integrity import check_snapshot
    from core.folder.manifest import MANIFEST_NAME, payload_files, sha256_file, write_manifest
    from core.folder.signing import sign_manifest
    from core.folder.transfers import upload_snapshot, verify_copy
    from core.folder.wacz import build_wacz
    from core.services.fixity import local_problems

    def baseline(snapshot) -> None:
        files = [str(path) for path in payload_files(snapshot.output_dir)]
        subprocess.run(["sha256sum", *files], check=True, stdout=subprocess.DEVNULL)

    def integrity(snapshot) -> None:
        results = snapshot.results.filter(status="succeeded")
        if check_snapshot(snapshot.output_dir, results):
            sys.exit(f"error: {snapshot.url} fails the integrity check")

    def wacz(snapshot) -> None:
        build_wacz(snapshot.output_dir, url=snapshot.url, title=snapshot.title,
                   archived_at=snapshot.start_ts, timeout=WACZ_TIMEOUT)  # fmt: skip

    def verify(snapshot) -> None:
        problems, _files = local_problems(snapshot)
        if problems:
            sys.exit(f"error: {snapshot.url} does not verify: {problems[:3]}")

    def copy_to(target: str, threads: int = storage.TRANSFER_THREADS) -> Callable:
        def copy(snapshot) -> None:
            with transfer_threads(threads):
                upload_snapshot(target, snapshot.output_dir, str(snapshot.pk))
                if verify_copy(target, snapshot.output_dir, str(snapshot.pk)):
                    sys.exit(f"error: the copy of {snapshot.url} on {target} does not verify")

        return copy

    def manifest(snapshot) -> None:
        write_manifest(snapshot.output_dir)
        # The next round's verify compares against the manifest sealed: this one, from now on
        # (in memory only; the database keeps the real one).
        snapshot.manifest_sha256 = sha256_file(snapshot.output_dir / MANIFEST_NAME)

    chosen = {
        "baseline": baseline,
        "integrity": integrity,
        "wacz": wacz,
        "manifest": manifest,
        "sign": lambda snapshot: sign_manifest(snapshot.output_dir),
        "verify": verify,
    }
    chosen.update({target: copy_to(target) for target in targets if target in settings.STORAGES})
    chosen["s3, 1 thread"] = copy_to("s3", threads=1)  # what the transfer threads save
    return chosen


@contextmanager
def transfer_threads(count: int):
    """Run the block with ``count`` transfer threads in core.folder.transfers (else its default)."""
    from core.folder import transfers as storage

    default = storage.TRANSFER_THREADS
    if count != default:
        storage.TRANSFER_THREADS = count
        storage._transfers.cache_clear()
    try:
        yield
    finally:
        if count != default:
            storage.TRANSFER_THREADS = default
            storage._transfers.cache_clear()


def measure(snapshots: list, chosen: dict[str, Callable], rounds: int) -> dict[str, list[float]]:
    """Time every step on every snapshot, ``rounds`` times; return seconds per snapshot."""
    seconds: dict[str, list[float]] = {name: [] for name in chosen}
    for number in range(rounds):
        log(f"round {number + 1} of {rounds}")
        for name, step in chosen.items():
            started = time.perf_counter()
            for snapshot in snapshots:
                step(snapshot)
            seconds[name].append((time.perf_counter() - started) / len(snapshots))
    return seconds


def summarize(seconds: dict[str, list[float]], snapshots: list) -> dict:
    baseline = statistics.median(seconds["baseline"])
    sizes = [sum(p.stat().st_size for p in s.output_dir.rglob("*") if p.is_file())
             for s in snapshots]  # fmt: skip
    return {
        "snapshots": len(snapshots),
        "median_folder_bytes": int(statistics.median(sizes)),
        "steps": {
            name: {
                "seconds_per_snapshot": round(statistics.median(values), 4),
                "ratio_to_baseline": round(statistics.median(values) / baseline, 2),
                "rounds": [round(value, 4) for value in values],
            }
            for name, values in seconds.items()
        },
    }


def print_report(summary: dict) -> None:
    print(f"{summary['snapshots']} snapshots, median folder {summary['median_folder_bytes']:,} B")
    print(f"{'step':<14}{'s/snapshot':>12}{'/ sha256sum':>13}")
    for name, step in summary["steps"].items():
        print(f"{name:<14}{step['seconds_per_snapshot']:>12.4f}{step['ratio_to_baseline']:>13.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20, help="Pages to archive (default 20).")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of timing (default 3).")
    parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
    args = parser.parse_args(argv)
    ensure_docs()
    root = Path(tempfile.mkdtemp(prefix="vellum-bench-finalizing-"))
    sys.path.insert(0, str(MANAGE.parent))
    from archive.testing import MotoS3Server

    s3 = MotoS3Server()  # its port and client; the server itself runs in a process of its own,
    # so that serving S3 does not compete for this process's GIL with the copies it serves
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(s3.port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(s3.port)
        targets = {
            "mirror": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                       "OPTIONS": {"location": str(root / "mirror")}},
            "s3": s3.storage_entry(s3.create_bucket()),
        }  # fmt: skip
        env = {**os.environ, "PACKAGE_WACZ": "0"}  # packaging is measured below, not here
        with DocsServer(DOCS_DIR) as server:
            urls = page_urls(server.base_url, args.pages)
            log(f"archiving {len(urls)} pages ({EXTRACTORS})")
            archive(urls, root / "data", env)
        os.environ["STORAGE_TARGETS"] = json.dumps(targets)
        setup_django(str(root / "data"))
        from core.models import Snapshot

        snapshots = list(Snapshot.objects.filter(status="sealed").order_by("url"))
        if len(snapshots) != len(urls):
            sys.exit(f"error: {len(snapshots)} of {len(urls)} snapshots sealed")
        summary = summarize(measure(snapshots, steps(list(targets)), args.rounds), snapshots)
    finally:
        moto.terminate()
        moto.wait()
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(summary, indent=2) if args.json else "", end="")
    if not args.json:
        print_report(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
