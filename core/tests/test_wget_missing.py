"""Nothing missing is called complete (issue 18, part 7): wget's page requisites that fail.

A requisite that failed for a passing reason (no data received, 5xx) is fetched again within
the attempt; what is still missing then, or failed for good (404), is listed on the result's
``missing``, in index.json, on the snapshot page and in the admin; the capture still stands.
The server below (127.0.0.1, real wget through the egress proxy) serves one page per case.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.urls import reverse
from warcio.archiveiterator import ArchiveIterator

from archive.testing import LocalServer
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.addresses import Refusal
from core.extractors.errors import Outcome
from core.extractors.requisites import NO_RESPONSE, missing_requisites
from core.extractors.wget import RETRY_DIR, RETRY_LOG, WARC_PATH, WgetExtractor
from core.folder.index_json import INDEX_VERSION, InvalidIndex, read_folder
from core.folder.manifest import INDEX_NAME, write_manifest
from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_create
from core.tests.site import tiny_png
from core.tests.test_reindex import archive_crawl

PNG = tiny_png((1, 2, 3))
PAGES = {
    # One requisite closes the connection without a word the first time, then answers.
    "/once.html": ["/once.png", "/ok.png"],
    # One never answers: every connection is closed without a word.
    "/never.html": ["/never.png", "/ok.png"],
    "/gone.html": ["/gone.png", "/ok.png"],  # one is a 404
    "/busy.html": ["/busy.png", "/ok.png"],  # one is always a 503
}


class RequisiteSite(LocalServer):
    """The pages of PAGES, each with its images; ``requests`` counts the requests per path."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        super().__init__()

    def handler(self):
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:
                site.requests[self.path] += 1
                if self.path in PAGES:
                    images = "".join(f'<img src="{src}" alt="">' for src in PAGES[self.path])
                    body = f"<!doctype html><title>Requisites</title><p>{images}</p>"
                    self.answer(HTTPStatus.OK, body.encode(), "text/html")
                elif self.path == "/never.png" or (
                    self.path == "/once.png" and site.requests[self.path] == 1
                ):
                    self.close_connection = True  # no status line, no headers: nothing
                elif self.path == "/busy.png":
                    self.answer(HTTPStatus.SERVICE_UNAVAILABLE, b"busy", "text/plain")
                elif self.path in ("/ok.png", "/once.png"):
                    self.answer(HTTPStatus.OK, PNG, "image/png")
                else:
                    self.answer(HTTPStatus.NOT_FOUND, b"not here", "text/plain")

            def answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Keep test output quiet."""

        return Handler


@pytest.fixture(scope="module")
def site():
    server = RequisiteSite().start()
    yield server
    server.stop()


def run_wget(url: str, out_dir: Path):
    return WgetExtractor().run(SimpleNamespace(url=url), out_dir)


def warc_responses(out_dir: Path) -> dict[str, str]:
    """Every response the capture's WARCs hold: URL -> status."""
    responses = {}
    for warc in sorted((out_dir / "warc").glob("*.warc*")):
        with open(warc, "rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                if record.rec_type == "response":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    responses[uri] = record.http_headers.get_statuscode()
    return responses


def assert_warcs_sound(out_dir: Path) -> None:
    warcio = Path(sys.executable).with_name("warcio")
    for warc in (out_dir / "warc").glob("*.warc*"):
        check = subprocess.run([str(warcio), "check", str(warc)], capture_output=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr


# --- the extractor -------------------------------------------------------------------------------


def test_a_requisite_that_answers_the_second_time_is_saved_and_not_missing(
    site: RequisiteSite, out_dir: Path
) -> None:
    output = run_wget(site.url("/once.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.missing == []
    assert site.requests["/once.png"] == 2  # the retry round asked again
    host = f"127.0.0.1+{site.port}"
    assert output.output == f"{host}/once.html"
    assert (out_dir / host / "once.png").read_bytes() == PNG
    page = (out_dir / output.output).read_text()
    assert 'src="once.png"' in page and 'src="ok.png"' in page  # links point at the saved files
    assert not (out_dir / RETRY_DIR).exists()
    assert (out_dir / "wget.log").is_file() and (out_dir / RETRY_LOG).is_file()
    assert sorted(p.name for p in (out_dir / "warc").iterdir()) == ["archive.warc"]
    assert warc_responses(out_dir)[site.url("/once.png")] == "200"
    assert_warcs_sound(out_dir)


def test_a_requisite_that_never_answers_is_listed_missing_and_the_page_stands(
    site: RequisiteSite, out_dir: Path
) -> None:
    before = site.requests["/never.png"]

    output = run_wget(site.url("/never.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.missing == [{"url": site.url("/never.png"), "reason": "No data received"}]
    assert site.requests["/never.png"] - before == 2  # one retry round, no more
    host = f"127.0.0.1+{site.port}"
    assert (out_dir / output.output).is_file()
    assert (out_dir / host / "ok.png").read_bytes() == PNG
    assert not (out_dir / RETRY_DIR).exists()
    assert (out_dir / RETRY_LOG).is_file()  # the retry's log is kept, whichever capture is
    assert_warcs_sound(out_dir)


def test_a_404_requisite_is_listed_and_not_fetched_again(
    site: RequisiteSite, out_dir: Path
) -> None:
    before = site.requests["/gone.png"]

    output = run_wget(site.url("/gone.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.exit_code == 8
    assert output.missing == [{"url": site.url("/gone.png"), "reason": "HTTP 404"}]
    assert site.requests["/gone.png"] - before == 1  # it would 404 again: no retry round
    assert not (out_dir / RETRY_LOG).exists()


def test_a_requisite_that_stays_busy_is_listed_with_its_status(
    site: RequisiteSite, out_dir: Path
) -> None:
    output = run_wget(site.url("/busy.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.missing == [{"url": site.url("/busy.png"), "reason": "HTTP 503"}]
    assert (out_dir / RETRY_LOG).is_file()
    assert_warcs_sound(out_dir)


def test_no_retry_round_when_the_timeout_is_spent(
    site: RequisiteSite, out_dir: Path, settings, monkeypatch
) -> None:
    monkeypatch.setattr("core.extractors.wget.MIN_RETRY_SECONDS", 10**6)
    before = site.requests["/never.png"]

    output = run_wget(site.url("/never.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert [item["url"] for item in output.missing] == [site.url("/never.png")]
    assert site.requests["/never.png"] - before == 1
    assert not (out_dir / RETRY_LOG).exists()


def test_refused_fetches_are_not_listed_twice_and_unreachable_ones_say_why(
    site: RequisiteSite, out_dir: Path
) -> None:
    run_wget(site.url("/gone.html"), out_dir)
    warc, log = out_dir / WARC_PATH, (out_dir / "wget.log").read_text()
    gone = site.url("/gone.png")

    refused = missing_requisites(warc, log, refusals=[Refusal(gone, "a loopback address")])
    unreached = missing_requisites(
        warc,
        log,
        unreachable=[
            Refusal(gone, "could not resolve host x"),
            Refusal("cdn.example:443", "timed out connecting to cdn.example:443"),
        ],
    )

    assert refused == []
    assert [(m.url, m.reason, m.temporary) for m in unreached] == [
        (gone, "could not resolve host x", True),
        ("cdn.example:443", "timed out connecting to cdn.example:443", True),
    ]
    assert missing_requisites(out_dir / "no.warc.gz", log) == []


def test_an_unpaired_network_failure_gets_a_general_reason(site, out_dir: Path) -> None:
    run_wget(site.url("/never.html"), out_dir)
    warc = out_dir / WARC_PATH

    [missing] = missing_requisites(warc, "")

    assert (missing.url, missing.reason, missing.temporary) == (
        site.url("/never.png"),
        NO_RESPONSE,
        True,
    )


# --- the whole pipeline: the result, index.json, the pages, reindex ------------------------------


def archive_one(url: str) -> Snapshot:
    """Archive ``url`` (with the extractors EXTRACTORS names) until its crawl is sealed."""
    crawl = archive_crawl(crawl_create(data=url.encode(), source_name="urls.txt"))
    return Snapshot.objects.get(crawl=crawl)


@pytest.mark.django_db(transaction=True)
def test_missing_files_show_in_index_json_the_snapshot_page_the_index_and_the_admin(
    site: RequisiteSite, data_dir: Path, settings, admin_client
) -> None:
    settings.EXTRACTORS = ["wget"]
    snapshot = archive_one(site.url("/never.html"))

    assert snapshot.status == SnapshotStatus.SEALED
    result = snapshot.results.get(extractor="wget")
    assert result.status == ResultStatus.SUCCEEDED  # the capture stands
    never = site.url("/never.png")
    assert result.missing == [{"url": never, "reason": "No data received"}]
    index = json.loads((snapshot.output_dir / INDEX_NAME).read_text())
    assert index["vellum_index_version"] == INDEX_VERSION == 4
    [entry] = [entry for entry in index["results"] if entry["extractor"] == "wget"]
    assert entry["missing"] == result.missing and entry["refused"] == []

    files = reverse("core:snapshot", args=[snapshot.pk]) + "?view=files"
    page = admin_client.get(files).content.decode()
    listing = admin_client.get(reverse("core:index")).content.decode()
    admin = admin_client.get(reverse("admin:core_archiveresult_change", args=[result.pk]))

    assert "1 file missing" in page
    assert f"{never}: No data received" in page
    assert '<span class="mark partial">partial</span>' in page
    assert 'class="mark succeeded partial" title="wget: succeeded, 1 file missing"' in listing
    assert f"{never}: No data received" in admin.content.decode()


@pytest.mark.django_db(transaction=True)
def test_reindex_restores_missing_and_still_reads_a_version_3_index(
    site: RequisiteSite, data_dir: Path, settings
) -> None:
    settings.EXTRACTORS = ["wget"]
    gone = archive_one(site.url("/gone.html"))
    old = archive_one(site.url("/busy.html"))
    path = old.output_dir / INDEX_NAME
    document = json.loads(path.read_text())
    document["vellum_index_version"] = 3
    for entry in document["results"]:
        del entry["missing"]
    path.write_text(json.dumps(document, indent=2, sort_keys=True))
    write_manifest(old.output_dir)
    call_command("flush", interactive=False, verbosity=0)

    call_command("reindex", stdout=io.StringIO())

    restored = ArchiveResult.objects.get(snapshot_id=gone.pk, extractor="wget")
    assert restored.missing == [{"url": site.url("/gone.png"), "reason": "HTTP 404"}]
    assert Snapshot.objects.get(pk=gone.pk).status == SnapshotStatus.SEALED
    from_version_3 = ArchiveResult.objects.get(snapshot_id=old.pk, extractor="wget")
    assert from_version_3.missing == []
    assert Snapshot.objects.get(pk=old.pk).status == SnapshotStatus.SEALED


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("x", "index.json: results[0].missing is str, not a list"),
        (["x"], "index.json: results[0].missing[0] is not a JSON object"),
        ([{"url": "x"}], "index.json: results[0].missing[0].reason is missing"),
        ([{"url": "", "reason": "HTTP 404"}], "index.json: results[0].missing[0].url is empty"),
    ],
)
def test_a_damaged_missing_list_is_a_readable_problem(
    site: RequisiteSite, data_dir: Path, settings, missing, message: str
) -> None:
    settings.EXTRACTORS = ["wget"]
    folder = archive_one(site.url("/gone.html")).output_dir
    path = folder / INDEX_NAME
    document = json.loads(path.read_text())
    document["results"][0]["missing"] = missing
    path.write_text(json.dumps(document))

    with pytest.raises(InvalidIndex) as problem:
        read_folder(folder)

    assert str(problem.value) == message
