"""Files that differ only in the time stamp their tool writes into them.

Chromium writes the moment it printed into every PDF (the ``/CreationDate`` and ``/ModDate``
of the document information dictionary, ISO 32000-1 §14.3.3) and SingleFile the moment it saved
into the comment that opens its page (``saved date: ...``). Two captures of an unchanged page
therefore give files that differ in those bytes alone, and would each be stored whole. An
extractor names such a stamp on its ``Output`` (core/extractors/base.py; the patterns are in
core/extractors/pdf.py and singlefile.py, with the tool's own words); ``same_but_stamps``
tells whether two files are such a pair, so that finalizing can keep the earlier file instead
(core/services/dedup.py), as a WARC revisit record keeps the earlier payload.

The rule is strict: the files must have the same size, the same number of stamps at the same
offsets, and every byte outside the stamps equal. A stamp only ever hides the value of a time,
never a difference in what the page showed.
"""

from __future__ import annotations

import re
from pathlib import Path

# The most bytes read of a file to compare (larger files are never taken as equivalent).
MAX_COMPARED_BYTES = 64 * 1024 * 1024


def stamp_spans(data: bytes, stamp: re.Pattern[bytes]) -> list[tuple[int, int]]:
    """Return the ``(start, end)`` byte offsets of every time stamp (each match's first group)
    that ``stamp`` finds in ``data``."""
    return [match.span(1) for match in stamp.finditer(data)]


def same_but_stamps(first: Path, second: Path, stamp: re.Pattern[bytes]) -> bool:
    """True when the files ``first`` and ``second`` differ at most in their time stamps.

    Both must hold the same number of stamps (at least one) at the same offsets, and be equal
    elsewhere; files over MAX_COMPARED_BYTES are never taken as such. Raises OSError when a file
    cannot be read.
    """
    size = first.stat().st_size
    if size != second.stat().st_size or size > MAX_COMPARED_BYTES:
        return False
    one, other = first.read_bytes(), second.read_bytes()
    spans = stamp_spans(one, stamp)
    if not spans or spans != stamp_spans(other, stamp):
        return False
    return _without(one, spans) == _without(other, spans)


def _without(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """``data`` with the bytes of ``spans`` left out."""
    parts, at = [], 0
    for start, end in spans:
        parts.append(data[at:start])
        at = end
    parts.append(data[at:])
    return b"".join(parts)
