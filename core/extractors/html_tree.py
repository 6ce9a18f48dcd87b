"""Parse a page's HTML into an lxml.html tree, fast, and without dropping any of it.

libxml2's HTML parser (which follows the HTML Living Standard's tokenizer, §13.2.5) builds the
tree in C: some 20 times faster than BeautifulSoup's "lxml" builder on the same parser, which
makes a Python object of every node. Building the tree itself, libxml2 stops at two limits,
silently, dropping the rest of the page: a text over 10 MB (lifted by XML_PARSE_HUGE, lxml's
``huge_tree``) and an element nested deeper than MAX_TREE_DEPTH. A page that deep is parsed
again, its tree built in Python from libxml2's events (``AnyDepthTarget``), which has no
limit, as BeautifulSoup had none.
"""

from __future__ import annotations

import re
from functools import cache

import lxml.etree
import lxml.html

# Deepest nesting of elements libxml2 builds a tree of with XML_PARSE_HUGE (2048 levels,
# <html> being the first); an element one level deeper stops the parse.
MAX_TREE_DEPTH = 2048
# The name an element gets when lxml refuses its own, which libxml2 allows ("<", "&", a quote:
# HTML's tokenizer takes anything but whitespace, "/" and ">"); no extractor looks for either.
REFUSED_TAG = "x-refused-name"
# Characters lxml refuses in a text or an attribute value (not XML's), which libxml2 keeps.
REFUSED_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def parse_html(html: str) -> lxml.html.HtmlElement:
    """Return the <html> element of ``html`` parsed by lxml.html, with all of the page in it.

    The text is fed to the parser, which ignores an XML declaration in it (lxml's
    ``document_fromstring`` refuses a str that has one). A document without any element (empty,
    only whitespace, comments or a doctype) gives an empty <html> element. Tag names are
    lowercase; attribute values are strings, ``rel`` and ``class`` included (not split). Raises
    UnicodeEncodeError if ``html`` holds a lone surrogate.
    """
    root = _feed(lxml.html.HTMLParser(huge_tree=True), html)
    if root is None:
        return lxml.html.Element("html")
    if _depth_probe()(root):
        # Perhaps cut short at MAX_TREE_DEPTH: about four times as long, but whole.
        return _feed(lxml.etree.HTMLParser(target=AnyDepthTarget()), html)
    # What follows </html> libxml2 puts in a new <html> beside the first: in it, as last child,
    # so that one element holds the whole page in document order (as AnyDepthTarget does).
    for later in list(root.itersiblings(lxml.etree.Element)):
        root.append(later)
    return root


def _feed(parser: lxml.etree.HTMLParser, html: str) -> lxml.html.HtmlElement | None:
    """Feed all of ``html`` to ``parser``; return the root element, None if there is none."""
    parser.feed(html)
    return parser.close()


@cache
def _depth_probe() -> lxml.etree.XPath:
    """Return an XPath true of a tree with an element MAX_TREE_DEPTH levels deep.

    One step per level: linear in the size of the tree (about 1 ms for 750 kB of HTML).
    """
    return lxml.etree.XPath("boolean(" + "/*" * MAX_TREE_DEPTH + ")")


class AnyDepthTarget:
    """A parser target that builds an lxml.html tree from libxml2's events, at any depth.

    lxml's TreeBuilder does the building, and refuses some of what libxml2 allows: a tag name
    lxml refuses becomes REFUSED_TAG, an attribute whose name it refuses ("{" first) is left
    out, and REFUSED_CHARACTERS in a text or value become U+FFFD. Comments, processing
    instructions and the doctype are left out too (lxml refuses "--" in a comment); the
    extractors read none of them.
    """

    def __init__(self) -> None:
        self._builder = lxml.etree.TreeBuilder(parser=lxml.html.HTMLParser())
        self._open: list[str] = []  # the tag names given to the builder, innermost last

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        """Open an element."""
        attrib = {name: _acceptable(value) for name, value in attrib.items()}
        try:
            self._builder.start(tag, attrib)
        except ValueError:
            if not _accepted(tag):
                tag = REFUSED_TAG
            attrib = {name: value for name, value in attrib.items() if _accepted("p", name)}
            self._builder.start(tag, attrib)
        self._open.append(tag)

    def end(self, tag: str) -> None:
        """Close the innermost open element (libxml2 closes every element it opened), but the
        root: what follows </html> libxml2 puts in another <html>, which goes inside it."""
        if len(self._open) > 1:
            self._builder.end(self._open.pop())

    def data(self, data: str) -> None:
        """Add text."""
        self._builder.data(_acceptable(data))

    def close(self) -> lxml.html.HtmlElement:
        """Close the root; return it."""
        while self._open:
            self._builder.end(self._open.pop())
        return self._builder.close()


def _acceptable(text: str) -> str:
    """Return ``text`` with each of REFUSED_CHARACTERS replaced by U+FFFD."""
    return REFUSED_CHARACTERS.sub("\ufffd", text)


def _accepted(tag: str, attribute: str | None = None) -> bool:
    """Tell whether lxml.html makes an element named ``tag`` (with ``attribute``, if given)."""
    try:
        lxml.html.Element(tag, {} if attribute is None else {attribute: ""})
    except ValueError:
        return False
    return True
