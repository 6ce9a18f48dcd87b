"""Save the links a page points to: absolute http(s) URLs, without fragments, deduplicated."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

from core.extractors.base import ExtractorOutput, Format, Output
from core.extractors.fetch import FetchResult
from core.extractors.html_page import HtmlPageExtractor, Page, output_from_fetch

OUTLINKS_JSON = "outlinks.json"
# Hyperlinks are <a href> and <area href> (HTML §4.6.1); <link> and <img> are not navigable.
LINK_TAGS = ("a", "area")
FOLLOWED_SCHEMES = ("http", "https")


def page_links(page: Page) -> list[str]:
    """Return the page's hyperlinks in document order, absolute, http(s) only, each once.

    Fragments are dropped (they name a place in a page, not another page), and so are links
    back to the page itself, such as "#top".
    """
    links: dict[str, None] = {}  # a dict keeps first-seen order
    for tag in page.tree.iter(*LINK_TAGS):
        href = tag.get("href")
        url = None if href is None else page.resolve(href)
        if url is None or urlsplit(url).scheme.lower() not in FOLLOWED_SCHEMES:
            continue
        links.setdefault(urldefrag(url).url)
    links.pop(urldefrag(page.url).url, None)
    return list(links)


class OutlinksExtractor(HtmlPageExtractor):
    """GET the page with curl and list its links (outlinks.json); facts = {"outlinks": [...]}."""

    name = "outlinks"
    reads_saved = True  # the page from wget's WARC
    outputs = (Output(OUTLINKS_JSON, Format.JSON),)

    def extract(self, page: Page, result: FetchResult, out_dir: Path) -> ExtractorOutput:
        """Write outlinks.json (a JSON list of URLs) into ``out_dir``; no links is still success."""
        links = page_links(page)
        (out_dir / OUTLINKS_JSON).write_text(json.dumps(links, indent=2) + "\n", encoding="utf-8")
        return output_from_fetch(result, output=OUTLINKS_JSON, facts={"outlinks": links})
