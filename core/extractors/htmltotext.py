"""Save a page's text as a reader would see it, laid out by inscriptis (tables, lists, blocks)."""

from __future__ import annotations

from pathlib import Path

from core.extractors.base import ExtractorOutput, Format, Output
from core.extractors.errors import Outcome
from core.extractors.fetch import FetchResult
from core.extractors.html_page import PAGE_IMPORTS, HtmlPageExtractor, Page, output_from_fetch

OUTPUT_TXT = "output.txt"


class HtmlToTextExtractor(HtmlPageExtractor):
    """GET the page with curl and convert its HTML to plain UTF-8 text (output.txt)."""

    name = "htmltotext"
    reads_saved = True  # the page from wget's WARC
    outputs = (Output(OUTPUT_TXT, Format.UTF8),)
    search_text = OUTPUT_TXT  # the whole page's text: readability's article comes first
    lazy_imports = (*PAGE_IMPORTS, "inscriptis")

    def extract(self, page: Page, result: FetchResult, out_dir: Path) -> ExtractorOutput:
        """Write output.txt into ``out_dir``; a page without any text is skipped."""
        # Imported here, not at the top: every process loads the extractor registry, and
        # inscriptis (with lxml.html) adds some 6 MB to each.
        from inscriptis import get_text

        text = get_text(page.html).strip()
        if not text:
            # An empty output would fail the snapshot's integrity check (DESIGN.md §2).
            return output_from_fetch(result, Outcome.SKIPPED, "page has no text")
        (out_dir / OUTPUT_TXT).write_text(text + "\n", encoding="utf-8")
        return output_from_fetch(result, output=OUTPUT_TXT)
