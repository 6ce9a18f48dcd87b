"""Save the HTTP response headers of a URL: every hop as curl saw it, and the final one as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from core.extractors.base import Extractor, ExtractorOutput, Format, HasURL, Output
from core.extractors.errors import Outcome
from core.extractors.fetch import fetch
from core.extractors.html_page import output_from_fetch, remove, unavailable

HEADERS_TXT = "headers.txt"
HEADERS_JSON = "headers.json"


class HeadersExtractor(Extractor):
    """GET the URL with curl; keep headers.txt (every hop) and write headers.json (final hop)."""

    name = "headers"
    binaries = ("curl",)
    outputs = (Output(HEADERS_JSON, Format.JSON),)

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Write headers.txt and headers.json into ``out_dir``; output is "headers.json"."""
        body = out_dir / ".headers-body"  # the body is not kept: only its headers are wanted
        try:
            result = fetch(
                snapshot.url,
                body_path=body,
                headers_path=out_dir / HEADERS_TXT,
                log_path=out_dir / "curl.log",
                **self.curl_options(),
            )
        except LookupError as error:
            return unavailable(error)
        finally:
            remove(body)
        if result.outcome is not Outcome.SUCCEEDED:
            return output_from_fetch(result)
        if not result.headers:
            return output_from_fetch(result, Outcome.FATAL, "curl saved no response headers")
        document = {
            "url": snapshot.url,
            "final_url": result.final_url or snapshot.url,
            "status": result.http_status,
            "headers": result.headers,
        }
        (out_dir / HEADERS_JSON).write_text(
            json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return output_from_fetch(result, output=HEADERS_JSON)
