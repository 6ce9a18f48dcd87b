"""What changed between two captures of a URL: their readable text word by word (difflib), and
their screenshots pixel by pixel (Pillow).

The text is each capture's best readable text (core.services.captures.readable_text_path), its
first MAX_DIFF_CHARS characters. It is compared line by line first, then word by word inside
the lines that changed, the way difflib's own Differ narrows a change down; long runs of
unchanged words are cut to CONTEXT_WORDS on each side of a change.

The screenshots are compared over the area both cover; what one has beyond the other's edge
counts as changed. A screenshot of more than MAX_COMPARED_PIXELS is reduced first (by a whole
factor, both alike), so a 1280 x 16384 page costs tens of megabytes, not hundreds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import reduce
from pathlib import Path

from PIL import Image, ImageChops

from core.choices import ResultStatus
from core.extractors import registry
from core.models import Snapshot
from core.services.captures import read_text, readable_text_path

MAX_DIFF_CHARS = 200_000  # of each capture's text: as much as search keeps
CONTEXT_WORDS = 12  # unchanged words shown on each side of a change
MAX_COMPARED_PIXELS = 4_000_000  # a larger screenshot is reduced before comparing


@dataclass(frozen=True)
class Piece:
    """A run of the text diff: ``kind`` is "same", "added", "removed" or "skipped" (unchanged
    words left out; ``text`` is then "" and ``words`` says how many)."""

    kind: str
    text: str
    words: int


@dataclass
class TextChanges:
    """The two captures' readable texts compared. ``problem`` says why they could not be
    ("" when they were); ``before_source`` and ``after_source`` are the files read (paths in
    each snapshot's folder, None for one without text)."""

    before_source: str | None = None
    after_source: str | None = None
    pieces: list[Piece] = field(default_factory=list)
    added: int = 0  # words
    removed: int = 0  # words
    truncated: bool = False  # a text was longer than MAX_DIFF_CHARS: only its start compared
    problem: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


@dataclass
class ScreenshotChanges:
    """The two captures' screenshots compared. ``share``: the fraction of pixels that differ
    (0 to 1; None when they could not be compared, and ``problem`` says why). ``box``: where
    the changes lie, as ``(left, top, width, height)`` fractions of the later screenshot's
    size (None when nothing changed). ``before`` and ``after``: the files (paths in each
    snapshot's folder, None for one without a screenshot)."""

    before: str | None = None
    after: str | None = None
    before_size: tuple[int, int] | None = None
    after_size: tuple[int, int] | None = None
    share: float | None = None
    box: tuple[float, float, float, float] | None = None
    problem: str = ""

    @property
    def changed(self) -> bool:
        return bool(self.share)


@dataclass
class Comparison:
    """What changed from the capture ``before`` to the capture ``after``."""

    before: Snapshot
    after: Snapshot
    text: TextChanges
    screenshot: ScreenshotChanges


def captures_compare(*, before: Snapshot, after: Snapshot) -> Comparison:
    """Compare the readable text and the screenshot of two snapshots (normally two captures of
    one URL, ``before`` the earlier). Reads their folders; missing or unreadable files become
    the ``problem`` of that part, never an exception."""
    return Comparison(
        before=before,
        after=after,
        text=_compare_texts(before, after),
        screenshot=_compare_screenshots(before, after),
    )


def _lacking(before: object | None, after: object | None) -> str:
    """Name the capture(s) whose part is None: "either", "the earlier", "the later", or ""."""
    missing = [label for label, part in (("earlier", before), ("later", after)) if part is None]
    if len(missing) == 2:
        return "either"
    return f"the {missing[0]}" if missing else ""


# --- text ----------------------------------------------------------------------------------------


def _compare_texts(before: Snapshot, after: Snapshot) -> TextChanges:
    changes = TextChanges(
        before_source=readable_text_path(before), after_source=readable_text_path(after)
    )
    if which := _lacking(changes.before_source, changes.after_source):
        changes.problem = (
            f"No readable text in {which} capture (its text extractors did not run or found none)."
        )
        return changes
    try:
        texts = [
            read_text(snapshot.output_dir / source, MAX_DIFF_CHARS + 1)
            for snapshot, source in ((before, changes.before_source), (after, changes.after_source))
        ]
    except OSError as error:
        changes.problem = f"The readable text could not be read: {error.strerror or error}."
        return changes
    changes.truncated = any(len(text) > MAX_DIFF_CHARS for text in texts)
    pieces = text_diff(*(text[:MAX_DIFF_CHARS] for text in texts))
    changes.added = sum(piece.words for piece in pieces if piece.kind == "added")
    changes.removed = sum(piece.words for piece in pieces if piece.kind == "removed")
    changes.pieces = with_context(pieces) if changes.changed else []
    return changes


def text_diff(before: str, after: str) -> list[Piece]:
    """Return the word diff of two texts as pieces in reading order ("same", "added",
    "removed"; none "skipped"), adjacent pieces of one kind merged. Whitespace is not
    compared: the texts are read as lines of words."""
    old_lines = [line.split() for line in before.splitlines() if line.strip()]
    new_lines = [line.split() for line in after.splitlines() if line.strip()]
    by_line = SequenceMatcher(
        None, [" ".join(w) for w in old_lines], [" ".join(w) for w in new_lines], autojunk=False
    )
    runs: list[tuple[str, list[str]]] = []
    for tag, i1, i2, j1, j2 in by_line.get_opcodes():
        old_words = [word for line in old_lines[i1:i2] for word in line]
        new_words = [word for line in new_lines[j1:j2] for word in line]
        if tag == "equal":
            runs.append(("same", old_words))
        elif tag == "replace":
            runs += _word_runs(old_words, new_words)
        else:
            runs += [("removed", old_words), ("added", new_words)]
    return _merged(runs)


def _word_runs(old: list[str], new: list[str]) -> list[tuple[str, list[str]]]:
    """The word-by-word runs of one block of changed lines."""
    runs: list[tuple[str, list[str]]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new).get_opcodes():
        if tag == "equal":
            runs.append(("same", old[i1:i2]))
        else:
            runs += [("removed", old[i1:i2]), ("added", new[j1:j2])]
    return runs


def _merged(runs: list[tuple[str, list[str]]]) -> list[Piece]:
    merged: list[tuple[str, list[str]]] = []
    for kind, words in runs:
        if not words:
            continue
        if merged and merged[-1][0] == kind:
            merged[-1][1].extend(words)
        else:
            merged.append((kind, list(words)))
    return [Piece(kind, " ".join(words), len(words)) for kind, words in merged]


def with_context(pieces: list[Piece], context: int = CONTEXT_WORDS) -> list[Piece]:
    """Return ``pieces`` with each long "same" piece cut to ``context`` words beside the
    changes around it, the words left out as a "skipped" piece."""
    shown: list[Piece] = []
    last = len(pieces) - 1
    for index, piece in enumerate(pieces):
        if piece.kind != "same":
            shown.append(piece)
            continue
        words = piece.text.split(" ")
        keep_head = context if index > 0 else 0  # after a change
        keep_tail = context if index < last else 0  # before a change
        if len(words) <= keep_head + keep_tail + 1:
            shown.append(piece)
            continue
        if keep_head:
            shown.append(Piece("same", " ".join(words[:keep_head]), keep_head))
        skipped = len(words) - keep_head - keep_tail
        shown.append(Piece("skipped", "", skipped))
        if keep_tail:
            shown.append(Piece("same", " ".join(words[-keep_tail:]), keep_tail))
    return shown


# --- screenshots ---------------------------------------------------------------------------------


def screenshot_path(snapshot: Snapshot) -> str | None:
    """The path, in ``snapshot``'s folder, of its screenshot: the main output of the first
    succeeded result whose extractor gives the index's thumbnail (core/extractors/base.py
    ``index_image``), if that file is recorded; else None."""
    thumbnails = [e.name for e in registry.EXTRACTORS if e.index_image == "thumbnail"]
    results = snapshot.results.filter(extractor__in=thumbnails, status=ResultStatus.SUCCEEDED)
    by_extractor = {result.extractor: result for result in results}
    for name in thumbnails:
        result = by_extractor.get(name)
        if result and result.output and f"{name}/{result.output}" in result.output_files:
            return f"{name}/{result.output}"
    return None


def _compare_screenshots(before: Snapshot, after: Snapshot) -> ScreenshotChanges:
    changes = ScreenshotChanges(before=screenshot_path(before), after=screenshot_path(after))
    if which := _lacking(changes.before, changes.after):
        changes.problem = f"No screenshot of {which} capture."
        return changes
    try:
        compared = screenshot_difference(
            before.output_dir / changes.before, after.output_dir / changes.after
        )
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        changes.problem = f"The screenshots could not be compared: {error}."
        return changes
    changes.before_size, changes.after_size, changes.share, changes.box = compared
    return changes


def screenshot_difference(
    before: Path, after: Path
) -> tuple[tuple[int, int], tuple[int, int], float, tuple[float, float, float, float] | None]:
    """Compare two images; return their sizes (width, height in pixels), the fraction of
    pixels that differ in any colour channel (0 to 1, over the larger width and height), and
    where they differ (left, top, width, height as fractions of ``after``'s size, or None).

    Raises OSError for a file that is missing or not an image Pillow reads, and
    Image.DecompressionBombError for one too large to open safely.
    """
    with Image.open(before) as first, Image.open(after) as second:
        sizes = first.size, second.size
        factor = math.ceil(math.sqrt(max(w * h for w, h in sizes) / MAX_COMPARED_PIXELS))
        old, new = (_rgb(image, factor) for image in (first, second))
    width, height = max(old.width, new.width), max(old.height, new.height)
    common = min(old.width, new.width), min(old.height, new.height)
    difference = ImageChops.difference(old.crop((0, 0, *common)), new.crop((0, 0, *common)))
    strongest = reduce(ImageChops.lighter, difference.split())  # per pixel, any channel
    mask = strongest.point(lambda value: 255 if value else 0)
    differing = mask.histogram()[255] + (width * height - common[0] * common[1])
    box = _union(mask.getbbox(), common, (width, height))
    share = differing / (width * height) if width * height else 0.0
    if box is None:
        return sizes[0], sizes[1], share, None
    left, top, right, bottom = box
    scale_x, scale_y = new.width or 1, new.height or 1
    fractions = (
        min(left / scale_x, 1.0),
        min(top / scale_y, 1.0),
        min((right - left) / scale_x, 1.0),
        min((bottom - top) / scale_y, 1.0),
    )
    return sizes[0], sizes[1], share, fractions


def _rgb(image: Image.Image, factor: int) -> Image.Image:
    rgb = image.convert("RGB")
    return rgb.reduce(factor) if factor > 1 else rgb


def _union(
    box: tuple[int, int, int, int] | None, common: tuple[int, int], canvas: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """The box around the changed pixels of the common area and whatever lies beyond it."""
    boxes = [box] if box else []
    if canvas[0] > common[0]:
        boxes.append((common[0], 0, canvas[0], canvas[1]))
    if canvas[1] > common[1]:
        boxes.append((0, common[1], canvas[0], canvas[1]))
    if not boxes:
        return None
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
