"""A URL's captures over time: every snapshot of one URL across crawls, when each was taken,
whether its page changed since the one before, and which one is nearest a moment (Memento,
RFC 7089).

A capture is a Snapshot; its time is ``captured_at`` (SnapshotQuerySet.captures_of: when its
capture started). Its page's readable text (readability's article, else htmltotext's page:
core.services.search.text_sources) is summed up when it is sealed as ``content_digest``,
``sha256:<hex>`` of the text with every run of whitespace made one space, so that two captures
whose text reads the same have the same digest whatever the layout around it.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.db.models import QuerySet, Sum
from django.db.models.functions import Coalesce

from core.choices import SnapshotStatus
from core.models import Snapshot
from core.services.search import text_sources
from crawls.seeds import InvalidURL, normalize_url

DIGEST_PREFIX = "sha256:"
TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"  # 14 digits, UTC, as Wayback and pywb write them
# A shorter timestamp (a year, a month...) is padded with the earliest values (pywb does so).
TIMESTAMP_PADDING = "10000101000000"
# "http:/host/": a proxy or browser that merges slashes in paths (nginx's merge_slashes) turns
# /url/http://host/ into this; "https:host" also happens. Repaired to "scheme://".
COLLAPSED_SCHEME = re.compile(r"^(https?):/*(?!/)", re.IGNORECASE)
HAS_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:/", re.IGNORECASE)
SCHEMES_TRIED = ("https", "http")  # for a URL given without one, the first with captures


@dataclass
class Capture:
    """One snapshot of a URL as its timeline shows it.

    ``size``: bytes its results wrote. ``unchanged_since``: for a sealed capture whose page
    text has the digest of the sealed capture before it, when the earliest capture of that run
    of equal digests was taken (else None). ``previous``: the sealed capture before it (the
    one a diff compares it with), or None.
    """

    snapshot: Snapshot
    captured_at: datetime
    size: int
    unchanged_since: datetime | None = None
    previous: Capture | None = field(default=None, repr=False)

    @property
    def id(self) -> uuid.UUID:
        return self.snapshot.pk

    @property
    def status(self) -> str:
        return self.snapshot.status

    @property
    def sealed(self) -> bool:
        return self.snapshot.status == SnapshotStatus.SEALED

    @property
    def content_digest(self) -> str:
        return self.snapshot.content_digest

    @property
    def timestamp(self) -> str:
        """``captured_at`` as 14 digits, UTC (capture_timestamp)."""
        return capture_timestamp(self.captured_at)


# --- digests -------------------------------------------------------------------------------------


def page_text_digest(text: str) -> str:
    """Return ``"sha256:<64 hex>"`` of ``text`` with whitespace normalized (runs of spaces, tabs
    and line breaks made one space, none at either end), encoded as UTF-8; "" when nothing
    but whitespace is left (a page without text has no digest)."""
    normalized = " ".join(text.split())
    if not normalized:
        return ""
    return DIGEST_PREFIX + hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def readable_text_path(snapshot: Snapshot) -> str | None:
    """The path, relative to ``snapshot``'s folder, of the best readable text it has (the first
    of core.services.search.text_sources that is a file), or None."""
    for relative in text_sources():
        if (snapshot.output_dir / relative).is_file():
            return relative
    return None


def read_text(path: Path, limit: int | None = None) -> str:
    """The UTF-8 text of ``path`` (bad bytes replaced), its first ``limit`` characters when
    given. Raises OSError when it cannot be read."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read(limit if limit is not None else -1)


def snapshot_content_digest(*, snapshot: Snapshot) -> str:
    """Return page_text_digest of all of ``snapshot``'s readable text; for a capture that found
    an earlier one's page again (``unchanged_since``) without text of its own, that one's
    digest; else "". Raises OSError when its text file cannot be read."""
    relative = readable_text_path(snapshot)
    if relative is None:
        since = snapshot.unchanged_since
        return since.content_digest if since is not None else ""
    return page_text_digest(read_text(snapshot.output_dir / relative))


# --- URLs and moments ----------------------------------------------------------------------------


def url_spellings(raw: str) -> list[str]:
    """Return the normalized URLs (crawls.seeds.normalize_url) that ``raw`` may mean, best
    first: one, or for a URL without a scheme (``example.com/page``) its https and http forms.
    ``http:/host`` and ``https:host`` (slashes merged on the way) are read as ``scheme://host``.

    Raises InvalidURL when it is none of these.
    """
    text = raw.strip()
    repaired = COLLAPSED_SCHEME.sub(lambda match: f"{match.group(1)}://", text, count=1)
    if HAS_SCHEME.match(repaired) or not text:
        return [normalize_url(repaired)]
    spellings = []
    for scheme in SCHEMES_TRIED:
        try:
            spellings.append(normalize_url(f"{scheme}://{text.lstrip('/')}"))
        except InvalidURL:
            continue
    if not spellings:
        return [normalize_url(text)]  # raises, saying why
    return spellings


def url_resolve(raw: str) -> str:
    """Return the normalized URL ``raw`` names: of url_spellings, the first that has a
    capture, else the first. Raises InvalidURL as url_spellings does."""
    spellings = url_spellings(raw)
    if len(spellings) > 1:
        known = set(
            Snapshot.objects.filter(url__in=spellings).values_list("url", flat=True).distinct()
        )
        for spelling in spellings:
            if spelling in known:
                return spelling
    return spellings[0]


def parse_timestamp(value: str) -> datetime:
    """Read a Wayback timestamp, ``YYYY[MM[DD[hh[mm[ss]]]]]`` in UTC (4 to 14 digits; the
    missing part is the earliest moment it allows: ``2024`` is 2024-01-01 00:00:00). Raises
    ValueError for anything else, or a date that does not exist."""
    if not (value.isascii() and value.isdigit() and 4 <= len(value) <= 14):
        raise ValueError(f"{value!r} is not a timestamp (4 to 14 digits: YYYYMMDDhhmmss)")
    padded = value + TIMESTAMP_PADDING[len(value) :]
    try:
        return datetime.strptime(padded, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{value!r} is not a date and time that exists") from None


def capture_timestamp(moment: datetime) -> str:
    """``moment`` as a 14-digit Wayback timestamp, UTC (``YYYYMMDDhhmmss``)."""
    return moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)


# --- captures ------------------------------------------------------------------------------------


def url_captures(*, url: str, within: QuerySet | None = None) -> list[Capture]:
    """Return every capture of the normalized ``url`` among ``within`` (a Snapshot queryset,
    e.g. SnapshotQuerySet.visible_to; None: all), newest first (the latest ``pk`` first
    among captures of the same moment), with its size, ``unchanged_since`` and ``previous``.
    One query. An empty list when the URL was never archived."""
    rows = (
        _snapshots(within)
        .captures_of(url)
        .annotate(size=Coalesce(Sum("results__output_size"), 0))
        .order_by("captured_at", "pk")
    )
    captures = [Capture(row, row.captured_at, row.size) for row in rows]
    _link_sealed(captures)
    captures.reverse()
    return captures


def _link_sealed(captures: list[Capture]) -> None:
    """Set ``previous`` and ``unchanged_since`` of the sealed ones of ``captures`` (oldest
    first). Captures not sealed have no text to compare and are passed over."""
    previous: Capture | None = None
    for capture in captures:
        if not capture.sealed:
            continue
        capture.previous = previous
        digest = capture.content_digest
        if previous and digest and digest == previous.content_digest:
            capture.unchanged_since = previous.unchanged_since or previous.captured_at
        previous = capture


def url_mementos(*, url: str, within: QuerySet | None = None) -> list[Capture]:
    """The sealed captures of the normalized ``url`` among ``within`` (None: all), oldest
    first: its Mementos (RFC 7089)."""
    captures = url_captures(url=url, within=within)
    return [capture for capture in reversed(captures) if capture.sealed]


def capture_nearest(
    *, url: str, moment: datetime, within: QuerySet | None = None
) -> Snapshot | None:
    """Return the sealed snapshot of the normalized ``url`` among ``within`` (None: all)
    captured nearest ``moment`` (an aware datetime), the earlier of two as near; None when it
    has no sealed capture (RFC 7089 leaves the choice to the TimeGate; this is pywb's
    "closest").

    ``moment`` names its whole second, as a Wayback timestamp and an Accept-Datetime (RFC 7089
    §2.1.1, an HTTP date) do: a capture within that second is the one named (the earliest of
    several), even when a capture late in the second before is nearer the second's start.
    Else the nearer of the last capture before that second and the first after it. Two
    queries: the last capture before the second, and the first from its start on.
    """
    sealed = _snapshots(within).captures_of(url).filter(status=SnapshotStatus.SEALED)
    second = moment.replace(microsecond=0)
    after = sealed.filter(captured_at__gte=second).order_by("captured_at", "pk").first()
    if after is not None and after.captured_at < second + timedelta(seconds=1):
        return after  # the first capture within the second it names
    before = sealed.filter(captured_at__lt=second).order_by("-captured_at", "pk").first()
    if before is None or after is None:
        return before or after
    if after.captured_at - moment < moment - before.captured_at:
        return after
    return before


def _snapshots(within: QuerySet | None) -> QuerySet:
    return Snapshot.objects.all() if within is None else within


def latest_moment() -> datetime:
    """A moment after every capture: what a TimeGate asked for no datetime looks for."""
    return datetime.now(UTC) + timedelta(days=1)


def capture_record(capture: Capture) -> dict:
    """Return ``capture`` as JSON-ready data: id, url, crawl, timestamp (14 digits, UTC),
    captured_at (ISO 8601), status, size (bytes), content_digest, unchanged_since (ISO 8601
    or None) and previous (the id of the sealed capture before it, or None)."""
    return {
        "id": str(capture.id),
        "url": capture.snapshot.url,
        "crawl": capture.snapshot.crawl_id,
        "timestamp": capture.timestamp,
        "captured_at": capture.captured_at.isoformat(),
        "status": capture.status,
        "size": capture.size,
        "content_digest": capture.content_digest,
        "unchanged_since": (
            capture.unchanged_since.isoformat() if capture.unchanged_since else None
        ),
        "previous": str(capture.previous.id) if capture.previous else None,
    }
