"""Personas in the pipeline (issue 21 item 1): a site on 127.0.0.1 that shows a marker only to
a signed-in session, archived with and without a persona by the real pipeline (wget, curl,
the shared Chromium: screenshot, DOM, SingleFile, recording; finalizing and its WACZ).

With the persona the marker is in every output; without it the sign-in page is what is saved.
The cookie's value is then looked for in every file under DATA_DIR (WARCs and the WACZ read
uncompressed): it is in none (the persona store is the database, encrypted).
"""

from __future__ import annotations

import gzip
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from archive.testing import artifact_path
from core.choices import ResultStatus, SnapshotStatus
from core.extractors.browser import close_shared_browser
from core.folder.wacz import WACZ_NAME
from core.models import Snapshot
from core.services.crawls import CrawlOptions, crawl_create
from core.services.personas import persona_save
from core.tests.ocr import tesseract_available, text_in_image
from core.tests.pipeline import archive_crawl
from core.tests.signin_site import MARKER, SESSION, SignInSite, cookies_txt
from core.tests.test_isolation import staff_browser
from core.tests.test_replay_theft import replayed
from core.web.origins import replay_url
from crawls.models import Persona

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOKEN = "hdr-token-51a7c0ffee"  # an extra header's value, no more allowed in a file than the cookie
EXTRACTORS = ["wget", "title", "htmltotext", "screenshot", "dom", "singlefile", "recording"]


@pytest.fixture
def signin_site() -> Iterator[SignInSite]:
    site = SignInSite().start()
    yield site
    site.stop()


@pytest.fixture
def own_data_dir(settings, tmp_path: Path) -> Iterator[Path]:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.SOURCES_DIR = tmp_path / "sources"
    settings.KEYS_DIR = tmp_path / "keys"
    settings.EXTRACTORS = EXTRACTORS
    close_shared_browser()
    yield tmp_path
    close_shared_browser()


def archived(site: SignInSite, persona: str = "") -> Snapshot:
    crawl = crawl_create(
        data=site.url("/").encode(), source_name="urls.txt", options=CrawlOptions(persona=persona)
    )
    snapshot = Snapshot.objects.for_crawl(archive_crawl(crawl)).get()
    results = {result.extractor: result for result in snapshot.results.all()}
    assert snapshot.status == SnapshotStatus.SEALED
    assert {name: r.status for name, r in results.items()} == dict.fromkeys(
        EXTRACTORS, ResultStatus.SUCCEEDED
    ), {name: r.error for name, r in results.items()}
    return snapshot


def outputs(snapshot: Snapshot) -> dict[str, bytes]:
    """The text of each output that should hold the page: wget's page, its WARC and the
    recording's (uncompressed), the DOM, SingleFile, and the WACZ replay reads."""
    folder = snapshot.output_dir
    wacz = zipfile.ZipFile(folder / WACZ_NAME)
    replayed = b"".join(
        gzip.decompress(wacz.read(name)) if name.endswith(".gz") else wacz.read(name)
        for name in wacz.namelist()
        if name.startswith("archive/")
    )
    return {
        "wget": (folder / "wget" / snapshot.results.get(extractor="wget").output).read_bytes(),
        "wget WARC": gzip.decompress((folder / "wget/warc/archive.warc.gz").read_bytes()),
        "recording WARC": b"".join(
            gzip.decompress(p.read_bytes()) for p in (folder / "recording").rglob("*.warc.gz")
        ),
        "dom": (folder / "dom/output.html").read_bytes(),
        "singlefile": (folder / "singlefile/singlefile.html").read_bytes(),
        "WACZ (replay)": replayed,
    }


def every_file_text(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Each file under ``root``, uncompressed when gzip (WARCs) or a zip (the WACZ)."""
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        yield path, data
        if data[:2] == b"\x1f\x8b":
            yield path, gzip.decompress(data)
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for name in archive.namelist():
                    inner = archive.read(name)
                    yield path / name, inner
                    if inner[:2] == b"\x1f\x8b":
                        yield path / name, gzip.decompress(inner)


def test_a_signed_in_page_is_in_every_output_and_the_cookie_in_no_file(
    own_data_dir, signin_site
) -> None:
    persona_save(name="reader", cookies=cookies_txt(), headers=[f"X-Reader-Token: {TOKEN}"])

    signed_in = archived(signin_site, persona="reader")
    signed_out = archived(signin_site)

    held = outputs(signed_in)
    assert {name: MARKER.encode() in text for name, text in held.items()} == dict.fromkeys(
        held, True
    )
    assert (signed_in.title, signed_out.title) == ("Members", "Sign in")
    missing = outputs(signed_out)
    assert {name: MARKER.encode() in text for name, text in missing.items()} == dict.fromkeys(
        missing, False
    )
    # Sent, and stripped from the request records (REDACTED_ASCII, core/extractors/scrubbing.py).
    assert b"Cookie: ...redacted..." in held["wget WARC"]
    assert b"Please sign in" in missing["wget"] and b"Please sign in" in missing["singlefile"]
    if tesseract_available():
        assert MARKER in text_in_image(signed_in.output_dir / "screenshot/screenshot.png")
        assert MARKER not in text_in_image(signed_out.output_dir / "screenshot/screenshot.png")
    leaks = [
        str(path)
        for path, text in every_file_text(own_data_dir)
        if SESSION.encode() in text or TOKEN.encode() in text
    ]
    assert leaks == []
    # The header was sent (wget's request records name it), its value hidden, and it was on no
    # command line (wget read it from a private wgetrc, core/extractors/credentials.py).
    assert b"X-Reader-Token: ...redacted..." in held["wget WARC"]
    wget_cmd = " ".join(signed_in.results.get(extractor="wget").cmd)
    assert "X-Reader-Token" not in wget_cmd and "--config=" in wget_cmd
    # The store holds it encrypted only.
    assert SESSION not in Persona.objects.get(name="reader").secrets


def test_the_signed_in_page_replays_in_chromium(own_data_dir, signin_site, live_server, rf) -> None:
    """ReplayWeb.page, opened from the archive with the site stopped, shows what the persona
    saw (the marker), and the capture made without it shows the sign-in page."""
    from playwright.sync_api import expect  # here: importing it takes 0.3 s

    persona_save(name="reader", cookies=cookies_txt())
    signed_in, signed_out = archived(signin_site, persona="reader"), archived(signin_site)
    signin_site.stop()
    request = rf.get("/", HTTP_HOST=live_server.url.removeprefix("http://"))

    with staff_browser(live_server) as (context, _session):
        for name, snapshot, heading in (
            ("in", signed_in, MARKER),
            ("out", signed_out, "Please sign in"),
        ):
            tab = context.new_page()
            tab.goto(replay_url(request, snapshot.pk))
            try:
                expect(replayed(tab).locator("h1")).to_have_text(heading, timeout=60_000)
            finally:  # what replay showed, to look at after the run (a failure most of all)
                tab.screenshot(path=artifact_path(f"replay/persona-signed-{name}.png"))


def test_removing_a_persona_leaves_its_snapshots(own_data_dir, signin_site) -> None:
    persona_save(name="reader", cookies=cookies_txt())
    snapshot = archived(signin_site, persona="reader")

    Persona.objects.get(name="reader").delete()

    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.SEALED
    assert snapshot.crawl.persona is None
    assert MARKER.encode() in (snapshot.output_dir / "dom/output.html").read_bytes()
