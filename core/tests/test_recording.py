"""The browser's recording (core/extractors/recording.py, recorder.py) of pages that build
themselves with scripts (core/tests/difficult_site.py), against wget's WARC of the same pages.

Each page is visited once by the real shared Chromium: the screenshot loads it (behaviours
included), the recording extractor writes what that visit fetched, then wget archives the page
as it always has. The tests read both WARCs with warcio, digests checked, and ask whether each
resource a page's marker depends on is recorded. ``test_the_table`` prints the page-by-page
comparison (run with ``-s`` to see it).
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders

from core.extractors.base import ExtractorOutput
from core.extractors.browser import close_shared_browser
from core.extractors.errors import Outcome
from core.extractors.recording import RecordingExtractor
from core.extractors.screenshot import ScreenshotExtractor
from core.extractors.wget import WgetExtractor
from core.folder.revisits import rewrite_warc
from core.folder.wacz import build_wacz, supplement_warc, validate_wacz
from core.tests.difficult_site import (
    CLIP_WEBM,
    CUT_SHORT_PROMISED,
    ITEMS,
    LATE,
    PAGES,
    SEARCHES,
    SUBSCRIPTION,
    DifficultSite,
    Request,
    Resource,
)

pytestmark = pytest.mark.browser

RECORDING_WARC = "recording/warc/browser.warc.gz"
WGET_WARC = "wget/warc/archive.warc"  # as wget writes it: finalizing packs it (.gz)
PACKED_WGET_WARC = "wget/warc/archive.warc.gz"
# ISO 28500 §5.4: W3C-ISO8601 in UTC ("Z"), to the second or finer.
WARC_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z")


# --- reading WARCs -------------------------------------------------------------------------------


@dataclass
class Record:
    """One WARC record as read back: its type, target URI, record id, WARC-Date, the id it
    is concurrent to, its HTTP head, its payload as stored, and whether its digests verified
    (None: it carries none)."""

    type: str
    uri: str
    id: str
    date: str
    concurrent_to: str | None
    http: StatusAndHeaders | None
    payload: bytes
    digests_ok: bool | None


def read_warc(path: Path) -> list[Record]:
    """Read every record of ``path``, checking its block and payload digests (warcio)."""
    records = []
    with open(path, "rb") as stream:
        for record in ArchiveIterator(stream, check_digests=True):
            payload = record.raw_stream.read()  # all of it: the digests are checked on read
            headers = record.rec_headers
            records.append(
                Record(
                    type=record.rec_type,
                    uri=headers.get_header("WARC-Target-URI") or "",
                    id=headers.get_header("WARC-Record-ID"),
                    date=headers.get_header("WARC-Date"),
                    concurrent_to=headers.get_header("WARC-Concurrent-To"),
                    http=record.http_headers,
                    payload=payload,
                    digests_ok=record.digest_checker.passed,
                )
            )
    return records


@dataclass
class Exchange:
    """A response record and the request record that is concurrent to it (None in a WARC
    that does not link them)."""

    response: Record
    request: Record | None

    @property
    def status(self) -> int:
        return int(self.response.http.get_statuscode())


def exchanges(records: list[Record]) -> list[Exchange]:
    """Pair each response with its request through WARC-Concurrent-To (either way round)."""
    by_id = {record.id: record for record in records}
    requests = {record.concurrent_to: record for record in records if record.type == "request"}
    found = []
    for record in records:
        if record.type != "response":
            continue
        request = requests.get(record.id)
        linked = by_id.get(record.concurrent_to or "")
        found.append(Exchange(record, request or (linked if linked and linked.type == "request"
                                                  else None)))  # fmt: skip
    return found


def answers(records: list[Record], url: str, resource: Resource) -> list[Exchange]:
    """The successful exchanges of ``resource`` at ``url``: its method and body, answered 2xx."""
    return [
        exchange
        for exchange in exchanges(records)
        if exchange.response.uri == url
        and 200 <= exchange.status < 300
        and asked_as(exchange.request, resource)
    ]


def asked_as(request: Record | None, resource: Resource) -> bool:
    """True if ``request`` (None: a WARC without request records) asked for ``resource``
    with its method and body."""
    if request is None:
        return resource.method == "GET"
    return (request.http.protocol, request.payload) == (resource.method, resource.body)


# --- capturing pages -----------------------------------------------------------------------------


@dataclass
class Capture:
    """One page's visit: the screenshot that loaded it, the recording of the same visit, then
    wget's run, all in ``folder`` laid out as a snapshot's; ``browser_asked`` is what the
    browser's extractors asked the site, and ``loads`` how many times that was the page itself."""

    folder: Path
    screenshot: ExtractorOutput
    recording: ExtractorOutput
    wget: ExtractorOutput
    browser_asked: list[Request]
    loads: int

    @property
    def recorded(self) -> list[Record]:
        return read_warc(self.folder / RECORDING_WARC)

    @property
    def wget_records(self) -> list[Record]:
        return read_warc(self.folder / WGET_WARC)


class Captures:
    """Each page of the site captured once, on first use, for every test of the module."""

    def __init__(self, site: DifficultSite, root: Path) -> None:
        self.site = site
        self.root = root
        self.done: dict[str, Capture] = {}

    def of(self, path: str) -> Capture:
        if path not in self.done:
            self.done[path] = self._capture(path)
        return self.done[path]

    def _capture(self, path: str) -> Capture:
        folder = self.root / path.strip("/").replace("/", "-")
        snapshot = SimpleNamespace(url=self.site.url(path))
        outputs = {}
        with self.site.lock:
            before = len(self.site.requests)
        for extractor in (ScreenshotExtractor(), RecordingExtractor()):
            (folder / extractor.name).mkdir(parents=True)
            outputs[extractor.name] = extractor.run(snapshot, folder / extractor.name)
        with self.site.lock:
            asked = self.site.requests[before:]
        loads = len([r for r in asked if (r.method, r.path) == ("GET", path)])
        (folder / "wget").mkdir()
        outputs["wget"] = WgetExtractor().run(snapshot, folder / "wget")
        return Capture(folder=folder, browser_asked=asked, loads=loads, **outputs)


@pytest.fixture(scope="module")
def difficult_site() -> Iterator[DifficultSite]:
    site = DifficultSite().start()
    yield site
    site.stop()


@pytest.fixture(scope="module")
def captures(
    difficult_site: DifficultSite, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Captures]:
    close_shared_browser()
    yield Captures(difficult_site, tmp_path_factory.mktemp("captures"))
    close_shared_browser()


def captured(captures: Captures, key: str) -> tuple[Capture, list[Record]]:
    """Capture the page ``key`` of PAGES; check that both captures succeeded, from one visit,
    and that every record's digests verify; return the capture and the recording's records."""
    capture = captures.of(PAGES[key].path)
    for output in (capture.screenshot, capture.recording, capture.wget):
        assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    assert capture.recording.output == "warc/browser.warc.gz"
    assert capture.loads == 1  # the recording captured the screenshot's visit: one load
    records = capture.recorded
    assert [r.uri for r in records if r.digests_ok is False] == []
    assert all(r.digests_ok for r in records if r.type in ("response", "request")), "no digest"
    assert [r.date for r in records if not WARC_DATE.fullmatch(r.date)] == []
    # Every request record is linked to the response it got, and every response has one.
    responses = {r.id for r in records if r.type == "response"}
    linked = [r.concurrent_to for r in records if r.type == "request"]
    assert sorted(linked) == sorted(responses)
    return capture, records


def recorded_answer(captures: Captures, records: list[Record], resource: Resource) -> Exchange:
    """The one successful exchange of ``resource`` in ``records``."""
    found = answers(records, captures.site.resource_url(resource), resource)
    assert len(found) == 1, (resource, [e.response.uri for e in exchanges(records)])
    return found[0]


def in_wget_warc(captures: Captures, capture: Capture, resource: Resource) -> bool:
    return bool(answers(capture.wget_records, captures.site.resource_url(resource), resource))


# --- the difficulties, one by one ----------------------------------------------------------------


def test_a_single_page_apps_fetched_json_is_recorded_decoded(captures: Captures) -> None:
    capture, records = captured(captures, "spa")
    (items,) = PAGES["spa"].resources

    exchange = recorded_answer(captures, records, items)
    response = exchange.response
    # The site sent it gzip-encoded; the record holds the decoded JSON, described as such.
    assert [r.gzipped for r in captures.site.requested(items.path)] == [True]
    assert json.loads(response.payload) == ITEMS
    assert response.http.get_header("Content-Encoding") is None
    assert response.http.get_header("Content-Length") == str(len(response.payload))
    assert response.http.get_header("Content-Type") == "application/json"
    assert exchange.request.http.protocol == "GET"
    assert not in_wget_warc(captures, capture, items)
    # The page itself: recorded once, as the one visit loaded it.
    page_url = captures.site.url(PAGES["spa"].path)
    assert len([e for e in exchanges(records) if e.response.uri == page_url]) == 1


def test_post_requests_are_recorded_with_their_bodies(captures: Captures) -> None:
    capture, records = captured(captures, "post")

    answered = {}
    for resource in PAGES["post"].resources:
        exchange = recorded_answer(captures, records, resource)
        request = exchange.request
        # The request record carries the body and is linked to its response.
        assert request.concurrent_to == exchange.response.id
        assert request.payload == resource.body
        assert request.http.get_header("Content-Length") in (None, str(len(resource.body)))
        answered[resource.body] = exchange.response.payload
        assert not in_wget_warc(captures, capture, resource)
    assert json.loads(answered[SEARCHES[0]]) == {"answer": "POST-ANSWER-ALPHA"}
    assert json.loads(answered[SEARCHES[1]]) == {"answer": "POST-ANSWER-BETA"}
    assert answered[SUBSCRIPTION] == b"SUBSCRIBED-TO-QUILL"
    search = recorded_answer(captures, records, PAGES["post"].resources[0]).request
    assert search.http.get_header("Content-Type") == "application/json"


def test_images_an_intersection_observer_swaps_in_are_recorded(captures: Captures) -> None:
    capture, records = captured(captures, "observer")
    (image,) = PAGES["observer"].resources

    exchange = recorded_answer(captures, records, image)

    assert exchange.response.payload == captures.site.files[image.path][1]
    assert not in_wget_warc(captures, capture, image)


def test_lazy_images_far_below_the_fold_are_recorded(captures: Captures) -> None:
    capture, records = captured(captures, "lazy")
    (image,) = PAGES["lazy"].resources

    exchange = recorded_answer(captures, records, image)

    assert exchange.response.payload == captures.site.files[image.path][1]
    assert in_wget_warc(captures, capture, image)  # its src is in the HTML: wget has it too


def test_the_second_page_of_an_infinite_scroll_is_recorded(captures: Captures) -> None:
    capture, records = captured(captures, "infinite")
    (page_2,) = PAGES["infinite"].resources

    response = recorded_answer(captures, records, page_2).response

    # Sent chunked; recorded as one body with its length, the chunking gone.
    assert [r.chunked for r in captures.site.requested(page_2.path)] == [True]
    assert "INFINITE-PAGE-2-MARKER" in json.loads(response.payload)["items"]
    assert response.http.get_header("Transfer-Encoding") is None
    assert response.http.get_header("Content-Length") == str(len(response.payload))
    assert not in_wget_warc(captures, capture, page_2)


def test_an_imported_stylesheet_its_font_and_background_are_recorded(captures: Captures) -> None:
    _capture, records = captured(captures, "import")

    for resource in PAGES["import"].resources:
        exchange = recorded_answer(captures, records, resource)
        assert exchange.response.payload == captures.site.files[resource.path][1]


def test_frames_and_what_their_scripts_fetch_are_recorded(captures: Captures) -> None:
    capture, records = captured(captures, "frames")

    for resource in PAGES["frames"].resources:
        recorded_answer(captures, records, resource)
    fetched = [r for r in PAGES["frames"].resources if r.path.startswith("/api/")]
    assert [in_wget_warc(captures, capture, resource) for resource in fetched] == [False, False]
    cross = captures.site.url("/api/frame-cross.json", cross_site=True)
    assert cross.startswith("http://localhost:")


def test_content_a_timer_fetches_a_second_after_the_load_is_recorded(captures: Captures) -> None:
    capture, records = captured(captures, "delayed")
    (late,) = PAGES["delayed"].resources

    response = recorded_answer(captures, records, late).response

    assert json.loads(response.payload) == LATE
    assert not in_wget_warc(captures, capture, late)


def test_the_chosen_candidates_of_picture_and_srcset_are_recorded_not_their_fallbacks(
    captures: Captures,
) -> None:
    _capture, records = captured(captures, "responsive")

    for resource in PAGES["responsive"].resources:
        exchange = recorded_answer(captures, records, resource)
        assert exchange.response.payload == captures.site.files[resource.path][1]
    # At a device pixel ratio of 1 the browser fetches neither fallback nor the 2x candidate.
    recorded = {record.uri for record in records}
    unchosen = ("/img/picture-fallback.png", "/img/srcset-fallback.png", "/img/srcset-2x.png")
    assert [path for path in unchosen if captures.site.url(path) in recorded] == []


def test_a_video_served_by_byte_ranges_is_recorded_whole(captures: Captures) -> None:
    capture, records = captured(captures, "video")
    (clip,) = PAGES["video"].resources
    size = len(CLIP_WEBM)

    exchange = recorded_answer(captures, records, clip)

    # Chromium asked for a range; the site answered 206 with all of the file.
    asked = [r for r in capture.browser_asked if r.path == clip.path]
    assert [(r.range, r.status) for r in asked] == [("bytes=0-", 206)]
    assert exchange.status == 206
    assert exchange.request.http.get_header("Range") == "bytes=0-"
    assert exchange.response.http.get_header("Content-Range") == f"bytes 0-{size - 1}/{size}"
    assert exchange.response.payload == CLIP_WEBM


def test_a_static_page_is_recorded_as_wget_records_it(captures: Captures) -> None:
    capture, records = captured(captures, "static")

    for resource in PAGES["static"].resources:
        recorded = recorded_answer(captures, records, resource).response.payload
        (wget,) = answers(capture.wget_records, captures.site.resource_url(resource), resource)
        assert recorded == wget.response.payload
    # What only a browser without scripts fetches is wget's alone.
    noscript = Resource("/img/noscript.png")
    assert in_wget_warc(captures, capture, noscript)
    assert not answers(records, captures.site.resource_url(noscript), noscript)


def test_what_failed_is_missing_and_what_was_refused_is_a_refusal(captures: Captures) -> None:
    site = captures.site
    capture = captures.of("/broken.html")
    cut_short = site.url("/api/cut-short")
    refused = f"http://127.0.0.2:{site.port}/api/refused.json"
    closed = f"http://127.0.0.1:{site.closed_port}/api/closed.json"

    recording = capture.recording
    assert (recording.outcome, recording.error) == (Outcome.SUCCEEDED, "")
    missing = {entry["url"]: entry["reason"] for entry in recording.missing}
    assert set(missing) == {cut_short, closed}, missing
    assert missing[cut_short] == "chromium: net::ERR_CONTENT_LENGTH_MISMATCH"
    assert "Connection refused" in missing[closed]
    assert [refusal.target for refusal in recording.refusals] == [refused]
    assert "loopback" in recording.refusals[0].reason
    # None of the three is in the record: no partial body, no answer of the proxy's own.
    uris = {record.uri for record in capture.recorded if record.type == "response"}
    assert not uris & {cut_short, refused, closed}
    assert site.requested("/api/cut-short")  # it did reach the site, and was cut short
    assert CUT_SHORT_PROMISED > 100


def test_the_table(captures: Captures) -> None:
    """Print, for every page and every resource its markers need, whether wget's WARC and the
    recording hold it; the recording must hold them all, and wget those of the static page."""
    rows = []
    for key, page in PAGES.items():
        capture, records = captured(captures, key)
        for resource in page.resources:
            url = captures.site.resource_url(resource)
            wget = in_wget_warc(captures, capture, resource)
            recorded = bool(answers(records, url, resource))
            asked = f"{resource.method} {url.split('//', 1)[1].split('/', 1)[0]}{resource.path}"
            if resource.body:
                asked += f" {resource.body.decode()}"
            rows.append((key, asked, wget, recorded))
    yes = {True: "yes", False: "-"}
    width = max(len(asked) for _key, asked, _wget, _recorded in rows)
    lines = [f"{'page':<9} {'resource':<{width}}  wget  recording"]
    lines += [
        f"{key:<9} {asked:<{width}}  {yes[wget]:<4}  {yes[recorded]}"
        for key, asked, wget, recorded in rows
    ]
    print("\nthe resources each page's markers need, in each WARC:\n" + "\n".join(lines))
    assert [row[1] for row in rows if not row[3]] == []
    assert all(wget for key, _asked, wget, _recorded in rows if key == "static")


# --- packaging both WARCs ------------------------------------------------------------------------


def snapshot_folder(capture: Capture, folder: Path) -> Path:
    """Copy ``capture``'s extractor folders into ``folder``, as a snapshot's."""
    for name in ("screenshot", "recording", "wget"):
        shutil.copytree(capture.folder / name, folder / name)
    # wget's WARC packed, as finalizing packs it before it packages the WACZ
    rewrite_warc(folder / WGET_WARC, {}, output=folder / PACKED_WGET_WARC)
    (folder / WGET_WARC).unlink()
    return folder


def test_the_wacz_replays_the_recording_with_wgets_records_of_what_it_lacks(
    captures: Captures, tmp_path: Path
) -> None:
    capture, _records = captured(captures, "static")
    folder = snapshot_folder(capture, tmp_path / "snapshot")
    url = captures.site.url("/static.html")
    text = "A plain page STATIC-PAGE-MARKER"

    wacz = build_wacz(folder, url=url, title="Plain", archived_at=datetime.now(tz=UTC),
                      timeout=120, text=text)  # fmt: skip

    assert validate_wacz(wacz, timeout=120) == []
    recorded = {r.uri for r in read_warc(folder / RECORDING_WARC) if r.type == "response"}
    wgets = {r.uri for r in read_warc(folder / PACKED_WGET_WARC) if r.type == "response"}
    with zipfile.ZipFile(wacz) as archive:
        names = archive.namelist()
        warcs = {name: archive.read(name) for name in names if name.startswith("archive/")}
        pages = [json.loads(line) for line in archive.read("pages/pages.jsonl").splitlines()]
    (browser,) = [name for name in warcs if name.endswith("recording-warc-browser.warc.gz")]
    (wget,) = [name for name in warcs if name.endswith("wget-warc-archive.warc.gz")]
    assert warcs[browser] == (folder / RECORDING_WARC).read_bytes()  # whole, as recorded
    supplement = tmp_path / "wget.warc.gz"
    supplement.write_bytes(warcs[wget])
    kept_records = read_warc(supplement)
    kept = {r.uri for r in kept_records if r.type in ("response", "request")}
    assert kept == wgets - recorded
    # Copied as wget wrote them: its warcinfo and log records too, every digest still true.
    originals = {r.id: r for r in read_warc(folder / PACKED_WGET_WARC)}
    assert [r.type for r in kept_records if r.type not in ("response", "request")] == [
        "warcinfo", "metadata", "resource", "resource"]  # fmt: skip
    assert [(r.id, r.payload, r.digests_ok) for r in kept_records] == [
        (r.id, originals[r.id].payload, originals[r.id].digests_ok) for r in kept_records
    ]
    assert captures.site.url("/img/noscript.png") in kept
    assert pages[1]["url"] == url and pages[1]["text"] == text
    assert pages[1]["title"] == "Plain"


def test_wgets_warc_adds_nothing_when_the_recording_has_it_all(
    captures: Captures, tmp_path: Path
) -> None:
    capture, _records = captured(captures, "spa")
    recorded = {r.uri for r in capture.recorded if r.type == "response"}
    wgets = {r.uri for r in capture.wget_records if r.type == "response"}
    assert wgets <= recorded

    kept = supplement_warc(capture.folder / WGET_WARC, [capture.folder / RECORDING_WARC],
                           tmp_path / "kept.warc.gz")  # fmt: skip

    assert kept is None
    assert not (tmp_path / "kept.warc.gz").exists()
