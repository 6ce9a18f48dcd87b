"""Get a page for the extractors that read its HTML (title, favicon, htmltotext, outlinks, media).

When the snapshot's wget run saved the page, they read it from wget's WARC (they run after
wget when the profile has it: ``depends_on``), so that a page is fetched once, not five times
(issue 19). Otherwise each of them fetches for itself (core/extractors/fetch.py says why),
reads the body as text and keeps nothing of the fetch but its log: the body and headers are
temporary files in ``out_dir``, deleted before returning. Also here: turning a fetch into an
``ExtractorOutput``, and the base class of the extractors that read one page.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from django.conf import settings
from warcio.exceptions import ArchiveLoadFailed

from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.credentials import Credentials
from core.extractors.errors import Outcome
from core.extractors.fetch import FetchResult, fetch, header
from core.extractors.warc_index import file_identity, warc_index

if TYPE_CHECKING:
    from lxml.html import HtmlElement

# Where wget's WARC lies in a snapshot folder: as wget writes it (core/extractors/wget.py), or
# packed by finalizing (an extractor retried on a sealed snapshot reads that one).
WGET_WARCS = ("wget/warc/archive.warc", "wget/warc/archive.warc.gz")
# Redirects followed through wget's WARC to the page (wget's own default, --max-redirect).
MAX_SAVED_REDIRECTS = 20
# A UTF-16 surrogate on its own: what decoding with some Python codecs can give, and no str
# of a page may hold (it cannot be encoded, so lxml refuses it).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Page:
    """A fetched HTML page: its final URL (after redirects) and its decoded text."""

    url: str
    html: str

    @cached_property
    def tree(self) -> HtmlElement:
        """The parsed page: its <html> element (core/extractors/html_tree.py ``parse_html``)."""
        # Imported here, not at the top: every process loads the extractor registry, and
        # lxml.html adds some 9 MB to each, the idle orchestrator included.
        from core.extractors.html_tree import parse_html

        return parse_html(self.html)

    @cached_property
    def base_url(self) -> str:
        """The URL relative links resolve against: the first <base href>, else the page's.

        HTML Living Standard §4.2.3: only the first <base> with an href counts, itself resolved
        against the document's URL.
        """
        for base in self.tree.iter("base"):
            href = base.get("href")
            if href is None:
                continue
            try:
                return urljoin(self.url, href.strip())
            except ValueError:
                return self.url
        return self.url

    def resolve(self, href: str) -> str | None:
        """Return ``href`` made absolute against ``base_url``, or None if it is not a valid URL.

        Leading and trailing whitespace is not part of a URL attribute (HTML §2.5.2).
        """
        try:
            return urljoin(self.base_url, href.strip())
        except ValueError:
            return None


def get_page(
    snapshot: HasURL, *, out_dir: Path, **fetch_options
) -> tuple[FetchResult, Page | None]:
    """Return ``saved_page(snapshot)`` when wget saved the page, else ``fetch_page`` of its
    URL with ``fetch_options``. Raises LookupError if curl is needed and not installed."""
    saved = saved_page(snapshot)
    if saved is not None:
        return saved
    return fetch_page(snapshot.url, out_dir=out_dir, **fetch_options)


def fetch_page(
    url: str,
    *,
    out_dir: Path,
    timeout: float,
    user_agent: str = "",
    arguments: Sequence[str] = (),
    credentials: Credentials | None = None,
) -> tuple[FetchResult, Page | None]:
    """GET ``url`` with curl; return the fetch and, if it succeeded with HTML, the page.

    ``timeout``, ``user_agent``, ``arguments`` and ``credentials`` are passed to ``fetch``.
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
            credentials=credentials,
        )
        if result.outcome is not Outcome.SUCCEEDED or not result.is_html:
            return result, None
        charset = _charset(header(result.headers, "Content-Type"))
        html = decode_html(_read(body_path), charset)
        return result, Page(url=result.final_url or url, html=html)
    finally:
        remove(body_path)


# The page last read from a saved WARC in this process, by the WARC's file and the URL: the
# extractors that read a snapshot's page one after the other in one actor (title, favicon,
# htmltotext...) decode it, and parse it (``Page.tree``), once. What they are given is shared:
# none of them changes it.
_last_saved_page: tuple[tuple, tuple[FetchResult, Page | None] | None] | None = None


def saved_page(snapshot: HasURL) -> tuple[FetchResult, Page | None] | None:
    """Return the page as wget saved it (``saved_response`` for ``snapshot.url``), and the page
    when that response is HTML; or None when wget did not save it (the caller then fetches it,
    and classifies the failure as a fetch does). Read once per process for each WARC file
    and URL (``_last_saved_page``)."""
    global _last_saved_page
    folder = getattr(snapshot, "output_dir", None)
    warc = _wget_warc(Path(folder)) if folder else None
    try:
        key = (file_identity(warc), snapshot.url) if warc is not None else None
    except OSError:  # gone since: saved_response finds no WARC either
        key = None
    if key is not None and _last_saved_page is not None and _last_saved_page[0] == key:
        return _last_saved_page[1]
    page = _read_saved_page(Path(folder), warc, snapshot.url) if warc is not None else None
    if key is not None:
        _last_saved_page = (key, page)
    return page


def _read_saved_page(folder: Path, warc: Path, url: str) -> tuple[FetchResult, Page | None] | None:
    saved = _saved_response_in(folder, warc, url)
    if saved is None:
        return None
    result, body = saved
    if not result.is_html:
        return result, None
    charset = _charset(header(result.headers, "Content-Type"))
    return result, Page(url=result.final_url, html=decode_html(body, charset))


def saved_response(snapshot: HasURL, url: str) -> tuple[FetchResult, bytes] | None:
    """Return wget's answer to ``url`` from its WARC (WGET_WARCS, redirects followed), as a
    fetch reports one, with its decoded body; None when the snapshot has no such WARC, the WARC
    lacks ``url``, or the final answer is not a success (2xx).

    ``snapshot`` needs an ``output_dir`` (a Snapshot); a plain object with only ``url`` gets
    None. The WARC is read with warcio, whose content stream undoes chunking and content
    codings (RFC 9112 §7.1, RFC 9110 §8.4).
    """
    folder = getattr(snapshot, "output_dir", None)
    warc = _wget_warc(Path(folder)) if folder else None
    if warc is None:
        return None
    return _saved_response_in(Path(folder), warc, url)


def _saved_response_in(folder: Path, warc: Path, url: str) -> tuple[FetchResult, bytes] | None:
    """``saved_response`` from ``warc``, wget's WARC in the snapshot ``folder``."""
    try:
        final = _final_response(warc, url)
    except (ArchiveLoadFailed, OSError, ValueError):
        return None
    if final is None:
        return None
    final_url, headers, body = final
    content_type = header(headers, "Content-Type")
    result = FetchResult(
        outcome=Outcome.SUCCEEDED,
        error="",
        cmd=["warcio", warc.relative_to(folder).as_posix()],
        cmd_version=f"warcio {_warcio_version()}",
        exit_code=0,
        http_status=200,
        content_type=content_type.split(";")[0].strip().lower(),
        final_url=final_url,
        headers=headers,
    )
    return result, body


def _wget_warc(folder: Path) -> Path | None:
    """The WARC of wget's capture in a snapshot ``folder`` (WGET_WARCS), or None."""
    for name in WGET_WARCS:
        if (folder / name).is_file():
            return folder / name
    return None


def _final_response(warc: Path, url: str) -> tuple[str, dict[str, str], bytes] | None:
    """Return (URL, header fields, decoded body) of the 2xx response ``url`` leads to in
    ``warc``, following up to MAX_SAVED_REDIRECTS redirects; None if the chain leaves the WARC
    or ends in anything but a 2xx.

    Looked up in the WARC's index (core/extractors/warc_index.py), in file order: wget writes
    each hop of a redirect, then the page, before the page's requisites. Raises ValueError
    when the decoded body is larger than MAX_DOWNLOAD_BYTES (a gzip bomb): the caller then
    fetches the page, and curl's bound says why it failed; ArchiveLoadFailed when the WARC
    is corrupt before the page is found in it.
    """
    limit = settings.MAX_DOWNLOAD_BYTES
    wanted, hops = {url, _with_root_path(url)}, 0
    index = warc_index(warc)
    for record in index.records:
        if record.type != "response" or record.status is None or record.uri not in wanted:
            continue
        with index.open_record(record) as found:
            if found.http_headers is None:
                continue
            headers = dict(found.http_headers.headers)
            location = header(headers, "Location")
            if 300 <= record.status < 400 and location and hops < MAX_SAVED_REDIRECTS:
                target = urljoin(record.uri, location)
                wanted, hops = {target, _with_root_path(target)}, hops + 1
                continue
            if not 200 <= record.status < 300:
                return None
            body = found.content_stream().read(limit + 1)
        if len(body) > limit:
            raise ValueError(f"{record.uri}: decoded body larger than {limit} bytes")
        return record.uri, headers, body
    if index.error is not None:
        raise index.error  # the page may lie past what could be read
    return None


def _with_root_path(url: str) -> str:
    """``url`` with an empty path made ``/``, as wget requests and records it."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path or "/"))


@cache  # the installed version: reading it scans site-packages (about 0.4 ms a call)
def _warcio_version() -> str:
    try:
        return importlib.metadata.version("warcio")
    except importlib.metadata.PackageNotFoundError:
        return ""


# What reading a page imports on first use (Extractor.lazy_imports): its parser and decoder.
PAGE_IMPORTS = ("core.extractors.html_tree", "bs4.dammit")


def decode_html(data: bytes, http_charset: str | None) -> str:
    """Decode an HTML body: byte order mark, then HTTP charset, then <meta> charset, then UTF-8.

    The order is the HTML Living Standard's encoding sniffing (§13.2.3.2), without its guessing
    step; an encoding that is unknown or does not fit the bytes is passed over, and so is one
    that is no text encoding ("base64", "rot13") or that gives a lone surrogate ("utf-7",
    "unicode_escape": no HTML parser takes one). The last resort is UTF-8 with U+FFFD for bad
    bytes.
    """
    # Imported here, not at the top: every process loads the extractor registry, and
    # BeautifulSoup (with lxml) adds some 8 MB to each, the idle orchestrator included.
    from bs4.dammit import EncodingDetector

    data, bom_encoding = EncodingDetector.strip_byte_order_mark(data)
    declared = EncodingDetector.find_declared_encoding(data, is_html=True)
    for encoding in (bom_encoding, http_charset, declared, "utf-8"):
        if not encoding:
            continue
        try:
            text = data.decode(encoding)  # unlike codecs.decode, text encodings only
        except (LookupError, UnicodeDecodeError):
            continue
        if not LONE_SURROGATE.search(text):
            return text
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
        http_status=result.http_status,
        retry_after=result.retry_after,
        facts=facts or {},
        refusals=result.refusals,
    )


def remove(path: Path) -> None:
    """Delete a temporary file if it exists."""
    path.unlink(missing_ok=True)


class HtmlPageExtractor(Extractor):
    """Base of the extractors that read one HTML page: get it, then ``extract`` from it.

    ``run`` reads the page from wget's WARC (``saved_page``) or else fetches it with curl; a
    failed fetch keeps its outcome, a page that is not HTML is skipped, and only an HTML page
    reaches ``extract``.
    """

    binaries = ("curl",)
    depends_on = ("wget",)  # when the profile runs wget: its WARC holds the page
    lazy_imports = PAGE_IMPORTS

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Get ``snapshot``'s page and hand it to ``extract``; see the class docstring."""
        try:
            result, page = get_page(snapshot, out_dir=out_dir, **self.curl_options())
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
