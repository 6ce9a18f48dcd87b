"""Fetch a page for the extractors that read its HTML (title, favicon, htmltotext, outlinks).

Each of them fetches for itself (core/extractors/fetch.py says why), reads the body as text and
keeps nothing of the fetch but its log: the body and headers are temporary files in ``out_dir``,
deleted before returning. Also here: turning a fetch into an ``ExtractorOutput``, and the base
class of the extractors that read one page.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from bs4 import BeautifulSoup
from bs4.dammit import EncodingDetector

from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.errors import Outcome
from core.extractors.fetch import FetchResult, fetch, header


@dataclass
class Page:
    """A fetched HTML page: its final URL (after redirects) and its decoded text."""

    url: str
    html: str

    @cached_property
    def soup(self) -> BeautifulSoup:
        """The parsed page (lxml: fast, and forgiving of broken markup)."""
        return BeautifulSoup(self.html, "lxml")

    @cached_property
    def base_url(self) -> str:
        """The URL relative links resolve against: the first <base href>, else the page's.

        HTML Living Standard §4.2.3: only the first <base> with an href counts, itself resolved
        against the document's URL.
        """
        base = self.soup.find("base", href=True)
        if base is None:
            return self.url
        try:
            return urljoin(self.url, base["href"].strip())
        except ValueError:
            return self.url

    def resolve(self, href: str) -> str | None:
        """Return ``href`` made absolute against ``base_url``, or None if it is not a valid URL.

        Leading and trailing whitespace is not part of a URL attribute (HTML §2.5.2).
        """
        try:
            return urljoin(self.base_url, href.strip())
        except ValueError:
            return None


def fetch_page(
    url: str, *, out_dir: Path, timeout: float, user_agent: str = "", arguments: Sequence[str] = ()
) -> tuple[FetchResult, Page | None]:
    """GET ``url`` with curl; return the fetch and, if it succeeded with HTML, the page.

    ``timeout``, ``user_agent`` and ``arguments`` are passed to ``fetch``.
    The body goes to a temporary file in ``out_dir`` that is deleted before returning; curl's
    log stays in ``out_dir/curl.log``. Raises LookupError if curl is not installed.
    """
    body_path = out_dir / ".page-body"
    try:
        result = fetch(
            url,
            body_path=body_path,
            headers_path=None,
            log_path=out_dir / "curl.log",
            timeout=timeout,
            user_agent=user_agent,
            arguments=arguments,
        )
        if result.outcome is not Outcome.SUCCEEDED or not result.is_html:
            return result, None
        charset = _charset(header(result.headers, "Content-Type"))
        html = decode_html(_read(body_path), charset)
        return result, Page(url=result.final_url or url, html=html)
    finally:
        remove(body_path)


def decode_html(data: bytes, http_charset: str | None) -> str:
    """Decode an HTML body: byte order mark, then HTTP charset, then <meta> charset, then UTF-8.

    The order is the HTML Living Standard's encoding sniffing (§13.2.3.2), without its guessing
    step; an encoding that is unknown or does not fit the bytes is passed over. The last resort
    is UTF-8 with U+FFFD for bad bytes.
    """
    data, bom_encoding = EncodingDetector.strip_byte_order_mark(data)
    declared = EncodingDetector.find_declared_encoding(data, is_html=True)
    for encoding in (bom_encoding, http_charset, declared, "utf-8"):
        if not encoding:
            continue
        try:
            return codecs.decode(data, encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    return data.decode("utf-8", "replace")


def _charset(content_type: str) -> str | None:
    """Return the charset parameter of a Content-Type value, if any (RFC 9110 §8.3.2)."""
    message = Message()
    message["Content-Type"] = content_type
    return message.get_content_charset()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""  # curl writes no file for an empty body


def not_html(result: FetchResult) -> ExtractorOutput:
    """Return SKIPPED for a page that is not HTML, naming its content type."""
    kind = result.content_type or "no content type"
    return output_from_fetch(result, Outcome.SKIPPED, f"not HTML ({kind})")


def unavailable(error: LookupError) -> ExtractorOutput:
    """Return SKIPPED for a binary that disappeared after ``should_run`` ("curl not found")."""
    return ExtractorOutput(outcome=Outcome.SKIPPED, error=str(error))


def output_from_fetch(
    result: FetchResult,
    outcome: Outcome | None = None,
    error: str | None = None,
    *,
    output: str = "",
    facts: dict[str, Any] | None = None,
) -> ExtractorOutput:
    """Describe a run whose last command was ``result``'s curl; outcome and error default to its."""
    return ExtractorOutput(
        outcome=outcome or result.outcome,
        output=output,
        cmd=result.cmd,
        cmd_version=result.cmd_version,
        exit_code=result.exit_code,
        error=result.error if error is None else error,
        retry_after=result.retry_after,
        facts=facts or {},
        refusals=result.refusals,
    )


def remove(path: Path) -> None:
    """Delete a temporary file if it exists."""
    path.unlink(missing_ok=True)


class HtmlPageExtractor(Extractor):
    """Base of the extractors that read one HTML page: fetch it, then ``extract`` from it.

    ``run`` fetches the page with curl; a failed fetch keeps its outcome, a page that is not
    HTML is skipped, and only a fetched HTML page reaches ``extract``.
    """

    binaries = ("curl",)

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Fetch ``snapshot.url`` and hand the page to ``extract``; see the class docstring."""
        try:
            result, page = fetch_page(snapshot.url, out_dir=out_dir, **self.curl_options())
        except LookupError as error:
            return unavailable(error)
        if result.outcome is not Outcome.SUCCEEDED:
            return output_from_fetch(result)
        if page is None:
            return not_html(result)
        return self.extract(page, result, out_dir)

    def extract(self, page: Page, result: FetchResult, out_dir: Path) -> ExtractorOutput:
        """Write this extractor's outputs from ``page`` into ``out_dir`` and describe them."""
        raise NotImplementedError(f"extractor {self.name!r} does not implement extract()")
