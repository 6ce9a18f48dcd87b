"""Measure what archiving unchanged pages again stores (issue 20 item 3: under 10 %).

N pages of the Python documentation (Debian's python3-doc, served on 127.0.0.1 as in
bench/throughput.py; default 50) are archived twice into one fresh DATA_DIR, each time with
``manage.py add --file urls.txt --wait`` and the extractors ``--extractors`` (default: the
default profile, every extractor, as ``add`` runs them; ``--extractors lean`` is headers, wget,
title, favicon, htmltotext and outlinks: the ones that need no browser). After each crawl
the bytes in DATA_DIR are counted as ``du --apparent-size`` counts them: every file once per
inode, so a hard-linked file (core/folder/blobs.py) counts once. The report gives:

- the bytes each crawl added to the archive (snapshot folders and the shared-copy store) and to
  the whole DATA_DIR (database, logs and inputs too), their ratio second/first (goal: under
  0.10), and the disk blocks they take (``du`` without ``--apparent-size``);
- what the first crawl would have stored without sharing (every file's own size), the
  revisit records written, and where the second crawl's bytes went, by kind of file;
- checks: every snapshot sealed, ``manage.py verify --all --local-only`` passes, a BagIt export
  of the second crawl alone validates (``bagit.py --validate``), and after
  ``manage.py remove --crawl <first> --delete`` the second crawl still verifies.

Run it from the repository root (a few minutes for 50 pages on two cores):

    .venv/bin/python bench/dedup.py [--pages 50] [--extractors lean|NAME,...] [--only-changes]
                                    [--json] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from throughput import DOCS_DIR, MANAGE, DocsServer, ensure_docs, log, page_urls

LEAN = "headers,wget,title,favicon,htmltotext,outlinks"
GOAL_RATIO = 0.10
BAGIT = Path(sys.executable).parent / "bagit.py"
BLOBS = "blobs"


def usage(folder: Path) -> dict[tuple[int, int], tuple[int, int, str]]:
    """``{(device, inode): (bytes, disk bytes, path)}`` of every file under ``folder``."""
    found = {}
    for root, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            key = (info.st_dev, info.st_ino)
            # A file shared through the store is named by its place in a snapshot folder.
            if key not in found or f"/{BLOBS}/" in found[key][2]:
                found[key] = (info.st_size, info.st_blocks * 512, str(path))
    return found


def totals(files: dict) -> tuple[int, int]:
    return sum(size for size, _blocks, _path in files.values()), sum(
        blocks for _size, blocks, _path in files.values()
    )


def kind(path: str) -> str:
    """What a file is, for the breakdown of where a crawl's bytes went."""
    name = path.rsplit("/", 1)[-1]
    if f"/{BLOBS}/" in path:
        return "shared copies no snapshot file names"
    if "/archive/" not in path:
        return "database, logs, inputs"
    if name.endswith((".warc.gz", ".warc")):
        return "WARC"
    if name.endswith(".log"):
        return "logs"
    for prefix in ("snapshot.wacz", "index.json", "manifest-sha256.txt"):
        if name.startswith(prefix):
            return prefix if prefix != "manifest-sha256.txt" else "manifest and signature"
    part = path.split("/archive/", 1)[1].split("/")
    return f"{part[1]}/ outputs" if len(part) > 2 else name


def manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MANAGE), *args], env=env, capture_output=True,
                          text=True, cwd=MANAGE.parent)  # fmt: skip


def crawl(urls_file: Path, env: dict[str, str], data_dir: Path, *options: str) -> dict:
    """Archive the URLs once more (``add`` with ``options``); return what the crawl added to
    DATA_DIR."""
    before = usage(data_dir)
    done = manage(["add", "--file", str(urls_file), "--wait", *options], env)
    if done.returncode != 0:
        sys.exit(f"error: manage.py add failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    after = usage(data_dir)
    new = {key: value for key, value in after.items() if key not in before}
    archive = {k: v for k, v in after.items() if "/archive/" in v[2] or "/blobs/" in v[2]}
    archive_before = {k: v for k, v in before.items() if "/archive/" in v[2] or "/blobs/" in v[2]}
    by_kind = Counter()
    for size, _blocks, path in new.values():
        by_kind[kind(path)] += size
    return {
        "archive_bytes": totals(archive)[0] - totals(archive_before)[0],
        "archive_disk_bytes": totals(archive)[1] - totals(archive_before)[1],
        "data_dir_bytes": totals(after)[0] - totals(before)[0],
        "data_dir_disk_bytes": totals(after)[1] - totals(before)[1],
        "by_kind": dict(by_kind.most_common()),
    }


def logical_bytes(data_dir: Path) -> int:
    """Every file of the snapshot folders at its own size, as if nothing were shared."""
    total = 0
    for root, _dirs, names in os.walk(data_dir / "archive"):
        total += sum((Path(root) / name).lstat().st_size for name in names)
    return total


def crawl_ids(env: dict[str, str]) -> list[int]:
    code = (
        "from crawls.models import Crawl; print(sorted(Crawl.objects.values_list('pk', flat=True)))"
    )
    return shell_json(code, env)


def counts(env: dict[str, str]) -> dict:
    code = (
        "import json; from core.models import Snapshot, PayloadRecord, PayloadRevisit; "
        "print(json.dumps({'sealed': Snapshot.objects.filter(status='sealed').count(), "
        "'snapshots': Snapshot.objects.count(), 'originals': PayloadRecord.objects.count(), "
        "'revisits': PayloadRevisit.objects.count()}))"
    )
    return shell_json(code, env)


def shell_json(code: str, env: dict[str, str]) -> object:
    """Run ``code`` in ``manage.py shell``; return the JSON its last line prints (the shell
    says first how many objects it imported)."""
    done = manage(["shell", "--no-imports", "-c", code], env)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        sys.exit(f"error: manage.py shell failed:\n{done.stderr[-1500:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=50, help="Pages to archive (default 50).")
    parser.add_argument(
        "--extractors",
        default="",
        help=f"Comma-separated names (default: the default profile); 'lean' is {LEAN}.",
    )
    parser.add_argument("--json", action="store_true", help="Print a JSON summary.")
    parser.add_argument("--keep", action="store_true", help="Keep the DATA_DIR (say where).")
    parser.add_argument(
        "--only-changes",
        action="store_true",
        help="Make the second crawl keep only changes (add --only-changes), as a schedule may.",
    )
    args = parser.parse_args(argv)
    if args.extractors == "lean":
        args.extractors = LEAN
    ensure_docs()
    root = Path(tempfile.mkdtemp(prefix="vellum-bench-dedup-"))
    data_dir = root / "data"
    env = {**os.environ, "DATA_DIR": str(data_dir), "EXTRACTORS": args.extractors,
           "DJANGO_SETTINGS_MODULE": "archive.settings"}  # fmt: skip
    names = args.extractors.split(",") if args.extractors else ["default profile"]
    summary: dict = {"pages": args.pages, "extractors": names, "only_changes": args.only_changes}
    checks = {}
    try:
        if manage(["init"], env).returncode != 0:
            sys.exit("error: manage.py init failed")
        with DocsServer(DOCS_DIR) as server:
            urls_file = root / "urls.txt"
            urls_file.write_text("\n".join(page_urls(server.base_url, args.pages)) + "\n")
            log(f"first crawl of {args.pages} pages ({', '.join(summary['extractors'])})")
            summary["first"] = crawl(urls_file, env, data_dir)
            summary["first"]["logical_bytes"] = logical_bytes(data_dir)
            log("second crawl of the same pages")
            options = ["--only-changes"] if args.only_changes else []
            summary["second"] = crawl(urls_file, env, data_dir, *options)
        summary["index"] = counts(env)
        checks["all sealed"] = summary["index"]["sealed"] == 2 * args.pages
        checks["verify passes"] = manage(["verify", "--all", "--local-only"], env).returncode == 0
        first_crawl, second_crawl = crawl_ids(env)
        bag = root / "bag"
        manage(["export", "--format", "bagit", "--crawl", str(second_crawl), str(bag)], env)
        bagit = subprocess.run([sys.executable, str(BAGIT), "--validate", str(bag)],
                               capture_output=True)  # fmt: skip
        checks["bag of the second crawl validates"] = bagit.returncode == 0
        removed = manage(["remove", "--crawl", str(first_crawl), "--delete", "--yes"], env)
        checks["first crawl removed"] = removed.returncode == 0
        checks["second crawl verifies after"] = (
            manage(["verify", "--crawl", str(second_crawl), "--local-only"], env).returncode == 0
        )
        summary["after_removal_archive_bytes"] = totals(
            {k: v for k, v in usage(data_dir).items() if "/archive/" in v[2] or "/blobs/" in v[2]}
        )[0]
    finally:
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    first, second = summary["first"], summary["second"]
    summary["ratio"] = second["archive_bytes"] / first["archive_bytes"]
    summary["ratio_data_dir"] = second["data_dir_bytes"] / first["data_dir_bytes"]
    summary["ratio_disk"] = second["archive_disk_bytes"] / first["archive_disk_bytes"]
    summary["checks"] = checks
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_report(summary)
    return 0 if all(checks.values()) else 1


def print_report(summary: dict) -> None:
    first, second = summary["first"], summary["second"]
    print(f"pages        {summary['pages']} Python documentation pages on 127.0.0.1, twice")
    print(f"extractors   {', '.join(summary['extractors'])}")
    if summary["only_changes"]:
        print("second crawl keeps only changes (add --only-changes)")
    print(f"index        {summary['index']['originals']} original records, "
          f"{summary['index']['revisits']} revisit records")  # fmt: skip
    print()
    print(f"{'':28}{'first crawl':>14}{'second crawl':>14}{'ratio':>8}")
    rows = [
        ("archive bytes (du -b)", "archive_bytes", summary["ratio"]),
        ("archive disk (du)", "archive_disk_bytes", summary["ratio_disk"]),
        ("all of DATA_DIR bytes", "data_dir_bytes", summary["ratio_data_dir"]),
    ]
    for label, key, ratio in rows:
        print(f"{label:28}{first[key]:>14,}{second[key]:>14,}{ratio:>8.3f}")
    print(f"{'without sharing (logical)':28}{first['logical_bytes']:>14,}")
    verdict = "under" if summary["ratio"] < GOAL_RATIO else "OVER"
    print(f"\nsecond/first {summary['ratio']:.3f}: {verdict} the {GOAL_RATIO} goal")
    print("\nwhere the second crawl's bytes went:")
    for name, size in second["by_kind"].items():
        print(f"  {name:30}{size:>12,}")
    left = summary["after_removal_archive_bytes"]
    print(f"\nafter removing the first crawl: archive {left:,} bytes")
    for check, passed in summary["checks"].items():
        print(f"check {check}: {'yes' if passed else 'NO'}")


if __name__ == "__main__":
    sys.exit(main())
