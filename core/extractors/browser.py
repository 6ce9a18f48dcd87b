"""One headless Chromium per actor, shared by the extractors that render a page.

Launching Chromium costs far more than rendering one page, so an actor starts Debian's
``chromium`` once, on the first page it renders, and reuses it: each page gets a fresh browser
context (no cookies, cache or storage carried from one page to the next), and the extractors
drive it over the DevTools protocol (Playwright's ``connect_over_cdp``; SingleFile connects to
the same endpoint). The browser is started again after ``CHROMIUM_RESTART_PAGES`` pages (memory
grows with every page) and after it crashes or misses a deadline.

Vellum launches Chromium itself rather than through Playwright's launcher so that it is
confined like every other tool: its own process group (killed whole on close or on a missed
deadline), ``setpriv --pdeathsig KILL`` so that it dies with its actor even when the actor is
SIGKILLed, and the flags below, which keep it from calling out to Google's services (the
machines Vellum runs on may have no route to the internet, and an archive should only fetch
what it archives).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from django.conf import settings

from core.extractors.process import SETPRIV, find_binary

if TYPE_CHECKING:
    from playwright.sync_api import Page

logger = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

# Headless, and nothing in the background: no sync, component updates, metrics, field trials,
# translation or safe-browsing lookups; no QUIC (one network stack for every capture: the
# same TCP connections wget and curl see); no GPU on a server.
CHROMIUM_FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-field-trial-config",
    "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions",
    "--metrics-recording-only",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-pings",
    "--password-store=basic",
    "--use-mock-keychain",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",  # any free port; Chromium writes it to DevToolsActivePort
)
START_TIMEOUT = 30  # seconds for a new browser to open its DevTools port
DEADLINE_GRACE = 1  # seconds past a page's timeout before the browser is killed
VISIT_REUSE_SECONDS = 30  # how long a loaded page may serve the next capture of its URL
CLOSE_TIMEOUT = 5  # seconds for Chromium to exit on SIGTERM before it is SIGKILLed


class BrowserUnavailable(Exception):
    """Chromium did not start (the message says why): a temporary error."""


class DeadlineMissed(Exception):
    """A page took longer than its extractor's timeout; the browser was killed."""


def chromium_command(chromium: str, user_data_dir: Path) -> list[str]:
    """Return the command line that starts the shared browser (without the setpriv wrapper).

    Chromium refuses to run as root without ``--no-sandbox``: it is added only then.
    """
    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []
    return [chromium, *CHROMIUM_FLAGS, *sandbox, f"--user-data-dir={user_data_dir}", "about:blank"]


class Browser:
    """A running Chromium and Playwright's connection to it.

    ``cdp_url`` is its DevTools endpoint (``http://127.0.0.1:<port>``); ``pages`` counts the
    pages rendered since it started; ``process`` is Chromium's main process, the leader of its
    own process group.
    """

    def __init__(self, chromium: str) -> None:
        self.user_data_dir = new_profile_dir()
        self.command = chromium_command(chromium, self.user_data_dir)
        self.pages = 0
        self.process: subprocess.Popen | None = None
        self._playwright = None
        self._connection = None
        # The last page loaded: (url, user agent, final url, time.monotonic(), page).
        self._visit_open: tuple | None = None
        # Playwright's sync API runs an asyncio loop in the thread that uses it, and Django
        # refuses database calls in a thread with a running loop: every Playwright call happens
        # in this one thread instead, and the actor's thread waits for it.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chromium")
        try:
            self._launch()
            self._thread.submit(self._connect).result()
        except BaseException:
            self.close()
            raise

    def _launch(self) -> None:
        log_dir = Path(settings.DATA_DIR) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        wrapper = [SETPRIV, "--pdeathsig", "KILL", "--"] if SETPRIV else []
        with open(log_dir / "chromium.log", "ab") as log:
            self.process = subprocess.Popen(
                [*wrapper, *self.command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        port_file = self.user_data_dir / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise BrowserUnavailable(
                    f"chromium exited at start (exit {code}, see chromium.log)"
                )
            port = _read_port(port_file)
            if port:
                self.cdp_url = f"http://127.0.0.1:{port}"
                return
            time.sleep(0.05)
        raise BrowserUnavailable(f"chromium did not open its DevTools port in {START_TIMEOUT} s")

    def _connect(self) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._connection = self._playwright.chromium.connect_over_cdp(
            self.cdp_url, timeout=START_TIMEOUT * 1000
        )
        self.version = f"Chromium {self._connection.version}"

    @property
    def alive(self) -> bool:
        """True while Chromium runs and Playwright is connected to it."""
        return (
            self.process is not None
            and self.process.poll() is None
            and self._connection is not None
            and self._connection.is_connected()
        )

    def visit(
        self,
        url: str,
        *,
        load: Callable[[Page], R | None],
        capture: Callable[[Page], T],
        user_agent: str,
        timeout: float,
    ) -> R | T:
        """Return ``capture(page)`` of ``url`` loaded by ``load(page)``, or what ``load``
        returned when it was not None (the page cannot be captured), in the browser's thread.

        A page is loaded in a fresh browser context; the visit stays open for the next call,
        and a call for the same URL with the same user agent within VISIT_REUSE_SECONDS
        captures the page already loaded instead of loading it again (the screenshot, pdf and
        dom of a snapshot, when one actor runs them, then come from one visit). ``timeout``
        (seconds) is the deadline for all of it: Playwright's own timeouts are set to it, and
        when it passes anyway (a call without a timeout of its own, such as ``page.pdf``, on a
        hung renderer) the browser is killed and DeadlineMissed raised. Whatever ``load`` or
        ``capture`` raise (Playwright's errors included) is raised here.
        """
        self.pages += 1
        job = self._thread.submit(self._visit, url, load, capture, user_agent, timeout)
        try:
            return job.result(timeout=timeout + DEADLINE_GRACE)
        except FutureTimeout:
            self.kill()
            with contextlib.suppress(Exception):  # its calls fail at once on a dead browser
                job.result(timeout=CLOSE_TIMEOUT)
            raise DeadlineMissed(f"chromium timed out after {timeout:g} s") from None

    def _visit(self, url, load, capture, user_agent: str, timeout: float):
        page = self._last_page(url, user_agent)
        reused = page is not None
        if not reused:
            self._close_visit()
            page = self._connection.new_context(
                user_agent=user_agent,
                viewport={"width": 1280, "height": 800},
                accept_downloads=False,
            ).new_page()
        try:
            page.set_default_timeout(timeout * 1000)
            if not reused:
                refused = load(page)
                if refused is not None:
                    _close_context(page)
                    return refused
                self._visit_open = (url, user_agent, page.url, time.monotonic(), page)
            return capture(page)
        except BaseException:
            self._visit_open = None
            _close_context(page)
            raise

    def _last_page(self, url: str, user_agent: str) -> Page | None:
        """The open visit's page if it was of ``url`` with ``user_agent``, recently, and the
        page has not navigated elsewhere since (a script or a meta refresh)."""
        if self._visit_open is None:
            return None
        visited, agent, final_url, at, page = self._visit_open
        if (visited, agent) != (url, user_agent) or page.is_closed() or page.url != final_url:
            return None
        return page if time.monotonic() - at <= VISIT_REUSE_SECONDS else None

    def _close_visit(self) -> None:
        if self._visit_open is not None:
            page = self._visit_open[-1]
            self._visit_open = None
            _close_context(page)

    def kill(self) -> None:
        """SIGKILL Chromium's whole process group (a deadline was missed)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def close(self) -> None:
        """Disconnect, stop Chromium (SIGTERM, then SIGKILL), and delete its profile folder."""
        if self._connection is not None or self._playwright is not None:
            # A hung thread is left behind, and at interpreter exit (atexit) the executor takes
            # no more work (RuntimeError): Chromium is stopped all the same.
            with contextlib.suppress(Exception):
                self._thread.submit(self._disconnect).result(timeout=CLOSE_TIMEOUT)
        self._thread.shutdown(wait=False, cancel_futures=True)
        if self.process is not None:
            _stop_group(self.process)
        shutil.rmtree(self.user_data_dir, ignore_errors=True)

    def _disconnect(self) -> None:
        """Close Playwright's connection and stop its driver (in the browser's thread)."""
        self._close_visit()
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                self._playwright.stop()


def new_profile_dir() -> Path:
    """Make an empty Chromium profile folder, ``DATA_DIR/tmp/chromium-<pid>-<random>``, and
    delete those left by processes that no longer run (an actor that was SIGKILLed)."""
    parent = Path(settings.DATA_DIR) / "tmp"
    parent.mkdir(parents=True, exist_ok=True)
    for stale in parent.glob("chromium-*-*"):
        owner = stale.name.split("-")[1]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"chromium-{os.getpid()}-", dir=parent))


def _close_context(page: Page) -> None:
    """Close ``page``'s browser context (its cookies, storage and cache go with it)."""
    with contextlib.suppress(Exception):  # a killed or crashed browser cannot close it
        page.context.close()


def _read_port(port_file: Path) -> int | None:
    """Return the port on the first line of DevToolsActivePort, once Chromium has written it."""
    try:
        first = port_file.read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def _stop_group(process: subprocess.Popen) -> None:
    """Terminate ``process``'s group; SIGKILL it if it outlives CLOSE_TIMEOUT; reap it."""
    for sig, wait in ((signal.SIGTERM, CLOSE_TIMEOUT), (signal.SIGKILL, CLOSE_TIMEOUT)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; SIGKILL whatever it left in its group (zygote, renderers).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return


# --- the actor's shared browser ----------------------------------------------------------------

_shared: Browser | None = None


def shared_browser() -> Browser:
    """Return this process's browser, starting it (again) when it is not running, crashed, or
    has rendered CHROMIUM_RESTART_PAGES pages.

    Raises LookupError ("chromium not found") when chromium is not installed, as a missing
    binary does everywhere (core/extractors/page.py's ``unavailable`` skips the result), and
    BrowserUnavailable when it does not start.
    """
    global _shared
    if _shared is not None and (
        not _shared.alive or _shared.pages >= settings.CHROMIUM_RESTART_PAGES
    ):
        reason = "restarting" if _shared.alive else "replacing a dead"
        logger.info("%s browser after %d pages", reason, _shared.pages)
        close_shared_browser()
    if _shared is None:
        chromium = find_binary("chromium")
        if chromium is None:
            raise LookupError("chromium not found")
        _shared = Browser(chromium)
    return _shared


def close_shared_browser() -> None:
    """Stop this process's browser, if it runs (the actor calls this on exit)."""
    global _shared
    browser, _shared = _shared, None
    if browser is not None:
        browser.close()


atexit.register(close_shared_browser)
