"""Save a page's DOM after its scripts ran, serialized as HTML by the shared Chromium.

Frames are documents of their own: each ``<iframe>``'s DOM (same-origin or not, after its own
scripts ran) is serialized too and put into the saved markup as the iframe's ``srcdoc``, which
a browser shows in place of its ``src`` (HTML Living Standard §4.8.5), so that what the page
showed inside its frames is in the file. That is done to a copy of the document, never to the
page itself: setting ``srcdoc`` navigates a frame, and the visit's other outputs follow.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from core.extractors.base import Format, Output
from core.extractors.rendering import ChromiumExtractor

OUTPUT_HTML = "output.html"
MAX_FRAME_DEPTH = 5  # frames inside frames inside ...: deeper ones keep their src only
# Where the readability extractor finds it, relative to the snapshot folder.
DOM_PATH = f"dom/{OUTPUT_HTML}"


class DomExtractor(ChromiumExtractor):
    """Serialize the rendered document (what scripts added included) to output.html, UTF-8."""

    name = "dom"
    outputs = (Output(OUTPUT_HTML, Format.UTF8),)

    def capture(self, page, out_dir: Path) -> str:
        """Write output.html: the document's markup as the browser holds it, UTF-8.

        A page that declared another charset keeps its ``<meta charset>``, so the file then
        starts with a UTF-8 byte order mark, which wins over the meta tag when the file is
        read (HTML Living Standard §13.2.3.2, encoding sniffing).
        """
        declared_utf8 = page.evaluate("() => document.characterSet") == "UTF-8"
        encoding = "utf-8" if declared_utf8 else "utf-8-sig"
        (out_dir / OUTPUT_HTML).write_text(frame_markup(page.main_frame), encoding=encoding)
        return OUTPUT_HTML


# In a frame: its document as markup (doctype first, as Playwright's content() gives it), with
# the markup of child frames (``frames``, their <iframe> elements) as srcdoc of a copy of those.
SERIALIZE_WITH_FRAMES = """([frames, markups]) => {
  const copy = document.documentElement.cloneNode(true);
  const live = [...document.querySelectorAll("iframe")];
  const copies = [...copy.querySelectorAll("iframe")];
  frames.forEach((frame, i) => {
    const at = live.indexOf(frame);
    if (at >= 0) copies[at].setAttribute("srcdoc", markups[i]);
  });
  const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : "";
  return doctype + copy.outerHTML;
}"""


def frame_markup(frame, depth: int = 0) -> str:
    """Return ``frame``'s document as HTML, its child frames' inlined as ``srcdoc`` (see the
    module docstring), down to MAX_FRAME_DEPTH. A child frame that has no http(s) document yet,
    is gone or cannot be read (detached meanwhile, a crashed renderer) keeps its ``src`` only."""
    from playwright.sync_api import Error as PlaywrightError

    children = [child for child in frame.child_frames if _has_loaded(child)]
    if not children or depth >= MAX_FRAME_DEPTH:
        return frame.content()
    elements, markups = [], []
    for child in children:
        try:
            element = child.frame_element()
            markup = frame_markup(child, depth + 1)
        except PlaywrightError:
            continue
        elements.append(element)
        markups.append(markup)
    return frame.evaluate(SERIALIZE_WITH_FRAMES, [elements, markups])


def _has_loaded(frame) -> bool:
    """Whether ``frame`` shows an http(s) document: one whose navigation has not committed (a
    server that never answers, a redirect refused) still has the initial about:blank, and asking
    for its markup would wait for a document that may never come."""
    return not frame.is_detached() and urlsplit(frame.url).scheme in ("http", "https")
