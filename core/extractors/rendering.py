"""The base of the extractors that render a page in the actor's shared Chromium (screenshot,
pdf, dom): load the page, wait for it to settle, hand it to ``capture``, classify what failed.

A page is loaded with the extractor's user agent, in a new page of the browser context its
crawl's pages share (core/extractors/browser.py; a persona's page, or one of no crawl, gets a
context of its own), and given until its ``load`` event plus a short wait for the network to
go quiet, so that what scripts fetch and add after loading is on the page when it is captured;
then it is scrolled to the bottom and back (core/extractors/behaviours.py), so that what loads
on sight is on it too. What the behaviours did is logged once per load.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar, NamedTuple
from urllib.parse import urlsplit

from django.conf import settings

from core.extractors.addresses import Refusal
from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.behaviours import (
    BehaviourOptions,
    BehaviourReport,
    behaviour_options,
    page_behave,
)
from core.extractors.browser import (
    Browser,
    BrowserUnavailable,
    DeadlineMissed,
    browser_egress,
    shared_browser,
)
from core.extractors.errors import (
    UNREACHABLE_NET_ERRORS,
    Outcome,
    classify_http_status,
    egress_failure,
    net_error_reason,
    timeout_reason,
    too_large_reason,
)
from core.extractors.fetch import parse_retry_after
from core.extractors.html_page import unavailable

logger = logging.getLogger(__name__)

# Seconds to wait, after ``load``, for no network connection for 500 ms (Playwright's
# "networkidle"); a page that polls forever is captured when this runs out.
SETTLE_SECONDS = 5
# Seconds between checks, while waiting for ``load``, that the main document's transfer did
# not fail (Chromium then never fires ``load``).
LOAD_POLL_SECONDS = 0.25


class Unusable(NamedTuple):
    """Why a page load gives nothing to capture: its outcome and error, with the server's
    Retry-After (seconds) and the HTTP status of the main response when it answered one."""

    outcome: Outcome
    error: str
    retry_after: float | None = None
    http_status: int | None = None


# Chromium's network errors (net/base/net_error_list.h) that a later attempt may not meet:
# those that say the server was not reached (errors.py), and these.
TEMPORARY_NET_ERRORS = UNREACHABLE_NET_ERRORS | {
    "ERR_INTERNET_DISCONNECTED",
    "ERR_NETWORK_CHANGED",
    "ERR_HTTP2_PROTOCOL_ERROR",
    "ERR_CONTENT_LENGTH_MISMATCH",  # the body was cut short (curl's exit 18)
    "ERR_INCOMPLETE_CHUNKED_ENCODING",
}
# What the rendering extractors render: web pages, images and text. Anything else (a PDF, an
# archive, JSON) Chromium shows in a viewer or downloads; wget keeps it as it was served.
RENDERED_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "image/")

# The schemes a page may be loaded from: a redirect elsewhere (file:, data:, javascript:...)
# is refused by Chromium, and reported as such.
WEB_SCHEMES = ("http", "https")
READY_STATE_SCRIPT = "() => document.readyState"

# Errors that mean "the browser went away" rather than "the page failed".
CRASH_MESSAGES = ("Target crashed", "has been closed", "Browser closed", "Connection closed")


@dataclass
class PageLoad:
    """What one capture learnt of how its page was loaded: ``loaded`` is False when it captured
    the page another extractor had loaded; ``navigations`` lists the page's URL, then each URL
    the main frame requested on its way there (redirects); ``behaviours`` is what was done to
    the page before its first capture (None when it was not loaded here, or not usable)."""

    navigations: list[str]
    loaded: bool = False
    behaviours: BehaviourReport | None = None


class ChromiumExtractor(Extractor):
    """Render ``snapshot.url`` in the shared browser and ``capture`` it into ``out_dir``.

    ``arguments`` cannot apply: the browser is shared by every rendering extractor of an actor
    (core/checks.py rejects the option for them).
    """

    binaries = ("chromium",)
    takes_arguments: ClassVar[bool] = False
    shares_visit: ClassVar[bool] = True
    lazy_imports: ClassVar[tuple[str, ...]] = ("playwright.sync_api",)

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Load the page and capture it; see the module docstring.

        Outcomes: SUCCEEDED with ``capture``'s file; an HTTP error status classified as for
        curl (RFC 9110: 404 FATAL, 429/5xx TEMPORARY with Retry-After); a download (a URL that
        Chromium does not render, such as a PDF) SKIPPED; a redirect to a URL that is not
        http(s), or an empty answer, FATAL (``_no_page``); a network error by Chromium's name
        for it; missing the deadline TEMPORARY; a file over MAX_DOWNLOAD_BYTES FATAL.
        """
        try:
            browser = shared_browser()
        except LookupError as error:
            return unavailable(error)
        except BrowserUnavailable as error:
            return ExtractorOutput(outcome=Outcome.TEMPORARY, error=str(error))
        output = ExtractorOutput(
            outcome=Outcome.SUCCEEDED,
            cmd=[*browser.command[:-1], snapshot.url],  # the browser's own command line
            cmd_version=browser.version,
        )
        egress = browser_egress()
        egress.take()  # what the last page fetched late is not this one's
        load = PageLoad(navigations=[snapshot.url])
        try:
            self._visit(browser, snapshot, out_dir, output, load)
        finally:
            refusals, unreachable = egress.take()
        if load.behaviours is not None:
            logger.info("%s: behaviours on %s: %s", self.name, snapshot.url, load.behaviours)
        # Every capture of one loaded page lists what its loading met, not only the first.
        if load.loaded:
            browser.visit_refusals = refusals
        output.refusals = refusals if load.loaded else [*browser.visit_refusals, *refusals]
        if output.outcome is not Outcome.SUCCEEDED:
            # The proxy's 403 or failed tunnel on the way to the page is not the page's answer:
            # say what the proxy met (Chromium's own background requests left aside).
            failure = egress_failure(
                on_the_way(refusals, load.navigations), on_the_way(unreachable, load.navigations)
            )
            output.outcome, output.error = failure or (output.outcome, output.error)
        return output

    def _visit(
        self,
        browser: Browser,
        snapshot: HasURL,
        out_dir: Path,
        output: ExtractorOutput,
        load: PageLoad,
    ) -> None:
        """Load and capture the page (or capture the one still open), recording the outcome on
        ``output`` and how the page was loaded on ``load``."""
        # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        behaviour = behaviour_options(snapshot)
        try:
            done = browser.visit(
                snapshot.url,
                load=partial(self._load, url=snapshot.url, record=load, behaviour=behaviour),
                capture=partial(self.capture, out_dir=out_dir),
                user_agent=self.user_agent,
                timeout=self.timeout,
                # Another snapshot's page (a capture of the same URL seconds later: a re-add,
                # a schedule), or one behaved otherwise, is not this capture's to take.
                load_key=(getattr(snapshot, "pk", None), behaviour),
                credentials=self.credentials,
                share=getattr(snapshot, "crawl_id", None),  # the crawl's pages share a context
            )
            if isinstance(done, tuple):
                output.outcome, output.error, output.retry_after, output.http_status = done
                return
            output.output = done
        except (DeadlineMissed, PlaywrightTimeout):
            output.outcome, output.error = timeout_reason("chromium", self.timeout)
            return
        except PlaywrightError as error:
            output.outcome, output.error = classify_browser_error(error.message, browser)
            return
        if (out_dir / output.output).stat().st_size > settings.MAX_DOWNLOAD_BYTES:
            output.outcome, output.error = too_large_reason(settings.MAX_DOWNLOAD_BYTES)

    def _load(
        self, page, *, url: str, record: PageLoad, behaviour: BehaviourOptions
    ) -> Unusable | None:
        """In the browser's thread: load ``url``, let it settle and run the behaviours
        (``behaviour``: the snapshot's crawl's options); return None, or why the response
        cannot be captured (Unusable). ``record`` notes that the page was loaded, and each URL
        the main frame requested on the way."""
        # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
        from playwright.sync_api import Error as PlaywrightError

        record.loaded = True
        deadline = time.monotonic() + self.timeout
        failures: list[str] = []
        downloads: list[str] = []  # refused: the context does not accept downloads
        page.on("requestfailed", partial(_note_document_failure, failures))
        page.on("request", partial(_note_navigation, record.navigations))
        page.on("download", partial(_note_download, downloads))
        try:
            response = page.goto(url, wait_until="commit")
        except PlaywrightError as error:
            if refused := _no_page(error.message, record.navigations):
                return refused
            raise
        if refused := self._refused(response, url):
            return refused
        _wait_for_load(page, failures, deadline, downloads)
        _settle(page)
        record.behaviours = page_behave(page, deadline=deadline, options=behaviour)
        if downloads:
            logger.info("%s: refused %d downloads started by %s", self.name, len(downloads), url)
        return None

    def capture(self, page, out_dir: Path) -> str:
        """Write this extractor's file from the loaded ``page``; return its name in ``out_dir``."""
        raise NotImplementedError(f"extractor {self.name!r} does not implement capture()")

    @staticmethod
    def _refused(response, url: str) -> Unusable | None:
        """The outcome of a main response with an error status or a media type that is not
        rendered (RENDERED_TYPES), or None when it is usable."""
        if response is None:  # same-document navigation (a fragment): nothing was refused
            return None
        outcome = classify_http_status(response.status)
        if outcome is not Outcome.SUCCEEDED:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            error = f"HTTP {response.status} from {response.url or url}"
            return Unusable(outcome, error, retry_after, response.status)
        media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type and not media_type.startswith(RENDERED_TYPES):
            return Unusable(Outcome.SKIPPED, f"not a page Chromium renders ({media_type})")
        return None


def _note_document_failure(failures: list[str], request) -> None:
    """Add the error of a failed main-frame navigation (``net::ERR_*``) to ``failures``.

    ERR_ABORTED is left out: a navigation that another one replaced, or a download.
    """
    failure = request.failure or ""
    if (
        request.is_navigation_request()
        and request.frame.parent_frame is None
        and "ERR_ABORTED" not in failure
    ):
        failures.append(failure)


def _note_navigation(navigations: list[str], request) -> None:
    if request.is_navigation_request() and request.frame.parent_frame is None:
        navigations.append(request.url)


def _note_download(downloads: list, download) -> None:
    downloads.append(download.url)


def on_the_way(events: list[Refusal], urls: list[str]) -> list[Refusal]:
    """Return the egress proxy's ``events`` about ``urls``: a plain-HTTP request names its URL,
    a tunnel its ``host:port``."""
    targets = set(urls)
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme == "https" and parts.hostname:
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            targets.add(f"{host}:{parts.port or 443}")
    return [event for event in events if event.target in targets]


def _wait_for_load(
    page, failures: list[str], deadline: float, downloads: list[str] | tuple = ()
) -> None:
    """Wait for the page's ``load`` event until ``deadline`` (time.monotonic()).

    A main document whose transfer fails once it has started (a body shorter than its
    Content-Length) never fires ``load``: raise Playwright's Error with the network error
    (``failures``, from ``_note_document_failure``) as soon as it is known, rather than
    wait for the deadline and report a timeout; raise its TimeoutError at the deadline.
    Once the page has started a download (``downloads``: a script sent it to an attachment),
    Playwright no longer sees its ``load`` event: the document's readyState says instead.
    """
    # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    while not failures:
        left = deadline - time.monotonic()
        wait_ms = max(min(left, LOAD_POLL_SECONDS) * 1000, 1)  # 0 would mean no timeout at all
        try:
            page.wait_for_load_state("load", timeout=wait_ms)
            return
        except PlaywrightTimeout:
            if downloads and page.evaluate(READY_STATE_SCRIPT) == "complete":
                return
            if left <= LOAD_POLL_SECONDS:
                raise
    raise PlaywrightError(failures[0])


def _no_page(message: str, navigations: list[str]) -> Unusable | None:
    """The outcome of a main document that Chromium refused to load (Playwright's error
    ``message`` on the way; ``navigations`` as on PageLoad): a redirect to a URL that is not
    http(s) (file:, data:, javascript:, ftp: or an application's scheme), or an answer with
    nothing to render (204). Fatal: the same answer refuses the same way next time. None for
    any other error."""
    for target in navigations[1:]:
        if urlsplit(target).scheme not in WEB_SCHEMES:
            shown = target if len(target) <= 100 else target[:99] + "…"
            return Unusable(Outcome.FATAL, f"redirect refused: {shown} is not an http(s) URL")
    if "net::ERR_UNSAFE_REDIRECT" in message:
        reason = (
            "redirect refused: its target is not an http(s) URL (chromium: ERR_UNSAFE_REDIRECT)"
        )
        return Unusable(Outcome.FATAL, reason)
    if "net::ERR_ABORTED" in message:
        # Chromium refuses a redirect to javascript: before Playwright sees the redirect.
        reason = (
            "nothing to load: an empty answer (HTTP 204) or a redirect to a URL that is not"
            " http(s) (chromium: ERR_ABORTED)"
        )
        return Unusable(Outcome.FATAL, reason)
    return None


def _settle(page) -> None:
    """Wait up to SETTLE_SECONDS for the page's network to go quiet."""
    # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_load_state("networkidle", timeout=SETTLE_SECONDS * 1000)


def classify_browser_error(message: str, browser: Browser) -> tuple[Outcome, str]:
    """Classify a Playwright error: a download, a Chromium net error, or a crash.

    Chromium names its network errors ``net::ERR_*`` (net/base/net_error_list.h); an unknown
    error is taken as temporary, since attempts are bounded by max_attempts anyway.
    """
    first_line = message.strip().splitlines()[0] if message.strip() else "unknown error"
    if "Download is starting" in message:
        return Outcome.SKIPPED, "not a page Chromium renders (the URL is a download)"
    if "net::ERR_" in message:
        code = message.split("net::", 1)[1].split()[0]
        outcome = Outcome.TEMPORARY if code in TEMPORARY_NET_ERRORS else Outcome.FATAL
        return outcome, net_error_reason(code)
    if not browser.alive or any(crash in message for crash in CRASH_MESSAGES):
        return Outcome.TEMPORARY, f"chromium crashed: {first_line}"
    return Outcome.TEMPORARY, f"chromium: {first_line}"
