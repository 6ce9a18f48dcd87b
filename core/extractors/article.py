"""Finding the main article of a page with trafilatura, as a small page of its own.

Used by the readability extractor (core/extractors/readability.py), which imports it only when
it runs.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from html import escape, unescape
from urllib.parse import urljoin

import lxml.html
import trafilatura
from inscriptis import get_text
from trafilatura.metadata import examine_meta, extract_meta_json, extract_title
from trafilatura.utils import line_processing

MAX_TITLE_CHARS = 9999  # trafilatura's Document.clean_and_trim cuts longer values there

PAGE_TEMPLATE = """<!doctype html>
<html>
<head>
<meta charset="utf-8">
<title>{title}</title>
</head>
<body>
<article>
{heading}{body}
</article>
</body>
</html>
"""


@dataclass
class Article:
    """The main article of a page: its title ("" if none), HTML page and plain text."""

    title: str
    html: str
    text: str


def find_article(html: str, url: str) -> Article | None:
    """Return the main article of ``html``, or None if it has no text.

    Links and images in the article are made absolute against ``url`` (or the page's own
    ``<base href>``). The title is trafilatura's: the page's only ``<h1>``, else its metadata
    or ``<title>`` (site name removed when it can tell); it becomes the article's ``<h1>``
    unless the article already has that heading.
    """
    tree = trafilatura.load_html(html) if html.strip() else None
    if tree is None:  # nothing lxml can parse, or not HTML at all
        return None
    _make_links_absolute(tree, url)
    _drop_permalinks(tree)
    title = " ".join((_trafilatura_title(tree) or "").split())
    found = trafilatura.extract(
        tree,
        output_format="html",
        include_comments=False,
        include_tables=True,
        include_images=True,
        include_formatting=True,
        include_links=True,
    )
    if found is None:
        return None
    fragment = _body_of(found)
    if not get_text(fragment).strip():
        return None
    heading = "" if not title or _has_heading(fragment, title) else f"<h1>{escape(title)}</h1>\n"
    page = PAGE_TEMPLATE.format(title=escape(title or url), heading=heading, body=fragment)
    return Article(title=title, html=page, text=get_text(page).strip())


def _trafilatura_title(tree: lxml.html.HtmlElement) -> str | None:
    """The title trafilatura's ``extract_metadata`` gives ``tree``, found the way it finds it
    (meta tags, then JSON-LD, then the page's headings and ``<title>``), without the rest of its
    metadata: its searches for the author and the date, which the article does not show, were
    half of the readability extractor's time (py-spy, issue 18)."""
    metadata = examine_meta(tree)
    with suppress(Exception):  # trafilatura's own guard: its JSON-LD reader has bugs
        metadata = extract_meta_json(tree, metadata)
    title = metadata.title or extract_title(tree)
    return line_processing(unescape(title[:MAX_TITLE_CHARS])) if title else None


def _make_links_absolute(tree: lxml.html.HtmlElement, url: str) -> None:
    """Resolve the links and images of ``tree`` against its first ``<base href>``, else ``url``.

    trafilatura would resolve them against the site's root (``url`` without its path), so it is
    given absolute links and no URL. A ``<base href>`` that is no URL (``http://[::1``) is
    ignored, so links resolve against ``url``, as for the outlinks extractor; a link that is no
    URL is left as it is.
    """
    base = url
    element = tree.find(".//base[@href]")
    if element is not None:
        with suppress(ValueError):
            base = urljoin(url, element.get("href", "").strip())
    for element in list(tree.iter("base")):
        element.drop_tree()
    tree.make_links_absolute(base, resolve_base_href=False, handle_failures="ignore")


def _drop_permalinks(tree: lxml.html.HtmlElement) -> None:
    """Remove the "¶" permalinks Sphinx and MkDocs put in headings, which would end the title."""
    for link in list(tree.iter("a")):
        if "headerlink" in (link.get("class") or "").split():
            link.drop_tree()


def _body_of(page: str) -> str:
    """Return the inside of the ``<body>`` of trafilatura's HTML ``page``.

    trafilatura writes all code as ``<pre>``; one without a line break that is not a block of its
    own (but in a paragraph, heading, link or list item) was inline code, and is ``<code>``
    again so that its text stays in its line.
    """
    body = lxml.html.document_fromstring(page).body
    for element in body.iter("pre"):
        parent = element.getparent()
        if parent is not body and "\n" not in element.text_content():
            element.tag = "code"
    inner = escape(body.text or "", quote=False)
    return inner + "".join(lxml.html.tostring(child, encoding="unicode") for child in body)


def _has_heading(fragment: str, title: str) -> bool:
    """Tell whether ``fragment`` has a heading whose text is ``title`` (spaces and case aside)."""
    wanted = " ".join(title.split()).casefold()
    root = lxml.html.fragment_fromstring(fragment, create_parent="div")
    return any(
        " ".join(heading.text_content().split()).casefold() == wanted
        for heading in root.iter("h1", "h2", "h3")
    )
