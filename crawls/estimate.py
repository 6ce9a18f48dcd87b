"""The estimate before a crawl starts: how large its seeds are, and whether that fits on disk.

Every seed is asked for its ``Content-Length`` (crawls/seed_sizes.py) and the lengths are added
up. A seed that gives no length, or no answer in ESTIMATE_TIMEOUT seconds, counts as unknown: the
estimate is a lower bound, and says how many seeds it could not measure. Links found by
``--depth`` are not known before the crawl and are not counted.

The expected size is that total times ESTIMATE_COPIES (a response is kept by wget, in the WARC
and in the WACZ). A crawl whose expected size is more than the disk guard leaves room for
(orchestrator/diskguard.py) is held, with that reason; otherwise it is released to run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator.diskguard import disk_usage

if TYPE_CHECKING:
    from crawls.seed_sizes import SeedSize

logger = logging.getLogger(__name__)

ESTIMATING = "estimating the size of its seeds"  # the hold reason while the estimate runs


def summarize(sizes: list[SeedSize], *, room_bytes: int) -> dict:
    """The estimate as stored on the crawl (JSON): bytes of the seeds that gave a length, the
    expected size (times ESTIMATE_COPIES), seeds measured and unknown (a few named), the room
    the disk guard leaves and whether the crawl fits in it."""
    measured = [seed.size for seed in sizes if seed.size is not None]
    unknown = [seed for seed in sizes if seed.size is None]
    seed_bytes = sum(measured)
    expected = int(seed_bytes * settings.ESTIMATE_COPIES)
    return {
        "seed_bytes": seed_bytes,
        "expected_bytes": expected,
        "measured": len(measured),
        "unknown": len(unknown),
        "unknown_examples": [f"{seed.url}: {seed.problem}" for seed in unknown[:5]],
        "room_bytes": room_bytes,
        "fits": expected <= room_bytes,
        "at": timezone.now().isoformat(),
    }


def describe(estimate: dict) -> str:
    """One line for people: ``expected 12.3 MB (4.1 MB in 40 seed(s), kept 3 times; 2 unknown);
    the disk guard leaves 80.0 GB``."""
    unknown = f"; {estimate['unknown']} unknown" if estimate["unknown"] else ""
    return (
        f"expected {filesizeformat(estimate['expected_bytes'])} "
        f"({filesizeformat(estimate['seed_bytes'])} in {estimate['measured']} seed(s), "
        f"kept {settings.ESTIMATE_COPIES:g} times{unknown}); the disk guard leaves "
        f"{filesizeformat(estimate['room_bytes'])}"
    )


def crawl_estimate(*, crawl: Crawl) -> dict:
    """Measure ``crawl``'s seeds, store the estimate on it and return it.

    A crawl held while it was estimated (``crawl_create(hold_reason=ESTIMATING)``) is released
    when it fits and stays held, with the reason, when it does not; a crawl in any other state
    only gets its estimate. Raises OSError when the disk holding DATA_DIR cannot be measured.
    """
    # Imported here: requests (some 8 MB) is needed only when a crawl is estimated, not by
    # every process that imports this module (the admin, and with it the orchestrator).
    from crawls.seed_sizes import seed_sizes

    room = disk_usage().room_bytes
    sizes = seed_sizes(
        crawl.seed_list(), timeout=settings.ESTIMATE_TIMEOUT, workers=settings.ESTIMATE_WORKERS
    )
    estimate = summarize(sizes, room_bytes=room)
    with transaction.atomic():
        crawl = Crawl.objects.select_for_update().get(pk=crawl.pk)
        crawl.estimate = estimate
        held_for_it = crawl.status == CrawlStatus.HELD and crawl.hold_reason == ESTIMATING
        if held_for_it and estimate["fits"]:
            crawl.release()
        elif held_for_it:
            crawl.explain_hold(reason=f"would not fit under the disk guard: {describe(estimate)}")
        crawl.save()
    logger.info("crawl %s: %s", crawl.pk, describe(estimate))
    return estimate
