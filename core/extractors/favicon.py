"""Save a site's icon: the one a page declares, else the conventional /favicon.ico; read from
wget's WARC when wget saved it (a declared icon is a page requisite), else fetched with curl."""

from __future__ import annotations

import re
import string
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit

from core.extractors.base import Extractor, ExtractorOutput, HasURL, ShownAs
from core.extractors.errors import Outcome
from core.extractors.fetch import FetchResult, fetch
from core.extractors.html_page import (
    PAGE_IMPORTS,
    Page,
    get_page,
    output_from_fetch,
    remove,
    saved_response,
    unavailable,
)

# File extension by media type (IANA registrations, plus the unregistered image/x-icon).
EXTENSIONS = {
    "image/x-icon": "ico",
    "image/vnd.microsoft.icon": "ico",
    "image/png": "png",
    "image/gif": "gif",
    "image/jpeg": "jpg",
    "image/svg+xml": "svg",
    "image/webp": "webp",
    "image/avif": "avif",
}
DEFAULT_EXTENSION = "ico"
# A token of a ``rel`` value: a run of anything but HTML's ASCII whitespace (§2.3.8, §2.3.3).
REL_TOKEN = re.compile(r"[^\t\n\f\r ]+")
ASCII_LOWERCASE = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# Shortest time, in seconds, worth giving one more candidate once the run's time is nearly spent.
MIN_CANDIDATE_SECONDS = 1


@dataclass
class Attempt:
    """One candidate icon URL and how fetching it went ("" reason: it is the icon)."""

    url: str
    declared: bool
    result: FetchResult
    reason: str = ""


def declared_icons(page: Page) -> list[str]:
    """Return the icon URLs a page declares, best first: rel "icon", then other *-icon rels.

    "icon" (and the legacy "shortcut icon") is the HTML standard's favicon (§4.6.7.9);
    "apple-touch-icon", "mask-icon" and the like are larger or monochrome variants, kept as
    fallbacks. data: URIs and other non-HTTP URLs are left out.
    """
    exact, variants = [], []
    for link in page.tree.iter("link"):
        href = link.get("href")
        if href is None:
            continue
        rels = link_types(link.get("rel") or "")
        url = page.resolve(href)
        if url is None or urlsplit(url).scheme.lower() not in ("http", "https"):
            continue
        if "icon" in rels:
            exact.append(url)
        elif any("icon" in rel for rel in rels):
            variants.append(url)
    return list(dict.fromkeys(exact + variants))


def link_types(rel: str) -> list[str]:
    """Return the link types of a ``rel`` value in order: its tokens, split on ASCII whitespace
    (HTML §2.3.8), ASCII-lowercased (link types are ASCII case-insensitive, §4.6.6)."""
    return REL_TOKEN.findall(rel.translate(ASCII_LOWERCASE))


def conventional_icon(page_url: str) -> str:
    """Return ``<scheme>://<host>/favicon.ico`` for a page URL (the pre-HTML5 convention)."""
    parts = urlsplit(page_url)
    return urlunsplit((parts.scheme, parts.netloc, "/favicon.ico", "", ""))


def icon_extension(content_type: str, url: str) -> str:
    """Pick the saved file's extension: from the media type, else the URL's, else "ico"."""
    if content_type in EXTENSIONS:
        return EXTENSIONS[content_type]
    suffix = PurePosixPath(urlsplit(url).path).suffix.lower().lstrip(".")
    return suffix if suffix in EXTENSIONS.values() else DEFAULT_EXTENSION


class FaviconExtractor(Extractor):
    """GET the page, then each candidate icon in turn, and keep the first real image."""

    name = "favicon"
    binaries = ("curl",)
    depends_on = ("wget",)  # when the profile runs wget: the page is read from its WARC
    lazy_imports = PAGE_IMPORTS
    # No declared outputs: the icon is the site's own bytes, checked for existence only.
    shown_as = ShownAs.IMAGE
    index_image = "favicon"

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Write favicon.<ext> into ``out_dir``; SKIPPED, with every candidate's fate, if none."""
        deadline = time.monotonic() + self.timeout
        try:
            result, page = get_page(snapshot, out_dir=out_dir, **self.curl_options())
        except LookupError as error:
            return unavailable(error)
        if result.outcome is not Outcome.SUCCEEDED:
            return output_from_fetch(result)
        # A page that is not HTML declares nothing; its site may still have an icon.
        declared = declared_icons(page) if page else []
        site_icon = conventional_icon(result.final_url or snapshot.url)
        candidates = [(url, True) for url in declared if url != site_icon] + [(site_icon, False)]
        attempts: list[Attempt] = []
        for url, is_declared in candidates:
            remaining = deadline - time.monotonic()
            if remaining < MIN_CANDIDATE_SECONDS:
                break
            attempt = self._try(snapshot, url, is_declared, out_dir, remaining)
            attempts.append(attempt)
            if not attempt.reason:
                return self._found(attempt, out_dir)
        out_of_time = len(attempts) < len(candidates)
        return self._not_found(result, declared, attempts, out_of_time)

    def _try(
        self, snapshot: HasURL, url: str, declared: bool, out_dir: Path, timeout: float
    ) -> Attempt:
        """Put one candidate in out_dir/.favicon-candidate and judge it: wget's copy when it
        saved the icon (a declared icon is a page requisite), else fetched with curl."""
        body = out_dir / ".favicon-candidate"
        remove(body)
        saved = saved_response(snapshot, url)
        if saved is not None:
            result, data = saved
            body.write_bytes(data)
        else:
            options = {**self.curl_options(), "timeout": timeout}
            result = fetch(
                url, body_path=body, headers_path=None, log_path=out_dir / "curl.log", **options
            )
        attempt = Attempt(url=url, declared=declared, result=result)
        if result.outcome is not Outcome.SUCCEEDED:
            attempt.reason = f"HTTP {result.http_status}" if result.http_status else result.error
        elif not body.exists() or body.stat().st_size == 0:
            attempt.reason = "empty response"
        elif result.is_html:
            # Many sites answer any path with a 200 HTML page instead of a 404.
            attempt.reason = "an HTML page, not an image"
        if attempt.reason:
            remove(body)
        return attempt

    def _found(self, attempt: Attempt, out_dir: Path) -> ExtractorOutput:
        name = f"favicon.{icon_extension(attempt.result.content_type, attempt.url)}"
        (out_dir / ".favicon-candidate").rename(out_dir / name)
        return output_from_fetch(attempt.result, output=name)

    def _not_found(
        self, page: FetchResult, declared: list[str], attempts: list[Attempt], out_of_time: bool
    ) -> ExtractorOutput:
        """Return TEMPORARY if a candidate may work next time, else SKIPPED; name each fate."""
        last = attempts[-1].result if attempts else page
        fates = [] if declared else ["declared: none"]
        for attempt in attempts:
            label = attempt.url if attempt.declared else urlsplit(attempt.url).path
            fates.append(f"{label}: {attempt.reason}")
        if out_of_time:
            fates.append(f"out of time after {self.timeout:g} s")
        reason = f"no favicon ({'; '.join(fates)})"
        temporary = out_of_time or any(a.result.outcome is Outcome.TEMPORARY for a in attempts)
        return output_from_fetch(last, Outcome.TEMPORARY if temporary else Outcome.SKIPPED, reason)
