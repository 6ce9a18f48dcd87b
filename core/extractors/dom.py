"""Save a page's DOM after its scripts ran, serialized as HTML by the shared Chromium."""

from __future__ import annotations

from pathlib import Path

from core.extractors.base import Format, Output
from core.extractors.rendering import ChromiumExtractor

OUTPUT_HTML = "output.html"
# Where the readability extractor finds it, relative to the snapshot folder.
DOM_PATH = f"dom/{OUTPUT_HTML}"


class DomExtractor(ChromiumExtractor):
    """Serialize the rendered document (what scripts added included) to output.html, UTF-8."""

    name = "dom"
    outputs = (Output(OUTPUT_HTML, Format.UTF8),)

    def capture(self, page, out_dir: Path) -> str:
        """Write output.html: the document's markup as the browser holds it, UTF-8.

        A page that declared another charset keeps its ``<meta charset>``, so the file then
        starts with a UTF-8 byte order mark, which wins over the meta tag when the file is
        read (HTML Living Standard §13.2.3.2, encoding sniffing).
        """
        declared_utf8 = page.evaluate("() => document.characterSet") == "UTF-8"
        encoding = "utf-8" if declared_utf8 else "utf-8-sig"
        (out_dir / OUTPUT_HTML).write_text(page.content(), encoding=encoding)
        return OUTPUT_HTML
