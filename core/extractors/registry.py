"""The extractors Vellum runs, in order (DESIGN.md §4); register a new one here.

Registering is all a new extractor needs beyond its own module: the integrity check, the public
pages, search and finalizing read what each one declares (core/extractors/base.py) from
``EXTRACTORS`` and ``find_extractor`` when they run.
"""

from __future__ import annotations

from django.conf import settings

from core.extractors.base import Extractor
from core.extractors.dom import DomExtractor
from core.extractors.favicon import FaviconExtractor
from core.extractors.git import GitExtractor
from core.extractors.headers import HeadersExtractor
from core.extractors.htmltotext import HtmlToTextExtractor
from core.extractors.media import MediaExtractor
from core.extractors.outlinks import OutlinksExtractor
from core.extractors.pdf import PdfExtractor
from core.extractors.readability import ReadabilityExtractor
from core.extractors.recording import RecordingExtractor
from core.extractors.screenshot import ScreenshotExtractor
from core.extractors.singlefile import SingleFileExtractor
from core.extractors.title import TitleExtractor
from core.extractors.wget import WgetExtractor

EXTRACTORS: tuple[Extractor, ...] = (
    HeadersExtractor(),
    WgetExtractor(),
    TitleExtractor(),
    FaviconExtractor(),
    HtmlToTextExtractor(),
    OutlinksExtractor(),
    ScreenshotExtractor(),
    PdfExtractor(),
    DomExtractor(),
    SingleFileExtractor(),
    RecordingExtractor(),  # after the other captures of the visit: what they fetched is in it
    ReadabilityExtractor(),  # depends on dom: runs once dom's result is final
    MediaExtractor(),
    GitExtractor(),
)
BY_NAME = {extractor.name: extractor for extractor in EXTRACTORS}
# Extractors whose runs leave the page's host alone (``Extractor.reads_saved``).
READS_SAVED = frozenset(extractor.name for extractor in EXTRACTORS if extractor.reads_saved)


def get_extractor(name: str) -> Extractor:
    """Return the registered extractor called ``name``; raise KeyError naming the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown extractor {name!r} (known: {', '.join(BY_NAME)})") from None


def find_extractor(name: str) -> Extractor | None:
    """Return the registered extractor called ``name``, or None (a result of one removed since)."""
    return BY_NAME.get(name)


def default_profile() -> list[str]:
    """Names of the extractors a new snapshot runs: settings.EXTRACTORS, or all, in order."""
    wanted = settings.EXTRACTORS or list(BY_NAME)
    for name in wanted:
        get_extractor(name)
    return [name for name in BY_NAME if name in wanted]


def profile_lazy_imports() -> list[str]:
    """The modules the extractors of ``default_profile()`` import on first use
    (``Extractor.lazy_imports``), each once, in profile order."""
    return list(
        dict.fromkeys(module for name in default_profile() for module in BY_NAME[name].lazy_imports)
    )
