"""What the rendering extractors do to a loaded page before they capture it: scroll it to the
bottom, so that what loads on sight loads, and back to the top.

A page that waits to be seen loads nothing until it is scrolled: images with
``loading=lazy``, content inserted by an IntersectionObserver, the second page of an infinite
scroll. ``page_behave`` scrolls about a viewport at a time and, at the bottom, waits briefly
for the page to grow; it stops when the page no longer grows, after the page has grown
SCROLL_PAGE_LIMIT times (an endless page), or when its budget runs out (BEHAVIOUR_SECONDS, and
never more than a quarter of the time left before the extractor's deadline: the capture that
follows, SingleFile's above all, needs the rest). A crawl may set its own seconds and page
limit instead of the settings (``BehaviourOptions``: the crawl's ``behaviour_seconds`` and
``scroll_page_limit``). Lazy images are made eager and each image's chosen candidate
(``srcset``, ``<picture>``) is waited for; then the network is given a short while to go
quiet, and the page is scrolled back to the top for the screenshot. A page on which nothing
watches scrolling (no IntersectionObserver, no scroll or wheel listener: WATCH_SCRIPT counts
them from before the page's own scripts run) loads nothing more when scrolled, so it is not
scrolled at all: only the timers it set to fire within GROWTH_WAIT_SECONDS are waited for (on
a static documentation page that saves 2-4 s a load). Nothing here fails a capture: a page
that scrolls forever is captured as it is when the behaviours stop, and a page that navigates
away mid-scroll is captured as it is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings

# Seconds to pause after each step down, for scroll handlers and observers to run and start
# their fetches.
STEP_SECONDS = 0.1
# Seconds to wait at the bottom for the page to grow (an infinite scroll fetching its next
# page, content a timer adds) before scrolling is done.
GROWTH_WAIT_SECONDS = 1.0
# Milliseconds past a timer's due time for its callback to run and the page to lay out.
TIMER_GRACE_MS = 100
# The network counts as quiet after this many seconds without a request starting or ending...
QUIET_SECONDS = 0.5
# ...and is waited for at most this long (a page that polls or streams never goes quiet).
QUIET_WAIT_SECONDS = 2.0
# Seconds to wait for the images still loading once scrolling is done.
IMAGE_WAIT_SECONDS = 2.0

# One step down: about a viewport (a little less, so that nothing is skipped at the seam).
# Returns [bottom of the viewport, document height] in CSS pixels.
STEP_SCRIPT = """() => {
    const root = document.scrollingElement || document.documentElement;
    window.scrollBy(0, Math.max(1, Math.floor(window.innerHeight * 0.9)));
    return [Math.round(window.scrollY + window.innerHeight), root.scrollHeight];
}"""
HEIGHT_SCRIPT = "() => (document.scrollingElement || document.documentElement).scrollHeight"
GREW_SCRIPT = (
    "height => (document.scrollingElement || document.documentElement).scrollHeight > height"
)
# Lazy images and frames load as if they were in view; returns how many were lazy.
EAGER_SCRIPT = """() => {
    const lazy = document.querySelectorAll('img[loading="lazy"], iframe[loading="lazy"]');
    for (const element of lazy) element.loading = "eager";
    return lazy.length;
}"""
# Wait (at most ``seconds``) for every image whose chosen candidate has not arrived yet;
# returns how many were still loading.
IMAGES_SCRIPT = """seconds => {
    const loading = Array.from(document.images).filter(image => !image.complete);
    const arrived = loading.map(image => image.decode().catch(() => null));
    const late = new Promise(resolve => setTimeout(resolve, seconds * 1000));
    return Promise.race([Promise.all(arrived), late]).then(() => loading.length);
}"""
TOP_SCRIPT = "() => window.scrollTo(0, 0)"
# Installed in every frame of a capture's browser context before the page's own scripts run
# (core/extractors/browser.py): counts what watches scrolling, which is how a page loads more
# on sight beyond ``loading=lazy`` (EAGER_SCRIPT): IntersectionObservers, and ``scroll`` or
# ``wheel`` listeners; and notes when each pending ``setTimeout`` is due, so that content a
# timer adds soon is waited for. The page keeps working as before: the subclass and the
# wrappers only count.
WATCH_SCRIPT = """(() => {
    const seen = {observers: 0, listeners: 0, timers: new Map()};
    Object.defineProperty(window, "__vellumScrollWatch", {value: seen});
    const setTimer = window.setTimeout, clearTimer = window.clearTimeout;
    window.setTimeout = function (...args) {
        const id = setTimer.apply(window, args);
        seen.timers.set(id, performance.now() + (Number(args[1]) || 0));
        return id;
    };
    window.clearTimeout = function (id) {
        seen.timers.delete(id);
        return clearTimer.call(window, id);
    };
    const Observer = window.IntersectionObserver;
    if (Observer) {
        window.IntersectionObserver = class IntersectionObserver extends Observer {
            constructor(...args) { super(...args); seen.observers++; }
        };
    }
    const listen = EventTarget.prototype.addEventListener;
    EventTarget.prototype.addEventListener = function (type, ...rest) {
        if (type === "scroll" || type === "wheel") seen.listeners++;
        return listen.call(this, type, ...rest);
    };
})()"""
# Installed beside WATCH_SCRIPT: ``alert``, ``confirm`` and ``prompt`` answer in the page as a
# dismissed dialog does (undefined, false, null; HTML's "simple dialogs"). Each dialog would
# otherwise stop the page until Playwright's handler (core/extractors/browser.py) answered it,
# a round trip through the driver and the actor's browser thread. A page asking every 50 ms
# took 5.8-6.4 s to capture beside four busy processes (2.1-2.4 s with this script), and 27 and
# 37 s against a 20 s deadline in a busy test run. What opens in a frame the script did not run
# in, and ``beforeunload`` (no script answers it), still go to that handler.
DIALOG_SCRIPT = """(() => {
    const answers = {alert: undefined, confirm: false, prompt: null};
    for (const [name, answer] of Object.entries(answers)) {
        window[name] = function () { return answer; };
    }
})()"""
# Seconds until the last of the page's timers due within ``limit`` seconds (0: none).
TIMERS_SCRIPT = """limit => {
    const seen = window.__vellumScrollWatch, now = performance.now();
    if (!seen) return 0;
    const soon = [...seen.timers.values()].map(due => due - now)
        .filter(wait => wait > 0 && wait <= limit * 1000);
    return soon.length ? Math.max(...soon) / 1000 : 0;
}"""
# Milliseconds a frame may take to say whether it watches scrolling: a frame whose document
# never came (its server never answers, a file: URL Chromium refused) has nothing to run a
# script in, and Playwright would wait for one forever (the page is then scrolled).
FRAME_ANSWER_MS = 500
# True when the frame may load more when scrolled (or when WATCH_SCRIPT did not run in it).
WATCHED_SCRIPT = """() => {
    const seen = window.__vellumScrollWatch;
    return !seen || seen.observers + seen.listeners > 0
        || window.onscroll !== null || document.onscroll !== null;
}"""


@dataclass
class BehaviourReport:
    """What ``page_behave`` did to one page: ``seconds`` it took, how far it ``scrolled``
    (CSS pixels: the bottom of the viewport at its lowest), how many ``steps`` down, how many
    times the page ``grew`` while scrolled, how many ``lazy`` images or frames it made eager,
    and why it ``stopped``: "bottom", "page limit", "budget", "off", "nothing watches
    scrolling" or the error that ended it.
    """

    seconds: float = 0.0
    scrolled: int = 0
    steps: int = 0
    grew: int = 0
    lazy: int = 0
    stopped: str = "off"

    def __str__(self) -> str:
        return (
            f"{self.seconds:.1f} s, scrolled {self.scrolled} px in {self.steps} steps,"
            f" grew {self.grew} times, {self.lazy} lazy, stopped: {self.stopped}"
        )


@dataclass(frozen=True)
class BehaviourOptions:
    """One crawl's say over the behaviours: the ``seconds`` they may take on a page (0: none)
    and the ``page_limit``, how many times an endless page may grow while it is scrolled. None
    leaves each to its setting (BEHAVIOUR_SECONDS, SCROLL_PAGE_LIMIT), read when a page is
    loaded. The crawl's options checks (core/services/crawls.py) bound both."""

    seconds: float | None = None
    page_limit: int | None = None

    def resolved_seconds(self) -> float:
        """The seconds behaviours may take, before the quarter-of-what-is-left rule."""
        return float(settings.BEHAVIOUR_SECONDS if self.seconds is None else self.seconds)

    def resolved_page_limit(self) -> int:
        """The times a page may grow while scrolled before scrolling stops."""
        return int(settings.SCROLL_PAGE_LIMIT if self.page_limit is None else self.page_limit)


FROM_SETTINGS = BehaviourOptions()


def behaviour_options(snapshot: object) -> BehaviourOptions:
    """Return the behaviour options of ``snapshot`` (a Snapshot's ``behaviour_options``: its
    crawl's), or FROM_SETTINGS for an object without them (a benchmark's plain object with
    only a ``url``)."""
    options = getattr(snapshot, "behaviour_options", None)
    return options if isinstance(options, BehaviourOptions) else FROM_SETTINGS


def behaviour_budget(deadline: float, seconds: float | None = None) -> float:
    """Return the seconds behaviours may take on a page whose capture must end by
    ``deadline`` (time.monotonic()): ``seconds`` (None: BEHAVIOUR_SECONDS), at most a quarter
    of what is left."""
    left = deadline - time.monotonic()
    wanted = BehaviourOptions(seconds=seconds).resolved_seconds()
    return max(0.0, min(wanted, left / 4))


def page_behave(
    page, *, deadline: float, options: BehaviourOptions = FROM_SETTINGS
) -> BehaviourReport:
    """Scroll the loaded Playwright ``page`` to its bottom and back (module docstring), in the
    browser's thread, within behaviour_budget(``deadline``, ``options.seconds``) and up to
    ``options``' page limit; return what was done.

    Raises nothing of the page's making: a Playwright error (the page navigated away, closed,
    or crashed) ends the behaviours and is named in ``stopped``; the capture that follows
    meets whatever is still wrong.
    """
    # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
    from playwright.sync_api import Error as PlaywrightError

    report = BehaviourReport()
    budget = behaviour_budget(deadline, options.seconds)
    if budget <= 0:
        return report
    started = time.monotonic()
    end = started + budget
    network = _NetworkWatch(page)
    try:
        report.lazy = page.evaluate(EAGER_SCRIPT)
        if _watches_scrolling(page):
            report.stopped = _scroll_down(page, report, end, options.resolved_page_limit())
            report.lazy += page.evaluate(EAGER_SCRIPT)  # what the scrolling added
        else:  # nothing would load on sight: scrolling would only take time
            report.stopped = "nothing watches scrolling"
            _wait_for_timers(page, report, end)
        page.evaluate(IMAGES_SCRIPT, min(IMAGE_WAIT_SECONDS, _left(end)))
        network.wait_quiet(min(QUIET_WAIT_SECONDS, _left(end)))
        page.evaluate(TOP_SCRIPT)
    except PlaywrightError as error:
        message = error.message.strip().splitlines()
        report.stopped = f"error: {message[0] if message else type(error).__name__}"
    finally:
        network.stop()
    report.seconds = time.monotonic() - started
    return report


def _scroll_down(page, report: BehaviourReport, end: float, page_limit: int) -> str:
    """Step down until the bottom stays the bottom, the page has grown ``page_limit`` times,
    or ``end``; return why scrolling stopped."""
    # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    height = page.evaluate(HEIGHT_SCRIPT)
    while True:
        if _left(end) <= 0:
            return "budget"
        bottom, now_height = page.evaluate(STEP_SCRIPT)
        report.steps += 1
        report.scrolled = max(report.scrolled, bottom)
        page.wait_for_timeout(min(STEP_SECONDS, _left(end)) * 1000)
        if bottom >= now_height - 1:  # at the bottom: does it grow if we wait a little?
            wait = min(GROWTH_WAIT_SECONDS, _left(end))
            if wait < 0.001:  # Playwright takes a timeout of 0 ms for none at all
                return "budget"
            try:
                page.wait_for_function(
                    GREW_SCRIPT, arg=now_height, polling=100, timeout=wait * 1000
                )
            except PlaywrightTimeout:
                return "bottom" if wait >= GROWTH_WAIT_SECONDS else "budget"
        new_height = page.evaluate(HEIGHT_SCRIPT)
        if new_height > height:
            report.grew += 1
            height = new_height
            if report.grew >= page_limit:
                return "page limit"


def _wait_for_timers(page, report: BehaviourReport, end: float) -> None:
    """Wait for the page's timers due within GROWTH_WAIT_SECONDS (or until ``end``), for the
    content they add; count it in ``report.grew`` if the page grew."""
    wait = min(page.evaluate(TIMERS_SCRIPT, GROWTH_WAIT_SECONDS), _left(end))
    if wait <= 0:
        return
    height = page.evaluate(HEIGHT_SCRIPT)
    page.wait_for_timeout(wait * 1000 + TIMER_GRACE_MS)
    if page.evaluate(HEIGHT_SCRIPT) > height:
        report.grew += 1


def _watches_scrolling(page) -> bool:
    """True when a frame of ``page`` watches scrolling (WATCHED_SCRIPT); a frame that cannot
    be asked (it is going away) or does not answer within FRAME_ANSWER_MS (it has no
    document to run a script in, or the machine is slow) counts as watching."""
    # Imported here: playwright takes ~0.28 s to import, paid only by processes that render.
    from playwright.sync_api import Error as PlaywrightError

    for frame in page.frames:
        try:
            # wait_for_function, unlike evaluate, has a timeout; the array is always truthy.
            answer = frame.wait_for_function(
                f"() => [({WATCHED_SCRIPT})()]", timeout=FRAME_ANSWER_MS
            )
            if answer.json_value()[0]:
                return True
        except PlaywrightError:  # its TimeoutError included
            return True
    return False


def _left(end: float) -> float:
    return max(0.0, end - time.monotonic())


class _NetworkWatch:
    """Count the page's requests in flight, to wait for its network to go quiet."""

    def __init__(self, page) -> None:
        self.page = page
        self.in_flight = 0
        # The page's network was quiet before (rendering.py waited for it): what counts is what
        # the behaviours set off.
        self.last_change = time.monotonic() - QUIET_SECONDS
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def _started(self, _request) -> None:
        self.in_flight += 1
        self.last_change = time.monotonic()

    def _ended(self, _request) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self.last_change = time.monotonic()

    def wait_quiet(self, seconds: float) -> None:
        """Wait until no request started or ended for QUIET_SECONDS with none in flight, for
        at most ``seconds`` (Playwright delivers the request events while it waits)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.in_flight == 0 and time.monotonic() - self.last_change >= QUIET_SECONDS:
                return
            self.page.wait_for_timeout(50)

    def stop(self) -> None:
        for event, handler in (
            ("request", self._started),
            ("requestfinished", self._ended),
            ("requestfailed", self._ended),
        ):
            self.page.remove_listener(event, handler)
