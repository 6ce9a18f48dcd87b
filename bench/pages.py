"""Measure the archive's pages and search with many snapshots (default 100,000).

A fresh DATA_DIR gets N sealed snapshots, each with five results (500,000 for the default) and
a search row whose text is ~2 KB of words drawn from Python's documentation vocabulary (so
words repeat as on real pages). Then, for ``--rounds`` rounds, in this process with Django's
test client, signed in as a superuser:

- baseline: ``SELECT COUNT(*)`` over the snapshots plus reading one page of 50 rows: the least
  any paginated index can cost;
- index: ``GET /`` (page 1, with results, tags, favicon and thumbnail per row);
- index, last page: ``GET /?page=<last>`` (deep pagination: OFFSET over every row);
- search, rare word: ``GET /?q=<a word on ~0.1% of pages>``;
- search, common word: ``GET /?q=<a word on ~half the pages>`` (ranks up to 1,000 matches);
- admin snapshot list: ``GET /admin/core/snapshot/`` (thumbnails, state badges, result marks,
  fixity and copies per row; the changelist counts every row);
- admin snapshot search: the admin's search box (URL and title, ``icontains``);
- admin result list: ``GET /admin/core/archiveresult/`` over every result;
- scan: the same rare word by ``text LIKE '%word%'`` over every row, what search would cost
  without the FTS index.

The report gives the median seconds of each and its ratio to the baseline measured in the same
run (these machines are noisy; ratios travel better than seconds). SQLite by default; with
DATABASE_URL, that database (which it fills: use a scratch one).

Run it from the repository root:

    .venv/bin/python bench/pages.py [--snapshots 100000] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

from throughput import log, setup_django

_WORDS = """
archive json encoder decoder csv dialect reader writer module function class method
return value object string bytes file path socket thread process queue lock
event timeout error exception warning import package install library standard python version
release note example tutorial reference index table list dict tuple set iterator
generator async await
"""
VOCABULARY = tuple(_WORDS.split())
RARE_WORD = "vellumrare"
BATCH = 2000
EXTRACTORS = ("headers", "wget", "title", "favicon", "screenshot")


def fill(count: int) -> None:
    """Create ``count`` sealed snapshots with results and search rows (bulk inserts)."""
    from django.db import transaction
    from django.utils import timezone

    from core.models import ArchiveResult, Snapshot, SnapshotText
    from crawls.models import Crawl

    rng = random.Random(7)
    crawl = Crawl.objects.create(seeds="https://bench.example/")
    now = timezone.now()
    for start in range(0, count, BATCH):
        size = min(BATCH, count - start)
        snapshots = [
            Snapshot(
                id=uuid.uuid4(), crawl=crawl, url=f"https://bench.example/page/{start + i}",
                title=f"Page {start + i}: {' '.join(rng.sample(VOCABULARY, 4))}",
                status="sealed", retry_at=None, end_ts=now,
            )
            for i in range(size)
        ]  # fmt: skip
        with transaction.atomic():
            Snapshot.objects.bulk_create(snapshots)
            ArchiveResult.objects.bulk_create(
                [
                    ArchiveResult(snapshot=s, extractor=name, status="succeeded", retry_at=None)
                    for s in snapshots
                    for name in EXTRACTORS
                ]
            )
            SnapshotText.objects.bulk_create(
                [
                    SnapshotText(snapshot=s, title=s.title, url=s.url, text=_text(rng))
                    for s in snapshots
                ]
            )
        log(f"{start + size} snapshots")


def _text(rng: random.Random) -> str:
    words = rng.choices(VOCABULARY, k=300)
    if rng.random() < 0.001:
        words.append(RARE_WORD)
    return " ".join(words)


def timed(action: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="vellum-bench-pages-")
    setup_django(data_dir)
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from core.models import Snapshot, SnapshotText

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)  # as manage.py init does
    fill(args.snapshots)
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", "bench@example.com"))
    last_page = (args.snapshots + 49) // 50

    def get(path: str) -> None:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)

    def baseline() -> None:
        Snapshot.objects.count()
        list(Snapshot.objects.order_by("-created_at")[:50])

    def scan() -> None:
        list(SnapshotText.objects.filter(text__contains=RARE_WORD).values_list("snapshot_id"))

    steps = {
        "baseline": baseline,
        "index": lambda: get("/"),
        "index, last page": lambda: get(f"/?page={last_page}"),
        "search, rare word": lambda: get(f"/?q={RARE_WORD}"),
        "search, common word": lambda: get("/?q=json"),
        "admin snapshot list": lambda: get("/admin/core/snapshot/"),
        "admin snapshot search": lambda: get("/admin/core/snapshot/?q=page/4242"),
        "admin result list": lambda: get("/admin/core/archiveresult/"),
        "scan (LIKE), rare word": scan,
    }
    figures = {name: timed(step, args.rounds) for name, step in steps.items()}
    base = figures["baseline"]
    report = {
        "database": connection.vendor,
        "snapshots": args.snapshots,
        "rounds": args.rounds,
        "seconds": {name: round(value, 4) for name, value in figures.items()},
        "ratio_to_baseline": {name: round(value / base, 1) for name, value in figures.items()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.snapshots} snapshots on {connection.vendor}, median of {args.rounds} rounds")
    for name, value in figures.items():
        print(f"  {name:<24} {value * 1000:9.1f} ms  {value / base:7.1f}x baseline")


if __name__ == "__main__":
    main()
