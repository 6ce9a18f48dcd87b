"""Save the main article of a page as a reader view, found by trafilatura.

trafilatura (core/extractors/article.py) scores the page's blocks by their text, links and
markup (with jusText and a Readability port as fallbacks, and a retry that favours recall when
little of the page is kept) and keeps the main text whole, headings included, dropping
navigation, sidebars, footers, scripts and styles. On Sphinx documentation, where
readability-lxml kept one sub-section, it keeps the whole page. The page read is the DOM the
dom extractor saved after the page's scripts ran (so pages built by JavaScript have an
article), or, when there is none, the HTML as curl fetches it. Nothing here touches the network
or prints: trafilatura only logs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from core.extractors.base import ExtractorOutput, Format, HasURL, Output
from core.extractors.dom import DOM_PATH
from core.extractors.errors import Outcome
from core.extractors.fetch import FetchResult
from core.extractors.html_page import (
    PAGE_IMPORTS,
    HtmlPageExtractor,
    Page,
    decode_html,
    output_from_fetch,
)

CONTENT_HTML = "content.html"
CONTENT_TXT = "content.txt"
ARTICLE_JSON = "article.json"

DISTRIBUTION = "trafilatura"
NO_ARTICLE = "no article text found"


def dom_output_path(snapshot: HasURL) -> Path | None:
    """Return where the dom extractor saves ``snapshot``'s DOM (it may not exist).

    None for a stand-in snapshot without an ``output_dir`` (a benchmark passes only a URL).
    """
    folder = getattr(snapshot, "output_dir", None)
    return None if folder is None else Path(folder) / DOM_PATH


def saved_dom(snapshot: HasURL) -> Path | None:
    """Return the path of ``snapshot``'s saved DOM if it is a file that is not empty, else None."""
    path = dom_output_path(snapshot)
    try:
        if path is not None and path.is_file() and path.stat().st_size > 0:
            return path
    except OSError:
        pass
    return None


@cache
def trafilatura_version() -> str:
    """Return "trafilatura <version>" as installed ("trafilatura" if unknown)."""
    try:
        return f"{DISTRIBUTION} {version(DISTRIBUTION)}"
    except PackageNotFoundError:
        return DISTRIBUTION


class ReadabilityExtractor(HtmlPageExtractor):
    """Save the page's main article: content.html (a small page), content.txt and article.json.

    The DOM comes from the dom extractor's output when it exists and is not empty (read from
    disk, no network); otherwise curl fetches the page, and a failed fetch keeps its outcome (a
    404 is fatal, a 503 temporary) while a page that is not HTML is skipped. A page in which
    trafilatura finds no text is skipped too.
    """

    name = "readability"  # binaries: curl, for the fetch when there is no saved DOM
    reads_saved = True  # the DOM the dom extractor saved
    depends_on = ("dom",)
    lazy_imports = (*PAGE_IMPORTS, "core.extractors.article")
    outputs = (
        Output(ARTICLE_JSON, Format.JSON),
        Output(CONTENT_HTML, Format.UTF8),
        Output(CONTENT_TXT, Format.UTF8),
    )
    # The article without the page's menus and footers: searched before htmltotext's text.
    search_text = CONTENT_TXT
    search_text_priority = 1

    def should_run(self, snapshot: HasURL) -> tuple[bool, str]:
        """Run when enabled and either the DOM is saved or curl is installed.

        curl only serves the fallback fetch, so with a saved DOM its absence does not matter;
        this is checked just before ``run``, once the dom extractor has finished (depends_on).
        """
        if self.enabled and saved_dom(snapshot) is not None:
            return True, ""
        return super().should_run(snapshot)

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Write the article of ``snapshot``'s page into ``out_dir``; see the class docstring."""
        dom = saved_dom(snapshot)
        if dom is not None:
            html = decode_html(dom.read_bytes(), "utf-8")
            relative = dom.relative_to(snapshot.output_dir)  # type: ignore[attr-defined]
            ran = ExtractorOutput(
                outcome=Outcome.SUCCEEDED,
                cmd=[DISTRIBUTION, relative.as_posix()],
                cmd_version=trafilatura_version(),
            )
            return self._save(html, snapshot.url, "dom", out_dir, ran)
        return super().run(snapshot, out_dir)  # fetch with curl, then extract()

    def extract(self, page: Page, result: FetchResult, out_dir: Path) -> ExtractorOutput:
        """Write the article of a page curl fetched (no saved DOM)."""
        return self._save(page.html, page.url, "fetch", out_dir, output_from_fetch(result))

    def _save(
        self, html: str, url: str, source: str, out_dir: Path, ran: ExtractorOutput
    ) -> ExtractorOutput:
        """Write the article of ``html`` (from ``source``, "dom" or "fetch") into ``out_dir``;
        return ``ran`` (which describes the command) with the outcome."""
        # Imported here, not at the top: every process loads the extractor registry, and
        # trafilatura (with its date and language packages) and lxml.html take some 0.2 s and
        # 20 MB to import.
        from core.extractors.article import find_article

        article = find_article(html, url)
        if article is None:
            # An empty output would fail the snapshot's integrity check (DESIGN.md §2).
            return replace(ran, outcome=Outcome.SKIPPED, error=NO_ARTICLE)
        (out_dir / CONTENT_HTML).write_text(article.html, encoding="utf-8")
        (out_dir / CONTENT_TXT).write_text(article.text + "\n", encoding="utf-8")
        summary = {
            "title": article.title,
            "url": url,
            "source": source,
            "length": len(article.text),
        }
        (out_dir / ARTICLE_JSON).write_text(
            json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )
        return replace(ran, output=CONTENT_HTML)
