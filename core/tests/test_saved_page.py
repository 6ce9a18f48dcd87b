"""The extractors that read a page's HTML read it from wget's WARC when wget saved it (issue 19,
part 3): one fetch of the page, not one per extractor. Real wget against the test site."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.extractors.errors import Outcome
from core.extractors.favicon import FaviconExtractor
from core.extractors.html_page import WGET_WARCS, saved_page
from core.extractors.htmltotext import HtmlToTextExtractor
from core.extractors.media import NO_MEDIA, MediaExtractor
from core.extractors.outlinks import OutlinksExtractor
from core.extractors.registry import get_extractor
from core.extractors.title import TitleExtractor
from core.extractors.wget import WgetExtractor
from core.tests.site import LiveSite
from crawls.profiles import plan_steps

WGET_WARC = WGET_WARCS[0]  # as wget writes it, before finalizing packs it


def snapshot_of(url: str, folder: Path) -> SimpleNamespace:
    return SimpleNamespace(url=url, output_dir=folder)


def archived_by_wget(site: LiveSite, path: str, folder: Path) -> SimpleNamespace:
    """Run the real wget extractor on ``path`` into ``folder/wget``, as a result actor does."""
    snapshot = snapshot_of(site.url(path), folder)
    (folder / "wget").mkdir(parents=True)
    output = WgetExtractor().run(snapshot, folder / "wget")
    assert output.outcome is Outcome.SUCCEEDED, output.error
    assert (folder / WGET_WARC).is_file()
    return snapshot


def page_requests(site: LiveSite, path: str) -> int:
    return sum(1 for requested, _headers in site.requests if requested == path)


def run(extractor, snapshot, out_dir: Path):
    out_dir.mkdir(parents=True, exist_ok=True)
    return extractor.run(snapshot, out_dir)


def test_the_page_extractors_read_wgets_page_without_fetching_it(
    live_site: LiveSite, tmp_path: Path
) -> None:
    snapshot = archived_by_wget(live_site, "/", tmp_path / "snapshot")
    before = page_requests(live_site, "/")
    icon_before = page_requests(live_site, "/static/icon.png")

    title = run(TitleExtractor(), snapshot, tmp_path / "title")
    text = run(HtmlToTextExtractor(), snapshot, tmp_path / "htmltotext")
    links = run(OutlinksExtractor(), snapshot, tmp_path / "outlinks")
    icon = run(FaviconExtractor(), snapshot, tmp_path / "favicon")
    media = run(MediaExtractor(), snapshot, tmp_path / "media")

    assert page_requests(live_site, "/") == before  # nobody fetched the page again
    assert (title.outcome, title.output) == (Outcome.SUCCEEDED, "Vellum Test Home")
    assert title.cmd == ["warcio", WGET_WARC]
    assert "archived by every extractor" in (tmp_path / "htmltotext" / text.output).read_text()
    outlinks = json.loads((tmp_path / "outlinks" / links.output).read_text())
    assert live_site.url("/page3.html") in json.dumps(outlinks)
    # The declared icon is a page requisite: wget saved it too.
    assert (icon.outcome, icon.output, icon.cmd) == (Outcome.SUCCEEDED, "favicon.png", title.cmd)
    assert page_requests(live_site, "/static/icon.png") == icon_before
    assert (media.outcome, media.error) == (Outcome.SKIPPED, NO_MEDIA)


def test_an_icon_wget_did_not_save_is_fetched(live_site: LiveSite, tmp_path: Path) -> None:
    snapshot = archived_by_wget(live_site, "/page2.html", tmp_path / "snapshot")  # declares none
    before = page_requests(live_site, "/favicon.ico")

    icon = run(FaviconExtractor(), snapshot, tmp_path / "favicon")

    assert (icon.outcome, icon.output) == (Outcome.SUCCEEDED, "favicon.ico")
    assert icon.cmd[0].endswith("curl")
    assert page_requests(live_site, "/favicon.ico") == before + 1


def test_a_redirected_page_is_read_at_the_end_of_its_redirects(
    live_site: LiveSite, tmp_path: Path
) -> None:
    snapshot = archived_by_wget(live_site, "/redirect", tmp_path / "snapshot")

    result, page = saved_page(snapshot)

    assert result.final_url == live_site.url("/page2.html")
    assert "<title>Page Two</title>" in page.html


def test_without_wgets_warc_the_page_is_fetched(live_site: LiveSite, tmp_path: Path) -> None:
    snapshot = snapshot_of(live_site.url("/page2.html"), tmp_path / "snapshot")
    before = page_requests(live_site, "/page2.html")

    output = run(TitleExtractor(), snapshot, tmp_path / "title")

    assert saved_page(snapshot) is None
    assert (output.outcome, output.output) == (Outcome.SUCCEEDED, "Page Two")
    assert output.cmd[0].endswith("curl")
    assert page_requests(live_site, "/page2.html") == before + 1


def test_a_plain_object_with_only_a_url_is_fetched(live_site: LiveSite) -> None:
    assert saved_page(SimpleNamespace(url=live_site.url("/"))) is None


def test_a_warc_without_the_page_is_not_used(live_site: LiveSite, tmp_path: Path) -> None:
    folder = tmp_path / "snapshot"
    archived_by_wget(live_site, "/page2.html", folder)

    assert saved_page(snapshot_of(live_site.url("/page3.html"), folder)) is None


@pytest.mark.parametrize("name", ["title", "favicon", "htmltotext", "outlinks", "media"])
def test_the_page_extractors_wait_for_wget_when_the_profile_runs_it(name: str) -> None:
    assert get_extractor(name).depends_on == ("wget",)
    (_wget, step) = plan_steps(["wget", name])
    assert step.depends_on == ("wget",)
    (alone,) = plan_steps([name])
    assert alone.depends_on == ()  # without wget in the profile, they fetch the page at once
