"""Save a page as it prints: a PDF from the shared Chromium."""

from __future__ import annotations

import re
from pathlib import Path

from core.extractors.base import Format, Output
from core.extractors.rendering import ChromiumExtractor

OUTPUT_PDF = "output.pdf"
# The moment Chromium's printer (Skia) made the PDF, in its document information dictionary
# (ISO 32000-1 §14.3.3): /CreationDate (D:20261126194741+00'00') and /ModDate the same.
PRINTED_AT = re.compile(rb"/(?:CreationDate|ModDate) ?\((D:[0-9]{4,14}[-+Z0-9']*)\)")


class PdfExtractor(ChromiumExtractor):
    """Print the page to output.pdf (A4, backgrounds printed), as Chromium's print does."""

    name = "pdf"
    outputs = (Output(OUTPUT_PDF, Format.PDF, stamp=PRINTED_AT),)

    def capture(self, page, out_dir: Path) -> str:
        """Write output.pdf (the page's print media styles apply)."""
        page.pdf(path=out_dir / OUTPUT_PDF, format="A4", print_background=True)
        return OUTPUT_PDF
