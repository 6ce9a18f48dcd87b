"""Behaviours before capture (core/extractors/behaviours.py): what loads only when a page is
scrolled is in the capture, dialogs cannot block it, and an endless page ends in time.

Every page here has a marker text that only appears when its difficulty was handled. The
pages are served on 127.0.0.1 by a site of this module's own (its request log is ours alone)
and rendered by the real Debian Chromium.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from model_bakery import baker
from PIL import Image

from core.extractors import browser as browser_module
from core.extractors.base import Extractor, ExtractorOutput
from core.extractors.behaviours import BehaviourReport, behaviour_budget
from core.extractors.browser import close_shared_browser, shared_browser
from core.extractors.dom import DomExtractor
from core.extractors.errors import Outcome
from core.extractors.screenshot import ScreenshotExtractor
from core.models import Snapshot
from core.tests.site import LiveSite
from crawls.models import Crawl

pytestmark = pytest.mark.browser
dismiss_dialog = browser_module._dismiss_dialog

SPACER = '<div style="height: {px}px; background: #eee">spacer</div>'


def spelled(marker: str) -> str:
    """Return a JavaScript expression for ``marker`` that does not spell it out, so that the
    marker is in the DOM only when a script wrote it."""
    half = len(marker) // 2
    return f"'{marker[:half]}' + '{marker[half:]}'"


# An image far below the fold (Chromium loads lazy images within a few thousand pixels of the
# viewport), and a <picture> whose chosen source is lazy too: each writes a marker on load.
LAZY_HTML = f"""<!doctype html><title>Lazy</title>
<h1>Lazy images</h1>
{SPACER.format(px=6000)}
<img loading="lazy" src="/static/pixel.png?lazy" width="10" height="10"
  onload="document.body.insertAdjacentHTML('beforeend', {spelled("LAZY-IMAGE-LOADED")})">
<picture>
  <source srcset="/static/icon.png?picture-source" media="(min-width: 100px)">
  <img loading="lazy" src="/static/pixel.png?picture-fallback" width="10" height="10"
    onload="document.body.insertAdjacentHTML('beforeend', {spelled("PICTURE-LOADED")})">
</picture>
"""
OBSERVER_HTML = f"""<!doctype html><title>Observer</title>
{SPACER.format(px=4000)}
<div id="sentinel">sentinel</div>
<script>
new IntersectionObserver(entries => {{
  if (entries.some(entry => entry.isIntersecting) && !document.getElementById("seen")) {{
    document.body.insertAdjacentHTML("beforeend", '<p id="seen">' + {spelled("SENTINEL-SEEN")});
  }}
}}).observe(document.getElementById("sentinel"));
</script>
"""
# 2000 px tall; its second page, fetched when the reader nears the bottom, adds 2000 px more.
INFINITE_HTML = f"""<!doctype html><title>Infinite</title>
<style>body {{ margin: 0 }}</style>
{SPACER.format(px=2000)}
<script>
let fetched = false;
addEventListener("scroll", () => {{
  if (fetched || scrollY + innerHeight < document.documentElement.scrollHeight - 200) return;
  fetched = true;
  fetch("/infinite-2.html").then(response => response.text())
    .then(html => document.body.insertAdjacentHTML("beforeend", html));
}});
</script>
"""
INFINITE_2_HTML = SPACER.format(px=2000) + "<p>SECOND-PAGE-MARKER</p>"
DELAYED_HTML = f"""<!doctype html><title>Delayed</title><p>Wait for it.</p>
<script>
setTimeout(() => document.body.insertAdjacentHTML(
  "beforeend", '<div style="height: 1500px">' + {spelled("DELAYED-MARKER")}), 1000);
</script>
"""
DIALOGS_HTML = f"""<!doctype html><title>Dialogs</title>
<script>
addEventListener("beforeunload", event => {{ event.preventDefault(); event.returnValue = ""; }});
alert("hello");
const confirmed = confirm("Sure?");
const name = prompt("Name?", "someone");
addEventListener("DOMContentLoaded", () => document.body.insertAdjacentHTML(
  "beforeend", confirmed || name !== null ? "ANSWERED" : {spelled("DIALOGS-DISMISSED")}));
</script>
<p>A page that asks.</p>
"""
# Grows by a screen whenever the reader nears its bottom, forever.
FOREVER_HTML = f"""<!doctype html><title>Forever</title>
{SPACER.format(px=1000)}
<script>
addEventListener("scroll", () => {{
  if (scrollY + innerHeight < document.documentElement.scrollHeight - 200) return;
  document.body.insertAdjacentHTML(
    "beforeend", '<div class=' + '"chunk" style="height: 1000px">more</div>');
}});
</script>
"""
# Tall, and nothing on it reacts to scrolling: no observer, no scroll listener, no timer.
STATIC_HTML = f"""<!doctype html><title>Static</title><p>STATIC-TOP</p>{SPACER.format(px=9000)}"""
# The same, but an ``onscroll`` property (no addEventListener) watches the scrolling.
ONSCROLL_HTML = f"""<!doctype html><title>Onscroll</title>{SPACER.format(px=9000)}
<script>window.onscroll = () => {{ document.title = "scrolled"; }};</script>
"""

PAGES = {
    "lazy.html": LAZY_HTML,
    "observer.html": OBSERVER_HTML,
    "infinite.html": INFINITE_HTML,
    "infinite-2.html": INFINITE_2_HTML,
    "delayed.html": DELAYED_HTML,
    "static.html": STATIC_HTML,
    "onscroll.html": ONSCROLL_HTML,
    "dialogs.html": DIALOGS_HTML,
    "forever.html": FOREVER_HTML,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    """The test site plus this module's pages, served by a server of its own."""
    site = LiveSite(tmp_path_factory.mktemp("behaviours-site")).start()
    for name, html in PAGES.items():
        (site.root / name).write_text(html, encoding="utf-8")
    yield site
    site.stop()


@pytest.fixture(autouse=True)
def _fresh(site: LiveSite, settings) -> Iterator[None]:
    """Each test starts without a browser, with an empty request log and the defaults."""
    settings.BEHAVIOUR_SECONDS = 10
    settings.SCROLL_PAGE_LIMIT = 10
    close_shared_browser()
    site.requests.clear()
    yield
    close_shared_browser()


def run(extractor: Extractor, url: str, out_dir: Path) -> ExtractorOutput:
    out_dir.mkdir(parents=True, exist_ok=True)
    return extractor.run(SimpleNamespace(url=url), out_dir)


def dom_of(site: LiveSite, page: str, out_dir: Path) -> str:
    output = run(DomExtractor(), site.url(page), out_dir)
    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    return (out_dir / output.output).read_text(encoding="utf-8")


def requested(site: LiveSite) -> list[str]:
    return [path for path, _headers in site.requests]


def screenshot_height(site: LiveSite, page: str, out_dir: Path) -> int:
    output = run(ScreenshotExtractor(), site.url(page), out_dir)
    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    with Image.open(out_dir / output.output) as image:
        return image.height


def test_lazy_images_below_the_fold_load(site: LiveSite, tmp_path: Path) -> None:
    dom = dom_of(site, "/lazy.html", tmp_path)

    assert "LAZY-IMAGE-LOADED" in dom
    assert "/static/pixel.png?lazy" in requested(site)
    # The <picture>'s chosen candidate (its <source>, 1280 px wide) is what loaded.
    assert "PICTURE-LOADED" in dom
    assert "/static/icon.png?picture-source" in requested(site)
    assert "/static/pixel.png?picture-fallback" not in requested(site)


def test_without_behaviours_lazy_images_stay_unloaded(
    site: LiveSite, settings, tmp_path: Path
) -> None:
    settings.BEHAVIOUR_SECONDS = 0

    dom = dom_of(site, "/lazy.html", tmp_path)

    assert "LAZY-IMAGE-LOADED" not in dom
    assert "/static/pixel.png?lazy" not in requested(site)


def test_an_intersection_observer_sees_its_sentinel(site: LiveSite, tmp_path: Path) -> None:
    assert "SENTINEL-SEEN" in dom_of(site, "/observer.html", tmp_path)


def test_an_infinite_scroll_brings_its_second_page(site: LiveSite, tmp_path: Path) -> None:
    dom = dom_of(site, "/infinite.html", tmp_path)
    height = screenshot_height(site, "/infinite.html", tmp_path)  # the same visit

    assert "SECOND-PAGE-MARKER" in dom
    assert requested(site).count("/infinite-2.html") == 1
    assert height >= 4000  # both pages: the screenshot grew with the page (2000 px before)


def test_content_added_after_a_second_is_captured(site: LiveSite, tmp_path: Path) -> None:
    dom = dom_of(site, "/delayed.html", tmp_path)
    height = screenshot_height(site, "/delayed.html", tmp_path)

    assert "DELAYED-MARKER" in dom
    assert height >= 1500


def behaviour_line(caplog, page: str) -> str:
    (line,) = [r.getMessage() for r in caplog.records if "behaviours on" in r.getMessage()
               and r.getMessage().split(": ", 2)[1].endswith(page)]  # fmt: skip
    return line


def test_a_page_that_nothing_watches_scroll_on_is_not_scrolled(
    site: LiveSite, tmp_path: Path, caplog
) -> None:
    caplog.set_level("INFO", logger="core.extractors.rendering")

    dom = dom_of(site, "/static.html", tmp_path)

    assert "STATIC-TOP" in dom
    line = behaviour_line(caplog, "/static.html")
    assert "scrolled 0 px in 0 steps" in line
    assert line.endswith("stopped: nothing watches scrolling")


@pytest.mark.parametrize("page", ["/onscroll.html", "/infinite.html", "/observer.html"])
def test_a_page_that_watches_scrolling_is_scrolled_to_its_bottom(
    site: LiveSite, tmp_path: Path, caplog, page: str
) -> None:
    caplog.set_level("INFO", logger="core.extractors.rendering")

    dom_of(site, page, tmp_path)

    line = behaviour_line(caplog, page)
    assert "in 0 steps" not in line
    assert "nothing watches scrolling" not in line


def test_dialogs_are_answered_as_dismissed_in_the_page_and_do_not_block(
    site: LiveSite, monkeypatch, tmp_path: Path
) -> None:
    seen: list[str] = []

    def dismiss(dialog) -> None:
        seen.append(dialog.type)
        dismiss_dialog(dialog)

    monkeypatch.setattr(browser_module, "_dismiss_dialog", dismiss)
    started = time.monotonic()
    dom = dom_of(site, "/dialogs.html", tmp_path)

    assert "DIALOGS-DISMISSED" in dom  # confirm said false, prompt null
    assert seen == []  # DIALOG_SCRIPT answered each: none reached the browser's handler
    assert time.monotonic() - started < 20  # far from the 60 s timeout a blocked page meets


def test_a_dialog_no_script_answers_is_dismissed_by_the_browsers_handler(
    site: LiveSite, monkeypatch
) -> None:
    # beforeunload: the page's listener asks before it is left, and Chromium shows the dialog
    # only after a gesture (the click). Dismissed, it keeps the page open.
    seen: list[str] = []

    def dismiss(dialog) -> None:
        seen.append(dialog.type)
        dismiss_dialog(dialog)

    def leave(page) -> bool:
        page.click("p")
        page.close(run_before_unload=True)
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            page.wait_for_timeout(50)  # the handler runs as Playwright's calls wait
        return page.is_closed()

    monkeypatch.setattr(browser_module, "_dismiss_dialog", dismiss)
    url = site.url("/dialogs.html")
    closed = shared_browser().visit(
        url, load=lambda page: page.goto(url) and None, capture=leave, user_agent="test",
        timeout=20,
    )  # fmt: skip

    assert seen == ["beforeunload"]
    assert closed is False


def test_an_endless_page_ends_within_the_budget(
    site: LiveSite, settings, tmp_path: Path, caplog
) -> None:
    settings.BEHAVIOUR_SECONDS = 3
    settings.SCROLL_PAGE_LIMIT = 1000
    caplog.set_level("INFO", logger="core.extractors.rendering")

    dom = dom_of(site, "/forever.html", tmp_path)
    line = behaviour_line(caplog, "/forever.html")
    height = screenshot_height(site, "/forever.html", tmp_path)

    # The behaviours' own seconds, not the run's: starting Chromium and loading the page take
    # what they take on a busy machine (9.3 s beside six busy processes), the budget does not.
    # "...: 3.0 s, scrolled 12736 px in 24 steps, grew 12 times, 0 lazy, stopped: budget"
    found = re.search(r": ([\d.]+) s, .* grew (\d+) times, .* stopped: (.+)$", line)
    seconds, grew, stopped = float(found[1]), int(found[2]), found[3]
    assert stopped == "budget"
    assert 3 - 0.1 <= seconds < 3 + 2  # the budget (as logged), and the calls under way at its end
    # It kept scrolling as the page grew (a chunk every two steps; 12 in 3 s on an idle
    # machine, 3 with a step taking 0.45 s as on a busy one).
    assert grew >= 2
    assert dom.count('class="chunk"') >= grew
    assert height >= 1000 + 2 * 1000


def test_an_endless_page_ends_at_the_page_limit(site: LiveSite, settings, tmp_path: Path) -> None:
    settings.SCROLL_PAGE_LIMIT = 3

    dom = dom_of(site, "/forever.html", tmp_path)

    assert 3 <= dom.count('class="chunk"') <= 4


def test_behaviours_take_at_most_a_quarter_of_what_is_left(settings) -> None:
    settings.BEHAVIOUR_SECONDS = 10

    assert behaviour_budget(time.monotonic() + 60) == pytest.approx(10, abs=0.1)
    assert behaviour_budget(time.monotonic() + 8) == pytest.approx(2, abs=0.1)
    assert behaviour_budget(time.monotonic() - 1) == 0
    settings.BEHAVIOUR_SECONDS = 0
    assert behaviour_budget(time.monotonic() + 60) == 0


def test_the_report_reads_as_a_log_line() -> None:
    report = BehaviourReport(seconds=1.25, scrolled=4000, steps=6, grew=1, lazy=2, stopped="bottom")

    assert str(report) == (
        "1.2 s, scrolled 4000 px in 6 steps, grew 1 times, 2 lazy, stopped: bottom"
    )


# --- a crawl's own options (crawls/tests/test_behaviour_options.py: how they reach the crawl) ---


def snapshot_in_crawl(site: LiveSite, page: str, **options) -> Snapshot:
    """A snapshot of ``page`` in a crawl with ``options`` (Crawl fields), read as the result
    actor's claim reads it: its crawl joined."""
    crawl = baker.make(Crawl, seeds=site.url(page), **options)
    made = baker.make(Snapshot, crawl=crawl, url=site.url(page))
    return Snapshot.objects.select_related("crawl").get(pk=made.pk)


def crawl_dom(snapshot: Snapshot, out_dir: Path) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    output = DomExtractor().run(snapshot, out_dir)
    assert (output.outcome, output.error) == (Outcome.SUCCEEDED, "")
    return (out_dir / output.output).read_text(encoding="utf-8")


@pytest.mark.django_db
def test_a_crawl_with_behaviour_seconds_0_leaves_the_lazy_content_out(
    site: LiveSite, tmp_path: Path
) -> None:
    off = snapshot_in_crawl(site, "/lazy.html?off", behaviour_seconds=0)
    default = snapshot_in_crawl(site, "/lazy.html?default")  # BEHAVIOUR_SECONDS is 10

    dom_off = crawl_dom(off, tmp_path / "off")
    dom_default = crawl_dom(default, tmp_path / "default")

    assert "LAZY-IMAGE-LOADED" not in dom_off
    assert "LAZY-IMAGE-LOADED" in dom_default
    assert requested(site).count("/static/pixel.png?lazy") == 1  # for the default crawl alone


@pytest.mark.django_db
def test_a_crawl_with_a_larger_scroll_page_limit_gets_more_of_an_infinite_scroll(
    site: LiveSite, tmp_path: Path
) -> None:
    small = snapshot_in_crawl(site, "/forever.html?small", scroll_page_limit=2)
    large = snapshot_in_crawl(site, "/forever.html?large", scroll_page_limit=6)

    small_chunks = crawl_dom(small, tmp_path / "small").count('class="chunk"')
    large_chunks = crawl_dom(large, tmp_path / "large").count('class="chunk"')

    assert 2 <= small_chunks <= 3  # the setting (SCROLL_PAGE_LIMIT 10) would give 10
    assert 6 <= large_chunks <= 7


@pytest.mark.django_db
def test_each_snapshot_loads_its_own_page_with_its_crawls_behaviours(
    site: LiveSite, tmp_path: Path
) -> None:
    """Crawls of one URL, one after the other: each snapshot's page is loaded for it, with its
    crawl's behaviour options; none takes the page another snapshot loaded moments ago."""
    off = snapshot_in_crawl(site, "/lazy.html", behaviour_seconds=0)
    default = snapshot_in_crawl(site, "/lazy.html")
    again = snapshot_in_crawl(site, "/lazy.html")

    dom_off = crawl_dom(off, tmp_path / "off")
    dom_default = crawl_dom(default, tmp_path / "default")
    crawl_dom(again, tmp_path / "again")

    assert "LAZY-IMAGE-LOADED" not in dom_off
    assert "LAZY-IMAGE-LOADED" in dom_default
    assert requested(site).count("/lazy.html") == 3  # the third did not take the second's page
