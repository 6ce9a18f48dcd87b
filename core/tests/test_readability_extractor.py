"""The readability extractor against its own article site, the shared live site and (when
python3-doc is installed) the Python documentation, with curl."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import pytest
import trafilatura

import core.extractors.base
from archive.testing import LocalServer, files_in, unused_port
from core.extractors.article import find_article
from core.extractors.base import ExtractorOutput
from core.extractors.errors import Outcome
from core.extractors.readability import DOM_PATH, ReadabilityExtractor, dom_output_path
from core.tests.site import RETRY_AFTER_SECONDS, LiveSite

PYTHON_DOCS = Path("/usr/share/doc/python3/html")  # Debian's python3-doc: Sphinx pages

ARTICLE_HTML = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>The Care of Parchment - Vellum Gazette</title>
  <style>.byline { color: STYLE_MARKER; }</style>
  <script>var tracker = "HEAD_SCRIPT_MARKER";</script>
</head>
<body>
  <header class="site-header">
    <nav class="menu">
      <a href="/">Home</a> <a href="/about">About us</a> <a href="/subscribe">Subscribe now</a>
    </nav>
  </header>
  <main>
    <article>
      <h1>The Care of Parchment</h1>
      <p>Parchment has been made from animal skins for more than two thousand years, and a
      well kept leaf outlasts almost any paper. The skin is soaked, limed, scraped and dried
      under tension on a frame.</p>
      <p>Humidity is the great enemy of a manuscript: too damp and the leaves cockle, too dry
      and they crack. Archivists keep the reading room near fifty per cent relative humidity
      all year round.</p>
      <script>document.write("BODY_SCRIPT_MARKER");</script>
      <p>See <a href="notes/humidity.html">our humidity notes</a> and this
      <img src="../img/leaf.png" alt="a leaf"> photograph of a leaf under raking light, taken
      in the conservation studio last winter.</p>
    </article>
  </main>
  <aside class="sidebar">
    <h3>Popular</h3><ul><li><a href="/quills">Top ten quills</a></li></ul>
  </aside>
  <footer class="site-footer"><p>Copyright 2024 Vellum Gazette. All rights reserved.</p></footer>
</body>
</html>
"""

# What the dom extractor would have saved after scripts ran: none of this is on the live pages.
RENDERED_DOM_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Rendered Story</title></head>
<body>
  <nav class="menu"><a href="/">Home</a> <a href="/shop">Shop</a></nav>
  <div id="app"><article>
    <h1>Rendered Story</h1>
    <p>This paragraph was written into the page by JavaScript in a café, long after the HTML
    arrived, so only the saved DOM has it and a plain fetch would never see it at all.</p>
    <p>A second rendered paragraph makes the article long enough for the extractor to trust it,
    with a <a href="more.html">relative link</a> that must come out absolute.</p>
  </article></div>
</body></html>
"""

PAGES = {
    "/articles/parchment.html": ARTICLE_HTML,
    "/empty.html": "",
    "/blank.html": "<!doctype html><html><head><title>Blank</title></head><body>  </body></html>",
}


class ArticleHandler(BaseHTTPRequestHandler):
    """Serve ``PAGES`` as UTF-8 HTML, and /old-parchment as a redirect to the article."""

    def do_GET(self) -> None:
        if self.path == "/old-parchment":
            self.send_response(HTTPStatus.MOVED_PERMANENTLY)
            self.send_header("Location", "/articles/parchment.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = PAGES.get(self.path)
        if body is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        data = body.encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class ArticleSite(LocalServer):
    def handler(self):
        return ArticleHandler


class DocsHandler(SimpleHTTPRequestHandler):
    """Serve PYTHON_DOCS as static files, noting each path asked for on the server."""

    def __init__(self, *args, site: DocsSite, **kwargs) -> None:
        self.site = site
        super().__init__(*args, directory=str(PYTHON_DOCS), **kwargs)

    def do_GET(self) -> None:
        self.site.paths.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""


class DocsSite(LocalServer):
    """The Python documentation on 127.0.0.1; ``paths`` lists the paths asked for, in order."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        super().__init__()

    def handler(self):
        return partial(DocsHandler, site=self)


@pytest.fixture(scope="module")
def article_site() -> Iterator[ArticleSite]:
    site = ArticleSite().start()
    yield site
    site.stop()


def snapshot_with_dom(folder: Path, url: str, dom: str | None) -> SimpleNamespace:
    """A stand-in snapshot whose folder is ``folder``, holding ``dom`` as the saved DOM."""
    snapshot = SimpleNamespace(url=url, output_dir=folder)
    if dom is not None:
        path = dom_output_path(snapshot)
        path.parent.mkdir(parents=True)
        path.write_text(dom, encoding="utf-8")
    return snapshot


def run(url: str, out_dir: Path) -> ExtractorOutput:
    """Run on a stand-in snapshot with only a URL (no folder, so no saved DOM)."""
    return ReadabilityExtractor().run(SimpleNamespace(url=url), out_dir)


# --- fetched pages -------------------------------------------------------------------------------


def test_fetched_article_keeps_heading_and_body_but_not_boilerplate(
    article_site: ArticleSite, out_dir: Path
) -> None:
    output = run(article_site.url("/articles/parchment.html"), out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.output == "content.html"
    assert files_in(out_dir) == {"content.html", "content.txt", "article.json", "curl.log"}
    text = (out_dir / "content.txt").read_text(encoding="utf-8")
    assert text.lstrip().startswith("The Care of Parchment")
    assert text.count("The Care of Parchment") == 1  # the article's own <h1>, not doubled
    assert "made from animal skins" in text
    assert "near fifty per cent relative humidity" in text
    assert "conservation studio" in text
    for boilerplate in ("Subscribe now", "About us", "Top ten quills", "All rights reserved"):
        assert boilerplate not in text
    html = (out_dir / "content.html").read_text(encoding="utf-8")
    for marker in ("STYLE_MARKER", "HEAD_SCRIPT_MARKER", "BODY_SCRIPT_MARKER", "<script", "<style"):
        assert marker not in html
        assert marker not in text


@pytest.mark.skipif(not PYTHON_DOCS.is_dir(), reason="python3-doc is not installed")
def test_sphinx_documentation_is_kept_whole_without_its_sidebar(
    out_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    site = DocsSite().start()
    try:
        url = site.url("/library/json.html")
        output = run(url, out_dir)
    finally:
        site.stop()

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert site.paths == ["/library/json.html"]  # curl's fetch only: trafilatura fetches nothing
    assert capfd.readouterr().out == ""  # trafilatura logs, it does not print
    text = (out_dir / "content.txt").read_text(encoding="utf-8")
    assert text.startswith("json — JSON encoder and decoder\n")  # its <code> stays in line
    assert "JSON (JavaScript Object Notation)" in text  # the introduction
    assert "Encoders and Decoders" in text  # a later section (readability-lxml kept only one)
    assert "Command Line Interface" in text  # the last one
    for sidebar in ("Previous topic", "Next topic", "This Page", "Report a Bug", "Show Source"):
        assert sidebar not in text
    assert "¶" not in text  # Sphinx's permalinks in headings
    document = json.loads((out_dir / "article.json").read_text(encoding="utf-8"))
    assert document["title"] == "json — JSON encoder and decoder"
    html = (out_dir / "content.html").read_text(encoding="utf-8")
    assert "<title>json — JSON encoder and decoder</title>" in html
    assert f'href="{site.url("/library/marshal.html#module-marshal")}"' in html


def test_fetched_article_is_a_complete_page_with_absolute_links(
    article_site: ArticleSite, out_dir: Path
) -> None:
    # Through a redirect: links resolve against the final URL, not the one asked for.
    run(article_site.url("/old-parchment"), out_dir)

    html = (out_dir / "content.html").read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert '<meta charset="utf-8">' in html
    assert "<title>The Care of Parchment</title>" in html
    assert f'href="{article_site.url("/articles/notes/humidity.html")}"' in html
    assert f'src="{article_site.url("/img/leaf.png")}"' in html


def test_article_json_describes_a_fetched_article(article_site: ArticleSite, out_dir: Path) -> None:
    output = run(article_site.url("/old-parchment"), out_dir)

    assert Path(output.cmd[0]).name == "curl"
    assert output.cmd_version.startswith("curl ")
    assert output.exit_code == 0
    document = json.loads((out_dir / "article.json").read_text(encoding="utf-8"))
    text = (out_dir / "content.txt").read_text(encoding="utf-8")
    assert document == {
        "title": "The Care of Parchment",
        "url": article_site.url("/articles/parchment.html"),
        "source": "fetch",
        "length": len(text.strip()),
    }


@pytest.mark.parametrize("path", ["/empty.html", "/blank.html"])
def test_page_without_article_text_is_skipped(
    article_site: ArticleSite, out_dir: Path, path: str
) -> None:
    output = run(article_site.url(path), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "no article text found"
    assert not {"content.html", "content.txt", "article.json"} & files_in(out_dir)


def test_missing_page_is_fatal(live_site: LiveSite, out_dir: Path) -> None:
    output = run(live_site.url("/missing.html"), out_dir)

    assert output.outcome is Outcome.FATAL
    assert "404" in output.error
    assert not (out_dir / "content.html").exists()


def test_unavailable_server_is_temporary(live_site: LiveSite, out_dir: Path) -> None:
    output = run(live_site.url("/server-error"), out_dir)

    assert output.outcome is Outcome.TEMPORARY
    assert output.retry_after == RETRY_AFTER_SECONDS


def test_page_that_is_not_html_is_skipped(live_site: LiveSite, out_dir: Path) -> None:
    output = run(live_site.url("/data.json"), out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "not HTML (application/json)"
    assert not (out_dir / "content.html").exists()


# --- the DOM saved by the dom extractor ----------------------------------------------------------


def test_saved_dom_is_read_instead_of_fetching(tmp_path: Path, out_dir: Path) -> None:
    # Nothing listens on this port: any fetch would fail with "connection refused".
    port = unused_port()
    url = f"http://127.0.0.1:{port}/stories/rendered.html"
    snapshot = snapshot_with_dom(tmp_path, url, RENDERED_DOM_HTML)

    output = ReadabilityExtractor().run(snapshot, out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert output.cmd == ["trafilatura", DOM_PATH]
    assert output.cmd_version == f"trafilatura {version('trafilatura')}"
    assert files_in(out_dir) == {"content.html", "content.txt", "article.json"}  # no curl.log
    text = (out_dir / "content.txt").read_text(encoding="utf-8")
    assert "Rendered Story" in text
    assert "written into the page by JavaScript in a café" in text
    assert "Shop" not in text
    html = (out_dir / "content.html").read_text(encoding="utf-8")
    assert f'href="http://127.0.0.1:{port}/stories/more.html"' in html
    document = json.loads((out_dir / "article.json").read_text(encoding="utf-8"))
    assert document == {
        "title": "Rendered Story",
        "url": url,
        "source": "dom",
        "length": len(text.strip()),
    }


def test_saved_dom_without_article_text_is_skipped(tmp_path: Path, out_dir: Path) -> None:
    url = f"http://127.0.0.1:{unused_port()}/"
    snapshot = snapshot_with_dom(tmp_path, url, "<html><body><div> </div></body></html>")

    output = ReadabilityExtractor().run(snapshot, out_dir)

    assert output.outcome is Outcome.SKIPPED
    assert output.error == "no article text found"
    assert output.cmd == ["trafilatura", DOM_PATH]


@pytest.mark.parametrize("dom", [None, ""], ids=["no DOM file", "empty DOM file"])
def test_without_a_saved_dom_the_page_is_fetched(
    article_site: ArticleSite, tmp_path: Path, out_dir: Path, dom: str | None
) -> None:
    snapshot = snapshot_with_dom(tmp_path, article_site.url("/articles/parchment.html"), dom)

    output = ReadabilityExtractor().run(snapshot, out_dir)

    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert Path(output.cmd[0]).name == "curl"
    document = json.loads((out_dir / "article.json").read_text(encoding="utf-8"))
    assert document["source"] == "fetch"
    assert "made from animal skins" in (out_dir / "content.txt").read_text(encoding="utf-8")


def test_title_becomes_the_heading_of_an_article_without_one() -> None:
    paragraph = "Iron gall ink is made from oak galls, iron sulphate and gum arabic. " * 5
    html = (
        "<html><head><title>Ink &amp; Gall</title></head><body>"
        f"<div class='post'><p>{paragraph}</p><p>{paragraph}</p></div></body></html>"
    )

    article = find_article(html, "http://example.test/ink")

    assert article is not None
    assert article.title == "Ink & Gall"
    assert "<title>Ink &amp; Gall</title>" in article.html
    assert "<h1>Ink &amp; Gall</h1>" in article.html
    assert article.text.startswith("Ink & Gall")


PARAGRAPH = "Oak gall ink darkens as it dries on the page, iron binding to tannin. " * 5
TITLED_PAGES = {
    "title with a site name": "<title>Gall Ink | The Scriptorium</title>",
    "open graph title": '<meta property="og:title" content="Ink from &quot;galls&quot;">',
    "JSON-LD headline": '<script type="application/ld+json">'
    '{"@context": "https://schema.org", "@type": "Article", "headline": "Ink, by JSON-LD"}'
    "</script><title>Other</title>",
    "one h1 over the title": "<title>Not this</title></head><body><h1>Only Heading</h1>",
    "no title at all": "",
}


@pytest.mark.parametrize("head", TITLED_PAGES.values(), ids=TITLED_PAGES.keys())
def test_the_article_title_is_the_one_trafilatura_metadata_finds(head: str) -> None:
    """The article's title is found without the rest of trafilatura's metadata (its author and
    date searches cost half the time); it must stay what ``extract_metadata`` says."""
    html = (
        f"<html><head>{head}</head><body><div class='post'><p>{PARAGRAPH}</p></div></body></html>"
    )
    expected = trafilatura.extract_metadata(trafilatura.load_html(html)).title

    article = find_article(html, "http://example.test/ink")

    assert article is not None
    assert article.title == " ".join((expected or "").split())


def test_a_base_that_is_no_url_is_ignored() -> None:
    paragraph = "Vellum is calfskin prepared for writing, finer than common parchment. " * 5
    html = (
        "<html><head><base href='http://[::1'><title>Calfskin</title></head><body>"
        f"<div class='post'><p>{paragraph}</p><p>{paragraph} <a href='/more'>more</a></p></div>"
        "</body></html>"
    )

    article = find_article(html, "http://example.test/calf")

    assert article is not None
    assert article.title == "Calfskin"
    assert 'href="http://example.test/more"' in article.html  # resolved against the page


def test_links_resolve_against_the_base_href() -> None:
    paragraph = "Goatskin parchment is thicker than calfskin and takes ink less evenly. " * 5
    html = (
        "<html><head><base href='//cdn.example.test/static/'><title>Goatskin</title></head>"
        f"<body><div class='post'><p>{paragraph}</p><p>{paragraph} <a href='more.html'>more</a>"
        " <img src='goat.png' alt='a goat'></p></div></body></html>"
    )

    article = find_article(html, "https://example.test/skins/goat")

    assert article is not None
    assert 'href="https://cdn.example.test/static/more.html"' in article.html
    assert 'src="https://cdn.example.test/static/goat.png"' in article.html
    assert "<base" not in article.html


def test_dom_output_path_is_in_the_snapshot_folder(tmp_path: Path) -> None:
    assert dom_output_path(SimpleNamespace(url="x", output_dir=tmp_path)) == tmp_path / DOM_PATH
    assert dom_output_path(SimpleNamespace(url="x")) is None


# --- should_run ----------------------------------------------------------------------------------


@pytest.fixture
def no_curl(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make curl look uninstalled to the base's binary check."""
    real = core.extractors.base.find_binary
    monkeypatch.setattr(
        core.extractors.base, "find_binary", lambda name: None if name == "curl" else real(name)
    )


def test_saved_dom_runs_without_curl(no_curl: None, tmp_path: Path) -> None:
    snapshot = snapshot_with_dom(tmp_path, "http://127.0.0.1/", RENDERED_DOM_HTML)

    assert ReadabilityExtractor().should_run(snapshot) == (True, "")


def test_without_saved_dom_curl_is_required(no_curl: None, tmp_path: Path) -> None:
    snapshot = snapshot_with_dom(tmp_path, "http://127.0.0.1/", None)

    assert ReadabilityExtractor().should_run(snapshot) == (False, "curl not found")


def test_disabled_extractor_does_not_run_even_with_a_saved_dom(settings, tmp_path: Path) -> None:
    settings.EXTRACTOR_OPTIONS = {"readability": {"enabled": False}}
    snapshot = snapshot_with_dom(tmp_path, "http://127.0.0.1/", RENDERED_DOM_HTML)

    assert ReadabilityExtractor().should_run(snapshot) == (False, "disabled in EXTRACTOR_OPTIONS")
