"""Save a page as it prints: a PDF from the shared Chromium."""

from __future__ import annotations

from pathlib import Path

from core.extractors.base import Format, Output
from core.extractors.rendering import ChromiumExtractor

OUTPUT_PDF = "output.pdf"


class PdfExtractor(ChromiumExtractor):
    """Print the page to output.pdf (A4, backgrounds printed), as Chromium's print does."""

    name = "pdf"
    outputs = (Output(OUTPUT_PDF, Format.PDF),)

    def capture(self, page, out_dir: Path) -> str:
        """Write output.pdf (the page's print media styles apply)."""
        page.pdf(path=out_dir / OUTPUT_PDF, format="A4", print_background=True)
        return OUTPUT_PDF
