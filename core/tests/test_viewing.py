"""A snapshot's page shows the archived page (issue 20): its tabs, rendered without JavaScript,
and the signed, cookie-less view links (core/web/viewing.py) that serve one snapshot's files to
the page's sandboxed frames and nothing else: never another snapshot's files, never to a link
that is forged or expired, and never with a policy that lets the document reach the live web.

The last test opens a hostile archived page (it names the live site in every way HTML and CSS
have) in Chromium while that site counts requests.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from django.core import signing
from django.test import Client
from model_bakery import baker

from archive.testing import artifact_path
from core.choices import ResultStatus, SnapshotStatus
from core.folder.wacz import WACZ_NAME
from core.models import Snapshot
from core.tests.counted_site import CountingServer, photo_png
from core.tests.site import tiny_pdf
from core.tests.test_isolation import staff_browser
from core.tests.test_services import make_crawl, make_result
from core.tests.test_snapshot_page_browser import LOADED_WIDTH
from core.tests.users import staff_with
from core.web.origins import sign_link
from core.web.viewing import VIEW_SALT, sign_view_link, view_link_snapshot_id

pytestmark = pytest.mark.django_db

APP_HOST = "127.0.0.1:8000"
PAGE = "wget/a.example/index.html"
PAGE_HTML = """<!doctype html><html><head><title>Saved</title>
<link rel="stylesheet" href="style.css"></head>
<body><h1>Saved by wget</h1><img id="photo" src="img/photo.png" alt="photo"></body></html>"""
WEBM = b"\x1a\x45\xdf\xa3"  # a WebM's first bytes: the media tab does not play it here
HEADERS = {
    "url": "https://a.example/",
    "final_url": "https://a.example/",
    "status": 200,
    # "items" too: a field a template would take for the dict's method.
    "headers": {"Content-Type": "text/html; charset=utf-8", "X-Archived-By": "test", "items": "x"},
}


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path: Path) -> Path:
    settings.DATA_DIR = tmp_path
    settings.ARCHIVE_DIR = tmp_path / "archive"
    settings.PUBLIC_ARCHIVE = False
    settings.REPLAY_HOST = ""
    return tmp_path


@pytest.fixture
def reader() -> Client:
    client = Client(HTTP_HOST=APP_HOST)
    client.force_login(staff_with("keeper", "core.view_snapshot"))
    return client


def write(folder: Path, files: dict[str, str | bytes]) -> list[str]:
    for name, content in files.items():
        file = folder / name
        file.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            file.write_text(content, encoding="utf-8")
        else:
            file.write_bytes(content)
    return list(files)


def saved_snapshot(url: str = "https://a.example/", html: str = PAGE_HTML) -> Snapshot:
    """A sealed snapshot with a result (and its files) for every tab: wget's page with its
    style and photo, SingleFile, the screenshot, the PDF, readability, htmltotext, headers
    and media, and a WACZ."""
    snapshot = baker.make(
        Snapshot, crawl=make_crawl(url), url=url, title="Saved", status=SnapshotStatus.SEALED
    )
    folder = snapshot.output_dir
    outputs = {
        "wget": ("a.example/index.html", {
            PAGE: html,
            "wget/a.example/style.css": "h1 { color: rgb(128, 32, 32); }",
            "wget/a.example/img/photo.png": photo_png(),
        }),
        "singlefile": ("singlefile.html", {"singlefile/singlefile.html": "<h1>SingleFile</h1>"}),
        "screenshot": ("screenshot.png", {"screenshot/screenshot.png": photo_png()}),
        "pdf": ("output.pdf", {"pdf/output.pdf": tiny_pdf("Saved")}),
        "readability": ("content.html", {"readability/content.html": "<p>The article</p>"}),
        "htmltotext": ("output.txt", {"htmltotext/output.txt": "Saved by wget — the text"}),
        "headers": ("headers.json", {"headers/headers.json": json.dumps(HEADERS)}),
        "media": ("clip.webm", {"media/clip.webm": WEBM, "media/clip.info.json": "{}"}),
    }  # fmt: skip
    for extractor, (main, files) in outputs.items():
        make_result(
            snapshot, extractor, ResultStatus.SUCCEEDED, output=main,
            output_files=write(folder, files), attempts=1, retry_at=None,
        )  # fmt: skip
    (folder / WACZ_NAME).write_bytes(b"PK\x03\x04 a WACZ")
    return snapshot


def token_in(html: str, snapshot: Snapshot) -> str:
    """The view link token a page hands out (one per page; it names ``snapshot``)."""
    tokens = set(re.findall(r'/view/([^/"]+)/', html))
    assert len(tokens) == 1, tokens
    token = tokens.pop()
    assert view_link_snapshot_id(token) == snapshot.pk
    return token


# --- view links ----------------------------------------------------------------------------------


def test_a_view_link_serves_its_snapshots_files_to_whoever_holds_it() -> None:
    snapshot = saved_snapshot()
    token = sign_view_link(snapshot.pk)

    response = Client(HTTP_HOST=APP_HOST).get(f"/view/{token}/{PAGE}")  # nobody signed in

    assert response.status_code == 200
    assert b"".join(response.streaming_content).decode() == PAGE_HTML
    policy = [part.strip() for part in response["Content-Security-Policy"].split(";")]
    own = f"{APP_HOST}/view/{token}/"
    assert policy[0] == "sandbox allow-popups allow-popups-to-escape-sandbox"  # no scripts
    assert f"default-src {own} data: blob:" in policy  # this snapshot's folder, never the web
    assert f"style-src {own} data: blob: 'unsafe-inline'" in policy
    assert {"script-src 'none'", "connect-src 'none'", "form-action 'none'"} <= set(policy)
    assert "*" not in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "no-referrer"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_a_pdf_is_viewed_without_a_sandbox_but_loads_nothing_else() -> None:
    snapshot = saved_snapshot()
    token = sign_view_link(snapshot.pk)

    response = Client(HTTP_HOST=APP_HOST).get(f"/view/{token}/pdf/output.pdf")

    policy = response["Content-Security-Policy"]
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert "sandbox" not in policy  # Chromium's viewer refuses a sandboxed document
    assert f"default-src {APP_HOST}/view/{token}/ data: blob:" in policy


def test_text_is_served_as_utf8() -> None:
    snapshot = saved_snapshot()
    token = sign_view_link(snapshot.pk)

    response = Client(HTTP_HOST=APP_HOST).get(f"/view/{token}/htmltotext/output.txt")

    assert response["Content-Type"] == "text/plain; charset=utf-8"


def expired_token(snapshot: Snapshot, settings, monkeypatch) -> str:
    made_at = time.time() - settings.REPLAY_LINK_MAX_AGE - 5
    with monkeypatch.context() as patch:
        patch.setattr(signing.time, "time", lambda: made_at)
        return sign_view_link(snapshot.pk)


@pytest.mark.parametrize(
    ("make_token", "says"),
    [
        (lambda snapshot, *_: "garbage", "not valid"),
        (lambda snapshot, *_: sign_view_link(snapshot.pk)[:-2] + "xx", "not valid"),
        # A replay link names the same snapshot, but is no view link (another salt).
        (lambda snapshot, *_: sign_link(snapshot.pk), "not valid"),
        (lambda snapshot, *_: signing.dumps("not-a-uuid", salt=VIEW_SALT), "not valid"),
        (expired_token, "expired"),
    ],
    ids=["garbage", "forged", "replay-link", "not-an-id", "expired"],
)
def test_a_bad_view_link_serves_nothing_and_says_why(
    settings, monkeypatch, make_token, says: str
) -> None:
    snapshot = saved_snapshot()
    token = make_token(snapshot, settings, monkeypatch)

    response = Client(HTTP_HOST=APP_HOST).get(f"/view/{token}/{PAGE}")

    assert response.status_code == 404
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert says in response.content.decode()


def test_a_view_link_serves_nothing_outside_its_snapshot(tmp_path: Path) -> None:
    snapshot, other = saved_snapshot(), saved_snapshot("https://b.example/")
    token = sign_view_link(snapshot.pk)
    (tmp_path / "secret.txt").write_text("not archived")
    (snapshot.output_dir / "wget" / "link").symlink_to(other.output_dir / PAGE)
    client = Client(HTTP_HOST=APP_HOST)

    for path_in_folder in [
        f"../{other.pk}/{PAGE}",
        f"wget/../../{other.pk}/{PAGE}",
        "../../secret.txt",
        "wget/link",  # a symbolic link to another snapshot's file
        "wget",  # a folder
        "no/such/file.html",
    ]:
        response = client.get(f"/view/{token}/{path_in_folder}")
        assert response.status_code == 404, path_in_folder
    assert client.get(f"/view/{sign_view_link(other.pk)}/{PAGE}").status_code == 200


def test_a_removed_snapshots_view_link_serves_nothing() -> None:
    snapshot = saved_snapshot()
    token = sign_view_link(snapshot.pk)
    snapshot.delete()

    response = Client(HTTP_HOST=APP_HOST).get(f"/view/{token}/{PAGE}")

    assert response.status_code == 404
    assert b"no longer in the archive" in response.content


def test_no_cookie_reaches_a_view_link_and_none_comes_back(reader: Client) -> None:
    snapshot = saved_snapshot()
    reader.cookies["csrftoken"] = "abc"

    response = reader.get(f"/view/{sign_view_link(snapshot.pk)}/{PAGE}")

    assert response.status_code == 200
    assert response.wsgi_request.COOKIES == {}
    assert not response.wsgi_request.user.is_authenticated
    assert response.cookies == {}


def test_the_replay_host_has_no_view_links() -> None:
    snapshot = saved_snapshot()
    host = f"{snapshot.pk.hex}.replay.localhost:8000"

    response = Client().get(f"/view/{sign_view_link(snapshot.pk)}/{PAGE}", HTTP_HOST=host)

    assert response.status_code == 404


# --- /archive/<id>/<path>, for signed-in readers -------------------------------------------------


def test_a_reader_opening_an_archived_page_goes_to_its_view_link(reader: Client) -> None:
    snapshot = saved_snapshot()

    response = reader.get(f"/archive/{snapshot.pk}/{PAGE}")

    assert response.status_code == 302
    token = re.fullmatch(rf"/view/([^/]+)/{PAGE}", response["Location"])[1]
    assert view_link_snapshot_id(token) == snapshot.pk


def test_other_archived_files_are_served_to_readers_and_never_load_from_the_web(
    reader: Client,
) -> None:
    snapshot = saved_snapshot()

    image = reader.get(f"/archive/{snapshot.pk}/wget/a.example/img/photo.png")
    pdf = reader.get(f"/archive/{snapshot.pk}/pdf/output.pdf")

    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert image["Content-Security-Policy"].startswith("sandbox")
    assert "default-src 'self' data: blob:" in image["Content-Security-Policy"]
    assert pdf.status_code == 200 and "sandbox" not in pdf["Content-Security-Policy"]
    for response in (image, pdf):
        assert "*" not in response["Content-Security-Policy"]
        assert "connect-src 'none'" in response["Content-Security-Policy"]


def test_nobody_who_may_not_read_gets_a_view_link() -> None:
    snapshot = saved_snapshot()
    outsider = Client(HTTP_HOST=APP_HOST)
    outsider.force_login(staff_with("visitor"))  # staff, without core.view_snapshot

    for client in [Client(HTTP_HOST=APP_HOST), outsider]:
        for path_ in [f"/snapshot/{snapshot.pk}/", f"/archive/{snapshot.pk}/{PAGE}"]:
            response = client.get(path_)
            assert response.status_code in (302, 403), path_
            assert "/view/" not in response.get("Location", "")
            assert b"/view/" not in response.content


# --- the snapshot page's tabs --------------------------------------------------------------------


def test_the_page_opens_on_the_archived_page_itself(reader: Client) -> None:
    snapshot = saved_snapshot()

    html = reader.get(f"/snapshot/{snapshot.pk}/").content.decode()

    token = token_in(html, snapshot)
    assert '<a href="?view=singlefile" aria-current="page">SingleFile</a>' in html
    assert (
        f'<iframe class="page" src="/view/{token}/singlefile/singlefile.html"' in html
        and 'sandbox="allow-popups allow-popups-to-escape-sandbox"' in html  # no scripts
    )


@pytest.mark.parametrize(
    ("missing", "opens_on"),
    [
        (["singlefile"], "wget"),
        (["singlefile", "wget"], "replay"),
        (["singlefile", "wget", WACZ_NAME], "screenshot"),
        (["singlefile", "wget", WACZ_NAME, "screenshot"], "pdf"),
    ],
)
def test_without_singlefile_it_opens_on_wget_then_the_replay_then_the_screenshot(
    reader: Client, missing: list[str], opens_on: str
) -> None:
    snapshot = saved_snapshot()
    snapshot.results.filter(extractor__in=missing).delete()
    if WACZ_NAME in missing:
        (snapshot.output_dir / WACZ_NAME).unlink()

    response = reader.get(f"/snapshot/{snapshot.pk}/")

    assert response.context["chosen"].name == opens_on


def test_every_tab_is_a_link_that_shows_its_output(reader: Client) -> None:
    snapshot = saved_snapshot()
    page = f"/snapshot/{snapshot.pk}/"
    tabs = re.findall(r'<a href="\?view=(\w+)"', reader.get(page).content.decode())
    shown = {}
    for tab in tabs:
        html = reader.get(f"{page}?view={tab}").content.decode()
        assert f'<a href="?view={tab}" aria-current="page">' in html
        viewer = html.split('<section class="viewer"', 1)[1].split("</section>\n\n<aside")[0]
        # Each page signs its own link (its time is in it): each is read back as "TOKEN".
        for signed in set(re.findall(r'/view/([^/"]+)/', viewer)):
            assert view_link_snapshot_id(signed) == snapshot.pk
            viewer = viewer.replace(signed, "TOKEN")
        shown[tab] = viewer
    token = "TOKEN"

    assert tabs == [
        "replay", "singlefile", "wget", "screenshot", "pdf", "article", "text", "media",
        "headers", "files",
    ]  # fmt: skip
    replay_host = f"http://{snapshot.pk.hex}.replay.localhost:8000/replay/"
    assert f'href="{replay_host}' in shown["replay"] and "Open the replay" in shown["replay"]
    assert f'<img class="page" src="/view/{token}/screenshot/screenshot.png"' in shown["replay"]
    sandboxed = 'sandbox="allow-popups allow-popups-to-escape-sandbox"'
    for tab, file in [
        ("singlefile", "singlefile/singlefile.html"),
        ("wget", PAGE),
        ("article", "readability/content.html"),
        ("text", "htmltotext/output.txt"),
    ]:
        assert f'<iframe class="page" src="/view/{token}/{file}"' in shown[tab], tab
        assert sandboxed in shown[tab], tab
    assert f'<iframe class="page" src="/view/{token}/pdf/output.pdf"' in shown["pdf"]
    assert "sandbox" not in shown["pdf"]
    screenshot = f'<img class="page" src="/view/{token}/screenshot/screenshot.png"'
    assert screenshot in shown["screenshot"]
    video = f'<video controls preload="metadata" src="/view/{token}/media/clip.webm">'
    assert video in shown["media"]
    assert "clip.info.json" not in shown["media"]
    assert "<td>X-Archived-By</td><td><code>test</code></td>" in shown["headers"]
    assert "<td>items</td><td><code>x</code></td>" in shown["headers"]
    assert "HTTP 200 from" in shown["headers"]
    for extractor in ["wget", "singlefile", "screenshot", "pdf", "headers", "media"]:
        assert f'<section class="output" id="{extractor}">' in shown["files"]
    assert f'href="/archive/{snapshot.pk}/wget/a.example/img/photo.png"' in shown["files"]


def test_the_proofs_are_in_the_side_panel_of_every_tab(reader: Client) -> None:
    snapshot = saved_snapshot()
    snapshot.manifest_sha256 = "0" * 64
    snapshot.save(update_fields=["manifest_sha256"])

    for tab in ["singlefile", "files", "headers"]:
        html = reader.get(f"/snapshot/{snapshot.pk}/?view={tab}").content.decode()
        side = html.split('<aside class="side">', 1)[1]
        assert '<div id="proofs">' in side and "proofs do not hold" in side
        assert f'href="/snapshot/{snapshot.pk}/wacz/">WACZ</a>' in side


def test_a_tab_that_has_nothing_says_why_and_shows_the_screenshot(reader: Client) -> None:
    snapshot = saved_snapshot()
    snapshot.results.filter(extractor="pdf").update(
        status=ResultStatus.FAILED, error="HTTP 503", output="", output_files=[]
    )

    html = reader.get(f"/snapshot/{snapshot.pk}/?view=pdf").content.decode()

    tab = '<a href="?view=pdf" aria-current="page" class="off" title="PDF: failed, HTTP 503.">'
    assert tab in html
    assert '<p class="notice">PDF: failed, HTTP 503.</p>' in html
    assert re.search(r'<img class="page" src="/view/[^/]+/screenshot/screenshot.png"', html)


@pytest.mark.parametrize(
    ("content", "says"),
    [("not json", "headers/headers.json cannot be read"), ("[]", "does not hold the headers")],
)
def test_a_headers_file_that_cannot_be_read_says_so(
    reader: Client, content: str, says: str
) -> None:
    snapshot = saved_snapshot()
    (snapshot.output_dir / "headers/headers.json").write_text(content)

    response = reader.get(f"/snapshot/{snapshot.pk}/?view=headers")

    assert response.status_code == 200
    assert says in response.content.decode()


@pytest.mark.parametrize("view", ["nonsense", "git", "%3Cscript%3E"])
def test_a_view_the_snapshot_has_not_is_a_404_naming_those_it_has(
    reader: Client, view: str
) -> None:
    snapshot = saved_snapshot()

    response = reader.get(f"/snapshot/{snapshot.pk}/?view={view}")

    assert response.status_code == 404
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert "(it has: replay, singlefile, wget, screenshot, pdf" in response.content.decode()


def test_a_public_host_without_a_replay_host_says_how_to_replay(settings, reader) -> None:
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "archive.example"]
    snapshot = saved_snapshot()

    html = reader.get(f"/snapshot/{snapshot.pk}/?view=replay", HTTP_HOST="archive.example")

    assert b"set REPLAY_HOST" in html.content and b"/replay/" not in html.content


# --- the timeline link ---------------------------------------------------------------------------


def test_the_side_panel_links_to_the_urls_timeline(reader: Client) -> None:
    snapshot = saved_snapshot("https://a.example/page?x=1")

    html = reader.get(f"/snapshot/{snapshot.pk}/").content.decode()

    link = re.search(r'<p id="timeline"><a href="([^"]+)">Timeline of this URL</a>', html)
    assert link, "no timeline link in the side panel"
    timeline = reader.get(link[1])
    assert timeline.status_code == 200
    assert f"/snapshot/{snapshot.pk}/" in timeline.content.decode()  # this capture is on it


# --- in Chromium ---------------------------------------------------------------------------------

# An archived page that names the live site in every way HTML and CSS have; only its own
# style.css and img/photo.png were saved. Opened without scripts, it must ask the site nothing.
HOSTILE_HTML = """<!doctype html><html><head><title>Hostile</title>
<meta http-equiv="refresh" content="1; url=SITE/refreshed">
<link rel="stylesheet" href="style.css"><link rel="stylesheet" href="SITE/style-abs.css">
<link rel="prefetch" href="SITE/prefetch"><link rel="preload" as="image" href="SITE/preload.png">
<link rel="preconnect" href="SITE"><link rel="icon" href="SITE/favicon.ico">
<style>@import url(SITE/import.css); body { background: url(SITE/bg.png); }
@font-face { font-family: Live; src: url(SITE/font.woff2); } p { font-family: Live; }</style>
</head><body>
<h1>Saved by wget</h1><p>Words in a live font.</p>
<img id="photo" src="img/photo.png" alt="photo">
<img src="SITE/img.png" alt=""><img srcset="SITE/srcset.png 2x" alt="">
<picture><source srcset="SITE/source.png"><img src="SITE/picture.png" alt=""></picture>
<video poster="SITE/poster.png" src="SITE/video.webm" autoplay muted></video>
<audio src="SITE/audio.wav" autoplay></audio>
<iframe src="SITE/frame.html"></iframe><object data="SITE/object.html"></object>
<embed src="SITE/embed.html"><svg><image href="SITE/svg.png" width="4" height="4"/></svg>
<input type="image" src="SITE/input.png" alt="">
<form id="f" action="SITE/form" method="post"><input name="a" value="b" autofocus></form>
<a ping="SITE/ping" href="SITE/link">a link nobody clicks</a>
<script>fetch("SITE/fetch"); new Image().src = "SITE/script.png";</script>
<script src="SITE/script.js"></script>
</body></html>"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_hostile_archived_page_loads_its_own_files_and_never_the_live_site(
    live_server,
) -> None:

    site = CountingServer({}).start()
    try:
        live = site.url("").rstrip("/")
        snapshot = saved_snapshot(live + "/", HOSTILE_HTML.replace("SITE", live))
        with staff_browser(live_server) as (context, _session):
            page = context.new_page()
            page.goto(f"{live_server.url}/snapshot/{snapshot.pk}/?view=wget")
            frame = page.frame_locator("iframe.page")
            photo = frame.locator("#photo")
            photo.wait_for()
            page.wait_for_timeout(2500)  # past the refresh's second, for anything to start
            width = photo.evaluate(LOADED_WIDTH)
            colour = frame.locator("h1").evaluate("(h1) => getComputedStyle(h1).color")
            page.screenshot(path=artifact_path("snapshot-page/hostile-wget.png"))
            # The same page opened on its own, from the reader's lasting link.
            alone = context.new_page()
            alone.goto(f"{live_server.url}/archive/{snapshot.pk}/{PAGE}")
            alone.wait_for_timeout(2500)
            alone_width = alone.locator("#photo").evaluate(LOADED_WIDTH)
            alone_url = alone.url
    finally:
        site.stop()

    assert width == 240 and alone_width == 240  # its own photo loads, from the archive
    assert colour == "rgb(128, 32, 32)"  # and its own style
    assert "/view/" in alone_url  # still the archived page: the refresh went nowhere
    assert site.requests == []
