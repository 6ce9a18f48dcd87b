"""One headless Chromium per actor, shared by the extractors that render a page.

Launching Chromium costs far more than rendering one page, so an actor starts Debian's
``chromium`` once, on the first page it renders, and reuses it. The browser is started again
after ``CHROMIUM_RESTART_PAGES`` pages (memory grows with every page) and after it crashes or
misses a deadline.

The pages of one crawl share a browser context, as they share one browser profile in
Browsertrix Crawler: cookies and storage that one page set are there for the next, as for a
reader going from page to page of a site. A new context for every page cost Chromium and its
driver about twice the CPU of a new page in a kept context (0.8 to 0.9 s against 0.4 to 0.5 s
per python3-doc page, loaded alone); a context whose last page has closed makes its next page
cost as much as a new one, so a blank page stays open in the kept context. Three things
are still each page's own: the page itself (a new page, with its own sessionStorage and
history), its record (a new recorder) and the HTTP cache, cleared before it loads, so that
every page fetches, and its WARC holds, all it needs (``_clear_cache``; each page has had a new
renderer, so an empty memory cache too, but Chromium may share one past its process limit). A
page of another crawl or user agent, one signed in with a persona's cookies, and one loaded
for no crawl get a context of their own, and the kept one is closed; so is a context whose
page failed (a crash, a missed deadline, an error of Playwright's). A crawl's pages are spread
over the actors, and an actor may render other pages between two of them: a page finds the
state of those before it that the same actor rendered since its context was last replaced.

Playwright launches it and drives it over ``--remote-debugging-pipe`` (file descriptors 3 and 4
of the browser): there is no DevTools TCP port that another process or user of the machine
could drive (DESIGN.md §8; issue 16). Chromium is started through ``chromium-launcher``, a
small exec wrapper beside this module, so that it is confined like every other tool: its own
process group (Playwright starts it in a new session; the group is killed whole on close or
on a missed deadline), ``setpriv --pdeathsig KILL`` so that it dies with Playwright's driver,
which exits with its actor even when the actor is SIGKILLed, and the flags below, which keep it
from calling out to Google's services (the machines Vellum runs on may have no route to the
internet, and an archive should only fetch what it archives). Its sandbox is on unless the
actor runs as root, where Chromium refuses to start with it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from django.conf import settings

from core.extractors.behaviours import DIALOG_SCRIPT, WATCH_SCRIPT
from core.extractors.credentials import Credentials
from core.extractors.egress import EgressProxy
from core.extractors.process import find_binary, on_shutdown, process_state
from core.extractors.recorder import Recorder

if TYPE_CHECKING:
    from playwright.sync_api import Page

logger = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

# Headless, and nothing in the background: no sync, component updates, metrics, field trials,
# translation or safe-browsing lookups; no QUIC (one network stack for every capture: the
# same TCP connections wget and curl see); no GPU on a server. Playwright adds its own
# defaults before these (Chromium keeps the last value of a repeated switch).
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
)
# Playwright's own switch for its DevTools connection (it refuses it in ``args``).
PIPE_FLAG = "--remote-debugging-pipe"
# Playwright's defaults that Vellum drops: Playwright turns Chromium's popup blocker off for
# tests that open windows, and a page could then open windows in a loop (a popup storm) faster
# than they can be closed. With it on, a window opened without a user's gesture never opens
# (each of Playwright's calls into a page counts as one: what that lets through, _Popups
# closes).
DROPPED_DEFAULTS = ("--disable-popup-blocking",)
# Starts Chromium for Playwright: see its comments. It finds Chromium and its log file in the
# environment variables below.
LAUNCHER = Path(__file__).with_name("chromium-launcher")
START_TIMEOUT = 30  # seconds for a new browser to start and answer over its pipe
DEADLINE_GRACE = 1  # seconds past a page's timeout before the browser is killed
VISIT_REUSE_SECONDS = 30  # how long after a capture a loaded page may serve the next one
CLOSE_TIMEOUT = 5  # seconds for Chromium to exit on SIGTERM before it is SIGKILLed


class BrowserUnavailable(Exception):
    """Chromium did not start (the message says why): a temporary error."""


class DeadlineMissed(Exception):
    """A page took longer than its extractor's timeout; the browser was killed."""


_egress: tuple[int, EgressProxy] | None = None  # (the process it serves, the proxy)


def browser_egress() -> EgressProxy:
    """Return the egress proxy that this process's browsers fetch through, started on first
    use (a forked child starts its own: the parent's thread did not come along)."""
    global _egress
    if _egress is None or _egress[0] != os.getpid():
        _egress = (os.getpid(), EgressProxy().start())
    return _egress[1]


def extra_launch_args() -> list[str]:
    """Return the switches added to CHROMIUM_FLAGS for every browser: every request goes
    through the egress proxy (core/extractors/egress.py), loopback included (Chromium skips the
    proxy for it unless ``<-loopback>`` says otherwise), and WebRTC sends no UDP around it."""
    return [
        f"--proxy-server={browser_egress().url}",
        "--proxy-bypass-list=<-loopback>",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    ]


def sandboxed() -> bool:
    """True unless this process runs as root: Chromium refuses to start as root with its
    sandbox on, so only then does it run with ``--no-sandbox`` (run Vellum as another user,
    README "Security", to keep it on)."""
    return os.geteuid() != 0


def launch_args() -> list[str]:
    """Return the switches Vellum passes to Playwright's launch (Playwright adds its defaults,
    ``--user-data-dir``, PIPE_FLAG and, without the sandbox, ``--no-sandbox``)."""
    return [*CHROMIUM_FLAGS, *extra_launch_args()]


def chromium_command(chromium: str, user_data_dir: Path) -> list[str]:
    """Return the command line the shared browser is started with, as recorded in results:
    Vellum's switches, the sandbox rule, the profile and the DevTools pipe (Playwright's own
    defaults left out)."""
    sandbox = [] if sandboxed() else ["--no-sandbox"]
    profile = f"--user-data-dir={user_data_dir}"
    return [chromium, *launch_args(), *sandbox, profile, PIPE_FLAG, "about:blank"]


class Browser:
    """A running Chromium and Playwright's connection to it.

    ``pid`` is Chromium's main process, the leader of its own process group; ``pages`` counts
    the pages loaded since it started (a capture of a page already loaded is not counted);
    ``command`` is its command line (chromium_command).
    """

    def __init__(self, chromium: str) -> None:
        self.chromium = chromium
        self.user_data_dir = new_profile_dir()
        self.temp_dir = new_temp_dir()
        self.command = chromium_command(chromium, self.user_data_dir)
        self.pages = 0
        self.pid: int | None = None
        # Set by kill(): for a moment after SIGKILL the process still runs (the kernel is
        # tearing it down) and Playwright's connection reads as connected until its thread next
        # runs, so neither can tell the next capture that this browser is gone.
        self._killed = False
        self._playwright = None
        self._context = None  # the persistent context Playwright launched the browser with
        self._connection = None
        # The last page loaded: (url, user agent, final url, time.monotonic(), page).
        self._visit_open: tuple | None = None
        # What the open page's context is kept for when the page ends, and its blank page:
        # (``_open_page``'s ``keep``, blank page); None: it is closed with the page. And the
        # page's popup watch.
        self._open_keep: tuple | None = None
        self._popups: _Popups | None = None
        # The context kept for the next page of the same crawl and user agent, by the blank
        # page open in it: (keep, blank page).
        self._spare: tuple[tuple, Page] | None = None
        # What the egress proxy refused while that page loaded: every capture of it lists them
        # (core/extractors/rendering.py keeps it).
        self.visit_refusals: list = []
        # Playwright's sync API runs an asyncio loop in the thread that uses it, and Django
        # refuses database calls in a thread with a running loop: every Playwright call happens
        # in this one thread instead, and the actor's thread waits for it.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chromium")
        try:
            self._thread.submit(self._launch).result()
        except BaseException:
            self.close()
            raise

    def _launch(self) -> None:
        """Start Chromium through LAUNCHER and connect to it (in the browser's thread).

        Raises BrowserUnavailable when it does not start within START_TIMEOUT.
        """
        # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright

        log_dir = Path(settings.DATA_DIR) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "TMPDIR": str(self.temp_dir),
            "VELLUM_CHROMIUM": self.chromium,
            "VELLUM_CHROMIUM_LOG": str(log_dir / "chromium.log"),
        }
        self._playwright = sync_playwright().start()
        try:
            # A persistent context, for a profile folder of Vellum's own under DATA_DIR; pages
            # load in contexts of their own (new_context), one per crawl.
            self._context = self._playwright.chromium.launch_persistent_context(
                self.user_data_dir,
                executable_path=str(LAUNCHER),
                args=launch_args(),
                ignore_default_args=list(DROPPED_DEFAULTS),
                headless=True,
                chromium_sandbox=sandboxed(),
                env=env,
                timeout=START_TIMEOUT * 1000,
            )
        except PlaywrightError as error:
            first = error.message.strip().splitlines()[0] if error.message.strip() else "?"
            raise BrowserUnavailable(
                f"chromium did not start ({first}; see chromium.log)"
            ) from None
        self._connection = self._context.browser
        self.version = f"Chromium {self._connection.version}"
        self.pid = self._browser_pid()

    def _browser_pid(self) -> int:
        """Return the browser process's id, as Chromium reports it (SystemInfo domain)."""
        session = self._connection.new_browser_cdp_session()
        try:
            processes = session.send("SystemInfo.getProcessInfo")["processInfo"]
        finally:
            session.detach()
        return next(int(p["id"]) for p in processes if p["type"] == "browser")

    @property
    def alive(self) -> bool:
        """True while Chromium runs, Playwright is connected to it, and it was not ``kill()``ed."""
        return (
            self.pid is not None
            and not self._killed
            and _running(self.pid)
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
        load_key: Hashable = None,
        credentials: Credentials | None = None,
        share: Hashable = None,
    ) -> R | T:
        """Return ``capture(page)`` of ``url`` loaded by ``load(page)``, or what ``load``
        returned when it was not None (the page cannot be captured), in the browser's thread.

        A page is loaded in the browser context of the page before it when both have the same
        ``share`` (not None: the crawl) and user agent and no ``credentials`` (the module
        docstring), else in a new one; the visit stays open for the next call,
        and a call for the same URL with the same user agent and ``load_key`` (what else
        ``load`` depends on: the snapshot asking, the crawl's behaviour options) within
        VISIT_REUSE_SECONDS of the last capture captures the page already loaded instead of
        loading it again (a snapshot's browser outputs, which one actor claims together and
        runs one after the other, then come from one visit). ``alert``, ``confirm`` and
        ``prompt`` answer in the page as dismissed (DIALOG_SCRIPT), and any dialog that still
        opens (``beforeunload``, or one from a frame the script missed) is dismissed at once,
        so that no page can block its capture; every other page it opens (``window.open``, a
        link to ``_blank``) is closed as soon as it opens (how many were is logged when the
        visit ends). ``timeout`` (seconds) is the deadline for all of it: Playwright's own
        timeouts are set to it, and when it passes anyway (a call without a timeout of its own,
        such as ``page.pdf``, on a hung renderer) the browser is killed and DeadlineMissed
        raised. Whatever ``load`` or ``capture`` raise (Playwright's errors included) is raised
        here. ``credentials`` (a persona's) give the context its cookies (a storage state) and
        extra headers; a page loaded with others is not reused.
        """
        signed_in = credentials.fingerprint if credentials else None
        # What a kept context may serve: the next page of the same crawl and user agent.
        keep = (share, user_agent) if share is not None and credentials is None else None
        job = self._thread.submit(
            self._visit,
            (url, user_agent, load_key, signed_in),
            load,
            capture,
            user_agent,
            timeout,
            credentials,
            keep,
        )
        try:
            return job.result(timeout=timeout + DEADLINE_GRACE)
        except FutureTimeout:
            self.kill()
            with contextlib.suppress(Exception):  # its calls fail at once on a dead browser
                job.result(timeout=CLOSE_TIMEOUT)
            raise DeadlineMissed(f"chromium timed out after {timeout:g} s") from None

    def _visit(
        self,
        key: tuple,
        load,
        capture,
        user_agent: str,
        timeout: float,
        credentials: Credentials | None,
        keep: tuple | None,
    ):
        page = self._last_page(key)
        reused = page is not None
        if not reused:
            self.pages += 1  # loads, not captures: CHROMIUM_RESTART_PAGES counts pages
            self._close_visit()
            page = self._open_page(key[0], user_agent, credentials, keep)
        try:
            page.set_default_timeout(timeout * 1000)
            if not reused:
                refused = load(page)
                if refused is not None:  # an answer, not a failure: the crawl goes on in it
                    self._end_page(page, keep=True)
                    return refused
                self._visit_open = (key, page.url, time.monotonic(), page)
            captured = capture(page)
            # The window counts from the last capture: a long page's fifth capture may start
            # well after the load.
            self._visit_open = (key, self._visit_open[1], time.monotonic(), page)
            return captured
        except BaseException:
            self._visit_open = None
            self._end_page(page)
            raise

    def _last_page(self, key: tuple) -> Page | None:
        """The open visit's page if it was loaded for ``key`` (URL, user agent, load key),
        recently, and the page has not navigated elsewhere since (a script or a meta
        refresh)."""
        if self._visit_open is None:
            return None
        visited, final_url, at, page = self._visit_open
        if visited != key or page.is_closed() or page.url != final_url:
            return None
        return page if time.monotonic() - at <= VISIT_REUSE_SECONDS else None

    def _open_page(
        self, url: str, user_agent: str, credentials: Credentials | None, keep: tuple | None
    ) -> Page:
        """A new page for ``url``, recorded from its first request: in the spare context when
        it was kept for ``keep`` (its HTTP cache cleared), else in a new context."""
        page, blank = self._page_in_spare(keep) or self._page_in_new_context(
            user_agent, credentials, keeps_blank=keep is not None
        )
        context = page.context
        self._open_keep = (keep, blank) if keep is not None else None
        self._popups = _Popups(url, page)
        context.on("page", self._popups.close)
        # A window the page before opened as it closed may be reported only now, after its
        # popup watch ended: it must not live on beside this page, fetching into its record.
        for stray in [other for other in context.pages if other not in (page, blank)]:
            logger.info("closed a page left open by the page before %s", url)
            with contextlib.suppress(Exception):  # it closed itself meanwhile
                stray.close()
        Recorder.attach(context)
        return page

    def _page_in_spare(self, keep: tuple | None) -> tuple[Page, Page] | None:
        """A new page of the spare context and the spare's blank page, the context's HTTP
        cache cleared, if the spare was kept for ``keep``; None otherwise (a spare kept for
        another crawl or user agent is closed)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        kept_for, blank = spare
        if kept_for == keep:
            try:
                page = blank.context.new_page()
                _clear_cache(page)
                return page, blank
            except Exception as error:  # the browser or its context went away
                logger.info("browser context not reused: %s", error)
        _close(blank.context)
        return None

    def _page_in_new_context(
        self, user_agent: str, credentials: Credentials | None, *, keeps_blank: bool
    ) -> tuple[Page, Page | None]:
        """A new page in a new browser context, and the blank page opened before it when the
        context may serve the next page (``keeps_blank``; else None). Raises Playwright's
        Error when the browser does not answer (the context is closed)."""
        context = self._connection.new_context(
            user_agent=user_agent,
            viewport={"width": 1280, "height": 800},
            accept_downloads=False,
            # A service worker's fetches are made where the recorder cannot see them.
            service_workers="block",
            storage_state=credentials.storage_state() if credentials else None,
            extra_http_headers=credentials.headers if credentials else None,
        )
        try:
            context.add_init_script(WATCH_SCRIPT)  # so behaviours know whether to scroll
            context.add_init_script(DIALOG_SCRIPT)  # dialogs answered in the page, at once
            context.on("dialog", _dismiss_dialog)
            # A context that may serve the next page keeps a blank page open: one whose last
            # page closed makes its next page cost as much CPU as a new context.
            blank = context.new_page() if keeps_blank else None
            return context.new_page(), blank
        except BaseException:
            _close(context)
            raise

    def _close_visit(self, *, keep: bool = True) -> None:
        """End the open visit: close its page, and with ``keep`` keep its context for the next
        page of the same crawl (``_end_page``)."""
        if self._visit_open is None:
            return
        page = self._visit_open[-1]
        self._visit_open = None
        self._end_page(page, keep=keep)

    def _end_page(self, page: Page, *, keep: bool = False) -> None:
        """Close ``page`` and report the windows it opened. With ``keep``, its context is kept
        as the spare for the next page of its crawl when it may serve one and its blank page
        alone is left in it; otherwise the context is closed."""
        context = page.context
        keep_for, blank = self._open_keep if keep and self._open_keep else (None, None)
        self._open_keep = None
        popups, self._popups = self._popups, None
        if keep_for is not None:
            try:
                # With the popup watch still attached: a window the page opens as it closes
                # is closed too. The next page's recorder, which replaces this page's
                # (Recorder.attach), is attached only after this, so nothing this page fetches
                # as it closes reaches the next page's record.
                page.close()
            except Exception:  # a crashed or hung page: its context is not reused
                keep_for = None
        if popups is not None:
            with contextlib.suppress(Exception):
                context.remove_listener("page", popups.close)
            popups.report()
        if keep_for is not None and context.pages == [blank]:
            self._spare = (keep_for, blank)
        else:
            _close(context)

    def kill(self) -> None:
        """SIGKILL Chromium's whole process group (a deadline was missed); from then on the
        browser is not ``alive``."""
        self._killed = True
        if self.pid is not None and _running(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)

    def close(self) -> None:
        """Disconnect, stop Chromium (SIGTERM, then SIGKILL), and delete its profile and
        temporary folders."""
        if self._playwright is not None:
            # A hung thread is left behind, and at interpreter exit (atexit) the executor takes
            # no more work (RuntimeError): Chromium is stopped all the same.
            with contextlib.suppress(Exception):
                self._thread.submit(self._disconnect).result(timeout=CLOSE_TIMEOUT)
        self._thread.shutdown(wait=False, cancel_futures=True)
        if self.pid is not None:
            _stop_group(self.pid)
        shutil.rmtree(self.user_data_dir, ignore_errors=True)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _disconnect(self) -> None:
        """Close the browser and stop Playwright's driver (in the browser's thread)."""
        self._close_visit(keep=False)
        if self._spare is not None:
            _close(self._spare[1].context)
            self._spare = None
        if self._context is not None:
            with contextlib.suppress(Exception):
                self._context.close()
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


def new_temp_dir() -> Path:
    """Make an empty folder for one browser's temporary files (its TMPDIR),
    ``<the system's temporary folder>/vellum-chromium-<pid>-<random>``, and delete those left
    by processes that no longer run.

    Chromium keeps there what it would otherwise leave in /tmp when it is killed: the socket
    that keeps two browsers off one profile, and the start of a download, written before the
    context refuses it. A short path: the socket's may not pass 107 bytes.
    """
    parent = Path(tempfile.gettempdir())
    for stale in parent.glob("vellum-chromium-*-*"):
        owner = stale.name.split("-")[2]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"vellum-chromium-{os.getpid()}-"))


def _close(context) -> None:
    """Close a browser context (its cookies, storage and cache go with it)."""
    with contextlib.suppress(Exception):  # a killed or crashed browser cannot close it
        context.close()


@contextlib.contextmanager
def devtools_session(page: Page) -> Iterator:
    """A DevTools protocol session of ``page`` (Playwright's CDPSession: ``send(method,
    params)``), detached when the block ends; for what Playwright's own API does not offer or
    does in more round trips (the cache clear below, the screenshot, SingleFile's isolated
    world)."""
    session = page.context.new_cdp_session(page)
    try:
        yield session
    finally:
        session.detach()


def _clear_cache(page: Page) -> None:
    """Clear the HTTP cache of ``page``'s browser context (Network.clearBrowserCache), so that
    the page, not loaded yet, fetches everything it needs, and its recorder sees every fetch.
    Raises Playwright's Error when the browser does not answer."""
    with devtools_session(page) as session:
        session.send("Network.clearBrowserCache")


def _dismiss_dialog(dialog) -> None:
    """Dismiss an ``alert``, ``confirm``, ``prompt`` or ``beforeunload`` dialog at once: a
    page waiting on one renders nothing more, and nobody is there to answer it."""
    with contextlib.suppress(Exception):  # the page closed meanwhile: nothing left to answer
        dialog.dismiss()


class _Popups:
    """Close every page a visit's browser context opens besides ``page``, the one it loaded
    and captures: a page that opens windows in a loop or on a timer would otherwise fill the
    browser with pages, each fetching and running scripts, until the deadline."""

    def __init__(self, url: str, page: Page) -> None:
        self.url = url
        self.page = page
        self.closed = 0

    def close(self, popup: Page) -> None:
        if popup is self.page:
            return
        self.closed += 1
        with contextlib.suppress(Exception):  # it closed itself, or the context is closing
            popup.close()

    def report(self) -> None:
        if self.closed:
            logger.info("closed %d pages opened by %s", self.closed, self.url)


def _running(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (Chromium is Playwright's driver's child,
    reaped by it, not by this process)."""
    return process_state(pid) not in (None, "Z")


def _stop_group(pid: int) -> None:
    """Terminate the process group led by ``pid``; SIGKILL it if its leader outlives
    CLOSE_TIMEOUT; then SIGKILL whatever it left in the group (zygote, renderers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + CLOSE_TIMEOUT
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


# --- the actor's shared browser ----------------------------------------------------------------

_shared: Browser | None = None


def shared_browser() -> Browser:
    """Return this process's browser, starting it (again) when it is not running, crashed, or
    has rendered CHROMIUM_RESTART_PAGES pages.

    Raises LookupError ("chromium not found") when chromium is not installed, as a missing
    binary does everywhere (core/extractors/html_page.py's ``unavailable`` skips the result), and
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


@on_shutdown
def close_shared_browser() -> None:
    """Stop this process's browser, if it runs (run when the actor stops, and at exit)."""
    global _shared
    browser, _shared = _shared, None
    if browser is not None:
        browser.close()


atexit.register(close_shared_browser)
