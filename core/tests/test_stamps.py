"""Files that differ only in their tool's time stamp (core/folder/stamps.py), with the stamps
Chromium's PDF printer and SingleFile write (core/extractors/pdf.py, singlefile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.extractors.pdf import PRINTED_AT
from core.extractors.singlefile import SAVED_AT
from core.folder.stamps import same_but_stamps, stamp_spans

# The information dictionary as Chromium 156 writes it, around a page's own bytes.
PDF = (
    b"%PDF-1.4\n1 0 obj\n<</Creator (Mozilla/5.0 HeadlessChrome/156)\n/Producer (Skia/PDF m156)"
    b"\n/CreationDate (D:{when}+00'00')\n/ModDate (D:{when}+00'00')>>\nendobj\n{body}\n%%EOF\n"
)
SINGLEFILE = (
    "<!DOCTYPE html> <html lang=en><!--\n Page saved with SingleFile \n url: http://x.test/ \n"
    " saved date: {when} GMT+0000 (Coordinated Universal Time)\n--><meta charset=utf-8>{body}"
)


def pdf(when: str, body: str = "stream of the page") -> bytes:
    return PDF.replace(b"{when}", when.encode()).replace(b"{body}", body.encode())


def singlefile(when: str, body: str = "<p>The page</p>") -> bytes:
    return SINGLEFILE.format(when=when, body=body).encode()


def pair(tmp_path: Path, one: bytes, other: bytes) -> tuple[Path, Path]:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(one)
    second.write_bytes(other)
    return first, second


def test_two_prints_of_an_unchanged_page_differ_only_in_their_dates(tmp_path) -> None:
    first, second = pair(tmp_path, pdf("20261126194741"), pdf("20261127080102"))

    assert first.read_bytes() != second.read_bytes()
    assert same_but_stamps(first, second, PRINTED_AT)
    assert len(stamp_spans(first.read_bytes(), PRINTED_AT)) == 2


def test_two_saves_of_an_unchanged_page_differ_only_in_their_saved_date(tmp_path) -> None:
    first, second = pair(
        tmp_path, singlefile("Thu Nov 26 2026 19:47:42"), singlefile("Fri Nov 27 2026 08:01:02")
    )

    assert same_but_stamps(first, second, SAVED_AT)


@pytest.mark.parametrize(
    ("one", "other", "stamp"),
    [
        # The page changed, however little: same size, one letter.
        (pdf("20261126194741", "stream of the page"), pdf("20261127080102", "stream of the pagE"),
         PRINTED_AT),
        (singlefile("Thu Nov 26 2026 19:47:42", "<p>The page</p>"),
         singlefile("Fri Nov 27 2026 08:01:02", "<p>The pagE</p>"), SAVED_AT),
        # Same size, but a shorter date moves the rest of the file: not taken as the same.
        (pdf("20261126194741", "stream of the page"), pdf("2026112719474", "stream of the pages"),
         PRINTED_AT),
        # Files without the stamp, however alike, are left to the shared store's own rule.
        (b"<p>no stamp here</p>", b"<p>no stamp here</p>", SAVED_AT),
        # A "saved date" in the page's text, not in SingleFile's comment, is no stamp.
        (b"<p>\n saved date: Monday\n</p>", b"<p>\n saved date: Friday\n</p>", SAVED_AT),
    ],
)  # fmt: skip
def test_files_that_differ_elsewhere_are_not_the_same(tmp_path, one, other, stamp) -> None:
    first, second = pair(tmp_path, one, other)

    assert not same_but_stamps(first, second, stamp)


def test_a_missing_file_is_an_error_not_a_match(tmp_path) -> None:
    first = tmp_path / "first"
    first.write_bytes(pdf("20261126194741"))

    with pytest.raises(OSError):
        same_but_stamps(first, tmp_path / "gone", PRINTED_AT)
