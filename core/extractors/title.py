"""Save a page's title: the text of its <title>, whitespace collapsed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.extractors.base import ExtractorOutput, Format, MainOutput, Output, ShownAs
from core.extractors.errors import Outcome
from core.extractors.fetch import FetchResult
from core.extractors.html_page import HtmlPageExtractor, Page, output_from_fetch

if TYPE_CHECKING:
    from lxml.html import HtmlElement

# Longest title kept, in characters: longer ones are page text someone put in <title>.
MAX_TITLE_CHARS = 512
TITLE_TXT = "title.txt"
# A <title> inside one of these is not the page's.
NOT_TITLES_IN = ("svg", "template")


class TitleExtractor(HtmlPageExtractor):
    """GET the page with curl and read its <title>; write title.txt, output the title itself."""

    name = "title"
    reads_saved = True  # the page from wget's WARC
    main_output = MainOutput.VALUE
    outputs = (Output(TITLE_TXT, Format.UTF8),)
    shown_as = ShownAs.VALUE
    gives_title = True

    def extract(self, page: Page, result: FetchResult, out_dir: Path) -> ExtractorOutput:
        """Write title.txt into ``out_dir``; facts = {"title": the title}."""
        tag = _document_title(page)
        if tag is None:
            return output_from_fetch(result, Outcome.SKIPPED, "page has no <title>")
        title = " ".join(tag.text_content().split())[:MAX_TITLE_CHARS]
        if not title:
            return output_from_fetch(result, Outcome.SKIPPED, "page has an empty <title>")
        (out_dir / TITLE_TXT).write_text(title + "\n", encoding="utf-8")
        return output_from_fetch(result, output=title, facts={"title": title})


def _document_title(page: Page) -> HtmlElement | None:
    """Return the page's first <title> element that is not an SVG image's (HTML §4.2.2), nor
    in a <template>, whose content is not part of the document (§4.12.3)."""
    for tag in page.tree.iter("title"):
        if next(tag.iterancestors(*NOT_TITLES_IN), None) is None:
            return tag
    return None
