"""Save a page's text as a reader would see it, laid out by inscriptis (tables, lists, blocks)."""

from __future__ import annotations

from pathlib import Path

from inscriptis import get_text

from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.errors import Outcome
from core.extractors.page import fetch_page, not_html, output_from_fetch, unavailable

OUTPUT_TXT = "output.txt"


class HtmlToTextExtractor(Extractor):
    """GET the page with curl and convert its HTML to plain UTF-8 text (output.txt)."""

    name = "htmltotext"
    binaries = ("curl",)

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Write output.txt into ``out_dir``; a page without any text is skipped."""
        try:
            result, page = fetch_page(snapshot.url, out_dir=out_dir, timeout=self.timeout)
        except LookupError as error:
            return unavailable(error)
        if result.outcome is not Outcome.SUCCEEDED:
            return output_from_fetch(result)
        if page is None:
            return not_html(result)
        text = get_text(page.html).strip()
        if not text:
            # An empty output would fail the snapshot's integrity check (DESIGN.md §2).
            return output_from_fetch(result, Outcome.SKIPPED, "page has no text")
        (out_dir / OUTPUT_TXT).write_text(text + "\n", encoding="utf-8")
        return output_from_fetch(result, output=OUTPUT_TXT)
