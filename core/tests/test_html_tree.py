"""Parsing a page (core/extractors/html_tree.py) and what the page extractors read from its tree.

No network: each test builds a ``Page`` from text, as ``get_page`` does from a response. The
pages here are the edges where libxml2 building the tree itself would lose part of a page
(nesting, a huge text, what follows </html>) or where lxml and the HTML standard differ from
what a naive reading gives (an SVG's <title>, ``rel`` tokens, a page without elements).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.extractors.errors import Outcome
from core.extractors.favicon import declared_icons, link_types
from core.extractors.fetch import FetchResult
from core.extractors.html_page import Page, decode_html
from core.extractors.html_tree import MAX_TREE_DEPTH, REFUSED_TAG, parse_html
from core.extractors.media import has_media_markers
from core.extractors.outlinks import page_links
from core.extractors.title import TitleExtractor

URL = "http://a.example/dir/page.html"
# More levels than libxml2 builds a tree of: the page must be read again, whole.
TOO_DEEP = MAX_TREE_DEPTH + 500


def page(html: str) -> Page:
    return Page(url=URL, html=html)


def title_of(html: str, out_dir: Path) -> tuple[Outcome, str]:
    """Run the title extractor on ``html``; return its outcome and its title or error."""
    fetched = FetchResult(
        outcome=Outcome.SUCCEEDED, error="", cmd=["curl"], cmd_version="", exit_code=0
    )
    output = TitleExtractor().extract(page(html), fetched, out_dir)
    return output.outcome, output.output or output.error


# --- the tree --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "html",
    ["", " \n\t\r\n ", "<!-- only a comment, <title>not one</title> -->", "<!DOCTYPE html>"],
    ids=["empty", "whitespace", "comment", "doctype"],
)
def test_a_page_without_elements_is_an_empty_html_element(html: str, tmp_path: Path) -> None:
    tree = page(html).tree

    assert (tree.tag, len(tree)) == ("html", 0)
    assert title_of(html, tmp_path) == (Outcome.SKIPPED, "page has no <title>")
    assert page_links(page(html)) == []
    assert declared_icons(page(html)) == []
    assert not has_media_markers(page(html))


def test_an_xml_declaration_in_the_text_is_ignored(tmp_path: Path) -> None:
    # lxml's document_fromstring refuses a str with an encoding declaration.
    html = '<?xml version="1.0" encoding="iso-8859-1"?>\n<html><head><title>X</title></head>'

    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, "X")


def test_what_follows_the_end_of_html_is_in_the_tree(tmp_path: Path) -> None:
    # libxml2 puts it in a second <html> beside the first; BeautifulSoup saw it, and so do we.
    html = (
        '<html><body><a href="/before">b</a></body></html>\n<!-- cached -->'
        '<a href="/after">a</a><iframe src="/player"></iframe><title>Late</title></html><p>end'
    )

    tree = page(html).tree

    assert [element.tag for element in tree.iterchildren()] == ["body", "html", "html"]
    assert page_links(page(html)) == ["http://a.example/before", "http://a.example/after"]
    assert has_media_markers(page(html))
    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, "Late")


def test_a_page_nested_deeper_than_libxml2_builds_is_read_whole(tmp_path: Path) -> None:
    html = (
        "<span>" * TOO_DEEP
        + '<a href="/deep">deep</a>'
        + "</span>" * TOO_DEEP
        + '<title>After</title><link rel="icon" href="/i.png"><a href="/after">after</a>'
    )

    assert page_links(page(html)) == ["http://a.example/deep", "http://a.example/after"]
    assert declared_icons(page(html)) == ["http://a.example/i.png"]
    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, "After")


def test_a_deep_page_keeps_what_lxml_refuses_and_libxml2_allows(tmp_path: Path) -> None:
    # A tag name with "<", an attribute named "{x}", "--" in a comment, a control character:
    # HTML's tokenizer takes them all, lxml's TreeBuilder none.
    html = (
        "<div>" * TOO_DEEP
        + '<b<i>x</b<i><!-- a -- b --><a {x}="1" href="/deep">\x01</a>'
        + '<title>A\x01B</title><svg><title>not this</title></svg><a href="/after">'
    )

    tree = page(html).tree

    assert [element.get("href") for element in tree.iter("a")] == ["/deep", "/after"]
    assert next(tree.iter(REFUSED_TAG)).text == "x"
    assert page_links(page(html)) == ["http://a.example/deep", "http://a.example/after"]
    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, "A\ufffdB")


def test_a_text_over_10_mb_does_not_stop_the_parse() -> None:
    html = "<script>" + "x" * 11_000_000 + '</script><a href="/after">after</a>'

    assert page_links(page(html)) == ["http://a.example/after"]


def test_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(UnicodeEncodeError):
        parse_html("<p>\ud800</p>")


def test_base_url_is_the_first_base_with_an_href() -> None:
    html = '<base target="_blank"><base href=" /docs/ "><base href="/other/"><a href="x">x</a>'

    assert page(html).base_url == "http://a.example/docs/"
    assert page_links(page(html)) == ["http://a.example/docs/x"]


def test_an_invalid_base_leaves_the_page_url() -> None:
    assert page('<base href="http://[::1"><a href="x">x</a>').base_url == URL


# --- title -----------------------------------------------------------------------------------


def test_the_title_of_an_svg_image_is_passed_over(tmp_path: Path) -> None:
    html = "<body><svg><g><title>A circle</title></g></svg><title> The \n page </title></body>"

    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, "The page")


def test_a_page_whose_only_title_is_an_svg_image_s_has_none(tmp_path: Path) -> None:
    html = "<body><svg><title>A circle</title></svg></body>"

    assert title_of(html, tmp_path) == (Outcome.SKIPPED, "page has no <title>")


def test_a_title_in_a_template_is_not_the_page_s(tmp_path: Path) -> None:
    html = "<template><title>Later, perhaps</title></template><title>Now</title>"

    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, "Now")


def test_a_title_s_entities_are_decoded_and_markup_in_it_is_text(tmp_path: Path) -> None:
    html = "<title>Fish &amp; chips&nbsp;<b>today</b></title>"

    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, "Fish & chips <b>today</b>")


def test_an_empty_title_is_skipped(tmp_path: Path) -> None:
    assert title_of("<title> \n </title>", tmp_path) == (
        Outcome.SKIPPED,
        "page has an empty <title>",
    )


@pytest.mark.parametrize(
    ("encoding", "declared_by"),
    [("shift_jis", "meta"), ("windows-1251", "http"), ("utf-16", "bom")],
)
def test_the_title_of_a_page_not_in_utf8(encoding: str, declared_by: str, tmp_path: Path) -> None:
    title = {"shift_jis": "日本語のページ", "windows-1251": "Страница"}.get(encoding, "Ünïcödé")
    meta = f'<meta charset="{encoding}">' if declared_by == "meta" else ""
    data = f"<html><head>{meta}<title>{title}</title></head></html>".encode(encoding)
    html = decode_html(data, encoding if declared_by == "http" else None)

    assert title_of(html, tmp_path) == (Outcome.SUCCEEDED, title)


# --- favicon ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "types"),
    [
        ("icon", ["icon"]),
        (" Shortcut\tICON\n", ["shortcut", "icon"]),
        ("APPLE-touch-icon  preload", ["apple-touch-icon", "preload"]),
        ("", []),
        # Only ASCII whitespace separates tokens (HTML §2.3.8): a no-break space does not.
        ("icon\u00a0x", ["icon\u00a0x"]),
    ],
)
def test_link_types(rel: str, types: list[str]) -> None:
    assert link_types(rel) == types


def test_declared_icons_read_rel_tokens_in_any_case() -> None:
    html = """
        <link rel="Apple-Touch-Icon" href="/touch.png">
        <link rel="stylesheet" href="/style.css">
        <link rel="SHORTCUT  Icon" href="favicon.ico">
        <link rel="icon" href="data:image/png;base64,iVBORw0KGgo=">
        <link rel="icon">
        <link href="/no-rel.png">
    """

    assert declared_icons(page(html)) == [
        "http://a.example/dir/favicon.ico",
        "http://a.example/touch.png",
    ]


# --- outlinks and media ----------------------------------------------------------------------


def test_links_are_read_in_document_order_from_a_and_area() -> None:
    html = """<a href="/1">1</a><map><area href="/2"></map><link href="/not-a-link">
        <A HREF="/3">3</A><a>no href</a><a href="">this page</a><a href="mailto:x@a.example">"""

    assert page_links(page(html)) == [
        "http://a.example/1",
        "http://a.example/2",
        "http://a.example/3",
    ]


def test_a_source_without_src_is_no_sign_of_media() -> None:
    assert not has_media_markers(page('<source type="video/mp4"><meta name="og:image">'))
