"""A URL's captures and what changed between them (core/services/captures.py, changes.py):
content digests, URL spellings, Wayback timestamps, "unchanged since", the nearest capture,
the word diff and the screenshot comparison; the digest taken when a snapshot is sealed,
cleared by a re-archive, and restored by reindex and by the migration that added it."""

from __future__ import annotations

import hashlib
import importlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.apps import apps
from model_bakery import baker
from PIL import Image, ImageDraw

from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot
from core.services.captures import (
    capture_nearest,
    capture_record,
    capture_timestamp,
    page_text_digest,
    parse_timestamp,
    snapshot_content_digest,
    url_captures,
    url_mementos,
    url_resolve,
    url_spellings,
)
from core.services.changes import (
    MAX_COMPARED_PIXELS,
    captures_compare,
    screenshot_difference,
    text_diff,
    with_context,
)
from core.services.rearchive import snapshot_rearchive
from core.services.reindex import archive_reindex
from core.services.snapshots import snapshot_check_results
from core.tests.test_services import finished_snapshot
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from crawls.seeds import InvalidURL

pytestmark = pytest.mark.django_db

URL = "https://news.example/notice"
T0 = datetime(2024, 3, 5, 10, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def own_data_dir(data_dir: Path) -> Path:
    return data_dir


def notice(price: str) -> str:
    return (
        "Opening hours\n\nThe reading room opens at nine.\n"
        f"A day ticket costs {price} pounds.\nManuscripts come within half an hour.\n"
    )


def shot(path: Path, size=(200, 100), square: tuple[int, int, int, int] | None = None) -> None:
    """Write a white PNG of ``size`` with a black ``square`` (left, top, right, bottom)."""
    image = Image.new("RGB", size, "white")
    if square:
        ImageDraw.Draw(image).rectangle(square, fill="black")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def capture(
    at: datetime,
    text: str | None = None,
    *,
    status: str = SnapshotStatus.SEALED,
    url: str = URL,
    screenshot: dict | None = None,
) -> Snapshot:
    """A snapshot of ``url`` in a crawl of its own, captured ``at``: with htmltotext's text and
    its digest (as sealing takes it) when ``text`` is given, and a screenshot result when
    ``screenshot`` gives shot()'s arguments."""
    crawl = baker.make(Crawl, status=CrawlStatus.SEALED, seeds=url)
    snapshot = baker.make(
        Snapshot, crawl=crawl, url=url, status=status, start_ts=at, created_at=at, retry_at=None
    )
    if text is not None:
        path = snapshot.output_dir / "htmltotext" / "output.txt"
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
        if status == SnapshotStatus.SEALED:
            Snapshot.objects.filter(pk=snapshot.pk).update(content_digest=page_text_digest(text))
        baker.make(
            ArchiveResult, snapshot=snapshot, extractor="htmltotext", retry_at=None,
            status=ResultStatus.SUCCEEDED, output="output.txt", output_size=len(text),
            output_files=["htmltotext/output.txt"],
        )  # fmt: skip
    if screenshot is not None:
        shot(snapshot.output_dir / "screenshot" / "screenshot.png", **screenshot)
        baker.make(
            ArchiveResult, snapshot=snapshot, extractor="screenshot", retry_at=None,
            status=ResultStatus.SUCCEEDED, output="screenshot.png", output_size=1000,
            output_files=["screenshot/screenshot.png"],
        )  # fmt: skip
    return Snapshot.objects.get(pk=snapshot.pk)


# --- digests, URLs, timestamps -------------------------------------------------------------------


def test_the_digest_reads_the_text_whatever_its_whitespace() -> None:
    expected = "sha256:" + hashlib.sha256(b"A day ticket costs forty pounds.").hexdigest()

    assert page_text_digest("A day ticket costs forty pounds.") == expected
    assert page_text_digest("  A day\tticket\n\ncosts   forty pounds.\n") == expected
    assert page_text_digest("A day ticket costs fifty pounds.") != expected
    assert page_text_digest(" \n\t ") == ""


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://news.example/notice", ["https://news.example/notice"]),
        ("HTTPS://News.Example/notice#top", ["https://news.example/notice"]),
        ("http:/news.example/notice", ["http://news.example/notice"]),  # slashes merged
        ("https:news.example/notice", ["https://news.example/notice"]),
        ("http:///news.example/", ["http://news.example/"]),
        ("news.example/notice", ["https://news.example/notice", "http://news.example/notice"]),
        ("news.example:8080", ["https://news.example:8080/", "http://news.example:8080/"]),
    ],
)
def test_url_spellings_read_what_browsers_and_proxies_make_of_a_url(given, expected) -> None:
    assert url_spellings(given) == expected


@pytest.mark.parametrize("given", ["", "ftp://news.example/", "https://", "https://a b/"])
def test_what_is_not_a_url_is_refused_saying_why(given) -> None:
    with pytest.raises(InvalidURL):
        url_spellings(given)


def test_a_url_without_its_scheme_is_the_one_archived() -> None:
    capture(T0, url="http://news.example/notice")

    assert url_resolve("news.example/notice") == "http://news.example/notice"
    assert url_resolve("elsewhere.example/") == "https://elsewhere.example/"


@pytest.mark.parametrize(
    ("timestamp", "moment"),
    [
        ("20240305103015", datetime(2024, 3, 5, 10, 30, 15, tzinfo=UTC)),
        ("2024", datetime(2024, 1, 1, tzinfo=UTC)),
        ("202403", datetime(2024, 3, 1, tzinfo=UTC)),
        ("2024030510", datetime(2024, 3, 5, 10, tzinfo=UTC)),
    ],
)
def test_a_wayback_timestamp_is_read_in_utc_padded_to_its_first_second(timestamp, moment) -> None:
    assert parse_timestamp(timestamp) == moment


@pytest.mark.parametrize("bad", ["", "202", "20241305000000", "2024-03-05", "202403051030151"])
def test_a_bad_timestamp_is_a_value_error_saying_why(bad) -> None:
    with pytest.raises(ValueError, match=r"timestamp|exists"):
        parse_timestamp(bad)


# --- captures ------------------------------------------------------------------------------------


def test_captures_newest_first_each_unchanged_since_the_start_of_its_run() -> None:
    first = capture(T0, notice("forty"))
    second = capture(T0 + timedelta(days=1), notice("forty"))
    failed = capture(T0 + timedelta(days=2), status=SnapshotStatus.FAILED)
    third = capture(T0 + timedelta(days=3), "  " + notice("forty").replace("\n", "\n\n"))
    changed = capture(T0 + timedelta(days=4), notice("fifty"))
    textless = capture(T0 + timedelta(days=5))
    again = capture(T0 + timedelta(days=6), notice("fifty"))
    queued = capture(T0 + timedelta(days=7), status=SnapshotStatus.QUEUED)

    captures = url_captures(url=URL)

    order = [queued, again, textless, changed, third, failed, second, first]
    assert [c.id for c in captures] == [s.pk for s in order]
    by_id = {c.id: c for c in captures}
    assert by_id[first.pk].unchanged_since is None
    assert by_id[second.pk].unchanged_since == T0
    # A failed capture has no text: it is passed over, and the run goes on past it.
    assert by_id[third.pk].unchanged_since == T0
    assert by_id[third.pk].previous.id == second.pk
    assert by_id[changed.pk].unchanged_since is None
    # A sealed capture without text ends the run: nothing says the page stayed the same.
    assert by_id[textless.pk].unchanged_since is None
    assert by_id[again.pk].unchanged_since is None
    assert by_id[again.pk].previous.id == textless.pk
    assert by_id[failed.pk].previous is None and by_id[queued.pk].previous is None
    assert by_id[first.pk].size == len(notice("forty"))
    assert [c.id for c in url_mementos(url=URL)] == [
        s.pk for s in (first, second, third, changed, textless, again)
    ]


def test_a_capture_as_data_for_the_api_and_the_command_line() -> None:
    first = capture(T0, notice("forty"))
    second = capture(T0 + timedelta(hours=1), notice("forty"))

    record = capture_record(url_captures(url=URL)[0])

    assert record == {
        "id": str(second.pk),
        "url": URL,
        "crawl": second.crawl_id,
        "timestamp": "20240305110000",
        "captured_at": "2024-03-05T11:00:00+00:00",
        "status": "sealed",
        "size": len(notice("forty")),
        "content_digest": page_text_digest(notice("forty")),
        "unchanged_since": "2024-03-05T10:00:00+00:00",
        "previous": str(first.pk),
    }


def test_the_nearest_sealed_capture_the_earlier_of_two_as_near() -> None:
    early = capture(T0)
    capture(T0 + timedelta(hours=1), status=SnapshotStatus.FAILED)
    late = capture(T0 + timedelta(hours=2))
    capture(T0, url="https://news.example/other")

    def nearest(moment):
        return capture_nearest(url=URL, moment=moment).pk

    assert nearest(T0 - timedelta(days=300)) == early.pk
    assert nearest(T0 + timedelta(minutes=59)) == early.pk
    assert nearest(T0 + timedelta(hours=1)) == early.pk  # a tie: the earlier
    assert nearest(T0 + timedelta(minutes=61)) == late.pk
    assert nearest(T0 + timedelta(days=300)) == late.pk
    assert capture_nearest(url="https://news.example/never", moment=T0) is None


def test_two_captures_in_one_second_share_its_timestamp_and_it_names_the_earlier() -> None:
    """A Wayback timestamp names a second; a capture can take less than one."""
    first_at, second_at = T0 + timedelta(milliseconds=200), T0 + timedelta(milliseconds=700)
    earlier = capture(first_at)
    capture(second_at)

    assert capture_timestamp(first_at) == capture_timestamp(second_at)
    moment = parse_timestamp(capture_timestamp(second_at))
    assert capture_nearest(url=URL, moment=moment).pk == earlier.pk


def test_a_captures_own_timestamp_names_it_though_another_ended_the_second_before() -> None:
    """/at/ with a capture's own timestamp gives that capture: its second holds it, even when
    a capture a moment before that second began is nearer the second's start."""
    before_at, own_at = T0 - timedelta(milliseconds=100), T0 + timedelta(milliseconds=600)
    before, own = capture(before_at), capture(own_at)

    for snapshot, captured_at in ((before, before_at), (own, own_at)):
        moment = parse_timestamp(capture_timestamp(captured_at))
        assert capture_nearest(url=URL, moment=moment).pk == snapshot.pk
    # Between two seconds that hold captures, the nearer one still wins.
    assert capture_nearest(url=URL, moment=T0 + timedelta(seconds=5)).pk == own.pk


# --- the digest in the pipeline ------------------------------------------------------------------


def test_sealing_takes_the_digest_of_the_best_readable_text_and_rearchive_clears_it() -> None:
    snapshot = finished_snapshot()
    (snapshot.output_dir / "htmltotext").mkdir()
    (snapshot.output_dir / "htmltotext" / "output.txt").write_text("The whole page\nwith menus")
    (snapshot.output_dir / "readability").mkdir()
    (snapshot.output_dir / "readability" / "content.txt").write_text("Only  the\narticle")

    snapshot_check_results(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.content_digest == page_text_digest("Only the article")
    snapshot.crawl.seal(report={})
    snapshot.crawl.save()

    snapshot_rearchive(snapshot=snapshot)

    assert Snapshot.objects.get(pk=snapshot.pk).content_digest == ""


def test_a_snapshot_without_text_is_sealed_without_a_digest() -> None:
    snapshot = finished_snapshot()

    snapshot_check_results(snapshot=snapshot)

    snapshot = Snapshot.objects.get(pk=snapshot.pk)
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.content_digest == "" == snapshot_content_digest(snapshot=snapshot)


def test_reindex_takes_the_digest_again_from_the_folder() -> None:
    snapshot = finished_snapshot()
    (snapshot.output_dir / "htmltotext").mkdir()
    (snapshot.output_dir / "htmltotext" / "output.txt").write_text("Restored words")
    snapshot_check_results(snapshot=snapshot)
    Snapshot.objects.all().delete()
    Crawl.objects.all().delete()

    report = archive_reindex()

    assert report.snapshots == 1, report.problems
    assert Snapshot.objects.get().content_digest == page_text_digest("Restored words")


def test_the_migration_gives_snapshots_sealed_before_it_their_digest() -> None:
    migration = importlib.import_module("core.migrations.0012_snapshot_content_digest")
    older = capture(T0, "Sealed before digests existed")
    readable = capture(T0, "htmltotext's page")
    (readable.output_dir / "readability").mkdir()
    (readable.output_dir / "readability" / "content.txt").write_text("the article")
    textless = capture(T0)
    Snapshot.objects.update(content_digest="")

    migration.digest_sealed_snapshots(apps, None)

    digests = dict(Snapshot.objects.values_list("pk", "content_digest"))
    assert digests[older.pk] == page_text_digest("Sealed before digests existed")
    assert digests[readable.pk] == page_text_digest("the article")
    assert digests[textless.pk] == ""


# --- the word diff -------------------------------------------------------------------------------


def test_the_word_diff_names_the_words_changed_in_reading_order() -> None:
    pieces = text_diff(notice("forty"), notice("fifty") + "New: a second reading room.\n")

    changes = [(piece.kind, piece.text) for piece in pieces if piece.kind != "same"]
    assert changes == [
        ("removed", "forty"),
        ("added", "fifty"),
        ("added", "New: a second reading room."),
    ]
    assert " ".join(piece.text for piece in pieces if piece.kind != "added") == " ".join(
        notice("forty").split()
    )


def test_the_word_diff_ignores_layout() -> None:
    pieces = text_diff("one two\nthree", "one   two\n\n\nthree\n")

    assert [piece.kind for piece in pieces] == ["same"]


def test_long_unchanged_runs_are_cut_to_their_context() -> None:
    before = " ".join(f"w{n}" for n in range(100))
    after = before.replace("w50", "CHANGED")

    pieces = with_context(text_diff(before, after), context=3)

    assert [(p.kind, p.text, p.words) for p in pieces] == [
        ("skipped", "", 47),
        ("same", "w47 w48 w49", 3),
        ("removed", "w50", 1),
        ("added", "CHANGED", 1),
        ("same", "w51 w52 w53", 3),
        ("skipped", "", 46),
    ]


# --- screenshots ---------------------------------------------------------------------------------


def test_identical_screenshots_differ_in_no_pixel(tmp_path: Path) -> None:
    shot(tmp_path / "a.png", square=(10, 10, 19, 19))
    shot(tmp_path / "b.png", square=(10, 10, 19, 19))

    assert screenshot_difference(tmp_path / "a.png", tmp_path / "b.png") == (
        (200, 100), (200, 100), 0.0, None,
    )  # fmt: skip


def test_the_share_of_changed_pixels_and_where_they_are(tmp_path: Path) -> None:
    shot(tmp_path / "a.png")
    shot(tmp_path / "b.png", square=(100, 50, 119, 59))  # 20 x 10 pixels of 200 x 100

    _before, _after, share, box = screenshot_difference(tmp_path / "a.png", tmp_path / "b.png")

    assert share == pytest.approx(200 / 20_000)
    assert box == pytest.approx((0.5, 0.5, 0.1, 0.1))


def test_a_longer_page_counts_what_it_added_as_changed(tmp_path: Path) -> None:
    shot(tmp_path / "a.png", size=(200, 100))
    shot(tmp_path / "b.png", size=(200, 150))

    _a, size, share, box = screenshot_difference(tmp_path / "a.png", tmp_path / "b.png")

    assert size == (200, 150)
    assert share == pytest.approx(50 / 150)
    assert box == pytest.approx((0, 100 / 150, 1, 50 / 150))


def test_a_huge_screenshot_is_compared_reduced(tmp_path: Path) -> None:
    width, height = 1000, 2 * MAX_COMPARED_PIXELS // 1000
    shot(tmp_path / "a.png", size=(width, height))
    shot(tmp_path / "b.png", size=(width, height), square=(0, 0, width - 1, height // 2 - 1))

    _a, _b, share, _box = screenshot_difference(tmp_path / "a.png", tmp_path / "b.png")

    assert share == pytest.approx(0.5, abs=0.01)


def test_comparing_captures_without_text_or_screenshot_says_so() -> None:
    with_both = capture(T0, notice("forty"), screenshot={})
    bare = capture(T0 + timedelta(days=1))

    comparison = captures_compare(before=with_both, after=bare)

    assert comparison.text.problem.startswith("No readable text in the later capture")
    assert comparison.screenshot.problem == "No screenshot of the later capture."
    assert comparison.screenshot.share is None
    neither = captures_compare(before=bare, after=bare)
    assert neither.text.problem.startswith("No readable text in either capture")
    assert neither.screenshot.problem == "No screenshot of either capture."


def test_a_screenshot_that_is_not_an_image_is_a_problem_not_a_crash() -> None:
    before = capture(T0, notice("forty"), screenshot={})
    after = capture(T0 + timedelta(days=1), notice("forty"), screenshot={})
    (after.output_dir / "screenshot" / "screenshot.png").write_bytes(b"not a PNG")

    comparison = captures_compare(before=before, after=after)

    assert comparison.screenshot.problem.startswith("The screenshots could not be compared")
    assert not comparison.text.changed and comparison.text.problem == ""
