"""The integrity check of succeeded results' outputs, on real files made here and by wget."""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image
from pypdf import PdfWriter
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from core.extractors.errors import Outcome
from core.extractors.favicon import FaviconExtractor
from core.extractors.headers import HeadersExtractor
from core.extractors.htmltotext import HtmlToTextExtractor
from core.extractors.outlinks import OutlinksExtractor
from core.extractors.title import TitleExtractor
from core.extractors.wget import WgetExtractor
from core.folder import formats, integrity
from core.folder.integrity import check_outputs, check_snapshot
from core.tests.site import LiveSite

WARC = "wget/warc/archive.warc.gz"
PLAIN_WARC = "wget/warc/archive.warc"
PAGE = "wget/127.0.0.1/index.html"
# What check_outputs says of warc_bytes(compress=False) with a byte of its last body flipped.
LAST_BODY_FLIPPED = (
    f"{PLAIN_WARC}: WARC record 4 (response http://127.0.0.1/page1) "
    "block digest mismatch, payload digest mismatch"
)


# --- building real files ---------------------------------------------------------------------


def warc_bytes(*, compress: bool = True, pages: int = 2, body_size: int = 20_000) -> bytes:
    """Return a WARC (warcio's WARCWriter, digests included) with a request and a response
    for each of ``pages`` URLs; bodies are random bytes, so gzip cannot shrink them away."""
    rnd = random.Random(1)
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=compress)
    for number in range(pages):
        uri = f"http://127.0.0.1/page{number}"
        request = b"GET /page%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % number
        # With lengths given, WARCWriter digests the BytesIO in place (no temporary file).
        writer.write_record(
            writer.create_warc_record(
                uri, "request", payload=io.BytesIO(request), length=len(request)
            )
        )
        body = bytes(rnd.randrange(256) for _ in range(body_size))
        headers = StatusAndHeaders(
            "200 OK",
            [("Content-Type", "image/png"), ("Content-Length", str(len(body)))],
            protocol="HTTP/1.1",
        )
        writer.write_record(
            writer.create_warc_record(
                uri, "response", payload=io.BytesIO(body), length=len(body), http_headers=headers
            )
        )
    return buffer.getvalue()


def png_bytes() -> bytes:
    """Return a real 64 x 48 PNG with varied pixels (so its IDAT is a real deflate stream)."""
    image = Image.new("RGB", (64, 48))
    image.putdata([(x * 4 % 256, y * 5 % 256, (x * y) % 256) for y in range(48) for x in range(64)])
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def pdf_bytes(pages: int = 1) -> bytes:
    """Return a real PDF of ``pages`` blank A4 pages, written by pypdf."""
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=595, height=842)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def put(folder: Path, name: str, data: bytes | str) -> Path:
    """Write ``data`` to ``folder/name`` (parents made); return the path."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def flip(data: bytes, offset: int) -> bytes:
    """Return ``data`` with the bits of the byte at ``offset`` (negative: from the end)
    inverted."""
    offset %= len(data)
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]


def listed(folder: Path, extractor: str) -> list[str]:
    """Return the files of ``folder/extractor`` as a result records them (sorted, relative to
    the snapshot folder), as services._move_into_place does."""
    files = sorted(p for p in (folder / extractor).rglob("*") if p.is_file())
    return [p.relative_to(folder).as_posix() for p in files]


def problems_of(folder: Path, name: str, *, extractor: str = "", output: str = "") -> list[str]:
    """Check the one file ``name`` (its extractor's main output unless ``output`` is given)."""
    extractor = extractor or name.split("/")[0]
    output = output or name.split("/", 1)[1]
    return check_outputs(folder, extractor=extractor, output=output, output_files=[name])


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    """An empty snapshot folder."""
    folder = tmp_path / "snapshot"
    folder.mkdir()
    return folder


# --- a sound snapshot ----------------------------------------------------------------------------


def test_a_sound_snapshot_has_no_problems(snapshot: Path) -> None:
    put(snapshot, WARC, warc_bytes())
    put(snapshot, PAGE, "<html>saved by wget</html>")
    put(snapshot, "wget/127.0.0.1/static/empty.css", b"")  # a requisite may be empty
    put(snapshot, "wget/wget.log", b"")
    put(snapshot, "headers/headers.json", json.dumps({"status": 200}))
    put(snapshot, "headers/headers.txt", "HTTP/1.1 200 OK\r\n")
    put(snapshot, "screenshot/screenshot.png", png_bytes())
    put(snapshot, "pdf/output.pdf", pdf_bytes())
    put(snapshot, "dom/output.html", "\ufeff<html>caf\u00e9</html>".encode())
    put(snapshot, "singlefile/singlefile.html", "<html>\u2713</html>")
    put(snapshot, "readability/content.html", "<article>text</article>")
    put(snapshot, "readability/article.json", '{"title": "T"}')
    put(snapshot, "title/title.txt", "A title\n")
    put(snapshot, "git/repo.git/HEAD", "ref: refs/heads/main\n")
    put(snapshot, "git/repo.git/description", b"")  # git leaves empty files
    results = [
        SimpleNamespace(extractor="wget", output="127.0.0.1/index.html"),
        SimpleNamespace(extractor="headers", output="headers.json"),
        SimpleNamespace(extractor="screenshot", output="screenshot.png"),
        SimpleNamespace(extractor="pdf", output="output.pdf"),
        SimpleNamespace(extractor="dom", output="output.html"),
        SimpleNamespace(extractor="singlefile", output="singlefile.html"),
        SimpleNamespace(extractor="readability", output="content.html"),
        SimpleNamespace(extractor="title", output="A title"),  # the title, not a file
        SimpleNamespace(extractor="git", output="repo.git"),  # a folder
    ]
    for result in results:
        result.output_files = listed(snapshot, result.extractor)

    assert check_snapshot(snapshot, results) == {}


def test_check_snapshot_reports_only_results_with_problems(snapshot: Path) -> None:
    put(snapshot, "headers/headers.json", "{}")
    put(snapshot, "screenshot/screenshot.png", png_bytes()[:100])
    results = [
        SimpleNamespace(
            extractor="headers", output="headers.json", output_files=["headers/headers.json"]
        ),
        SimpleNamespace(
            extractor="screenshot",
            output="screenshot.png",
            output_files=["screenshot/screenshot.png", "screenshot/chromium.log"],
        ),
    ]

    found = check_snapshot(snapshot, results)

    assert list(found) == ["screenshot"]
    assert found["screenshot"][0].startswith("screenshot/screenshot.png: not a readable PNG (")
    assert found["screenshot"][1] == "missing: screenshot/chromium.log"


# --- where a file is -----------------------------------------------------------------------------


def test_a_missing_file_is_a_problem(snapshot: Path) -> None:
    put(snapshot, "title/title.txt", "T\n")

    problems = check_outputs(
        snapshot, extractor="title", output="T", output_files=["title/title.txt", "title/curl.log"]
    )

    assert problems == ["missing: title/curl.log"]


def test_a_missing_main_output_is_a_problem_even_if_not_listed(snapshot: Path) -> None:
    problems = check_outputs(snapshot, extractor="favicon", output="favicon.ico", output_files=[])

    assert problems == ["missing: favicon/favicon.ico"]


@pytest.mark.parametrize(
    "name", ["../outside.txt", "wget/../../outside.txt", "/etc/passwd", "wget/a/../../../x"]
)
def test_a_path_leaving_the_snapshot_folder_is_a_problem(snapshot: Path, name: str) -> None:
    put(snapshot.parent, "outside.txt", "not ours")

    problems = check_outputs(snapshot, extractor="wget", output=PAGE, output_files=[name])

    assert f"{name}: outside the snapshot folder" in problems


def test_a_main_output_leaving_its_folder_is_a_problem(snapshot: Path) -> None:
    put(snapshot.parent, "outside.png", png_bytes())

    problems = check_outputs(
        snapshot, extractor="screenshot", output="../../outside.png", output_files=[]
    )

    assert problems == ["screenshot/../../outside.png: outside the snapshot folder"]


def test_a_symbolic_link_is_a_problem(snapshot: Path) -> None:
    target = put(snapshot, "headers/headers.json", "{}")
    (snapshot / "headers/link.json").symlink_to(target)

    problems = check_outputs(
        snapshot,
        extractor="headers",
        output="headers.json",
        output_files=["headers/headers.json", "headers/link.json"],
    )

    assert problems == ["headers/link.json: a symbolic link, not a regular file"]


def test_a_linked_folder_leading_outside_is_a_problem(snapshot: Path, tmp_path: Path) -> None:
    put(tmp_path, "elsewhere/index.html", "<html></html>")
    (snapshot / "wget").mkdir()
    (snapshot / "wget/127.0.0.1").symlink_to(tmp_path / "elsewhere")

    problems = problems_of(snapshot, PAGE)

    assert problems == [f"{PAGE}: outside the snapshot folder"]


def test_a_folder_or_fifo_is_not_a_regular_file(snapshot: Path) -> None:
    (snapshot / "media/clip.mp4").mkdir(parents=True)
    os.mkfifo(snapshot / "media/pipe")  # opening it would block: it must only be lstat'ed

    problems = check_outputs(
        snapshot, extractor="media", output="clip.mp4", output_files=["media/pipe"]
    )

    assert problems == [
        "media/pipe: not a regular file",
        "media/clip.mp4: not a regular file",
    ]


@pytest.mark.parametrize("extractor", ["wget", "git"])
def test_a_result_without_main_output_is_a_problem(snapshot: Path, extractor: str) -> None:
    put(snapshot, f"{extractor}/{extractor}.log", "log")

    problems = check_outputs(
        snapshot, extractor=extractor, output="", output_files=[f"{extractor}/{extractor}.log"]
    )

    assert problems == [f"{extractor}: no main output recorded"]


def test_git_output_must_be_a_folder(snapshot: Path) -> None:
    put(snapshot, "git/git.log", "cloned")

    missing = check_outputs(snapshot, extractor="git", output="repo.git", output_files=[])
    put(snapshot, "git/repo.git", "a file")
    not_folder = check_outputs(snapshot, extractor="git", output="repo.git", output_files=[])

    assert missing == ["missing: git/repo.git"]
    assert not_folder == ["git/repo.git: not a folder"]


# --- empty files ---------------------------------------------------------------------------------


def test_an_empty_main_output_is_a_problem_even_of_foreign_bytes(snapshot: Path) -> None:
    put(snapshot, "favicon/favicon.ico", b"")

    assert problems_of(snapshot, "favicon/favicon.ico") == ["empty: favicon/favicon.ico"]


def test_other_empty_files_are_allowed(snapshot: Path) -> None:
    put(snapshot, PAGE, "<html></html>")
    put(snapshot, "wget/wget.log", b"")
    put(snapshot, "wget/127.0.0.1/static/empty.js", b"")

    problems = check_outputs(
        snapshot,
        extractor="wget",
        output="127.0.0.1/index.html",
        output_files=[PAGE, "wget/wget.log", "wget/127.0.0.1/static/empty.js"],
    )

    assert problems == []


@pytest.mark.parametrize(
    "name",
    [
        WARC,
        "screenshot/screenshot.png",
        "pdf/output.pdf",
        "headers/headers.json",
        "dom/output.html",
    ],
)
def test_an_empty_file_of_a_checked_type_is_a_problem(snapshot: Path, name: str) -> None:
    put(snapshot, name, b"")

    # Not the main output: the type alone requires content.
    problems = problems_of(snapshot, name, output="something-else.txt")

    assert f"empty: {name}" in problems


def test_foreign_bytes_saved_by_wget_are_not_type_checked(snapshot: Path) -> None:
    put(snapshot, PAGE, b"\xff\xfe not UTF-8 at all")
    put(snapshot, "wget/127.0.0.1/static/pixel.png", b"a server's broken image")
    put(snapshot, "wget/127.0.0.1/data.json", b"{not json")

    problems = check_outputs(
        snapshot,
        extractor="wget",
        output="127.0.0.1/index.html",
        output_files=[PAGE, "wget/127.0.0.1/static/pixel.png", "wget/127.0.0.1/data.json"],
    )

    assert problems == []


# --- WARC ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, compress", [(WARC, True), (PLAIN_WARC, False)])
def test_a_sound_warc_passes(snapshot: Path, name: str, compress: bool) -> None:
    put(snapshot, name, warc_bytes(compress=compress))

    assert problems_of(snapshot, name) == []


@pytest.mark.parametrize("cut", ["middle", "gzip trailer"])
def test_a_truncated_gzip_warc_is_a_problem(snapshot: Path, cut: str) -> None:
    data = warc_bytes()
    put(snapshot, WARC, data[: len(data) // 2] if cut == "middle" else data[:-4])

    problems = problems_of(snapshot, WARC)

    assert problems, "a cut WARC must not pass"
    assert all(problem.startswith(f"{WARC}: ") for problem in problems)
    assert any("truncated" in problem or "cut short" in problem for problem in problems)


def test_an_uncompressed_warc_cut_inside_a_record_is_a_problem(snapshot: Path) -> None:
    data = warc_bytes(compress=False)
    last_response = data.rindex(b"WARC/1.0\r\nWARC-Type: response")
    put(snapshot, PLAIN_WARC, data[: last_response + 2000])

    problems = problems_of(snapshot, PLAIN_WARC)

    assert len(problems) == 1
    assert re.fullmatch(
        rf"{PLAIN_WARC}: WARC record 4 \(response http://127\.0\.0\.1/page1\) "
        r"cut short \(\d+ of \d+ bytes missing\)",
        problems[0],
    )


def test_a_flipped_payload_byte_fails_the_digests(snapshot: Path) -> None:
    data = warc_bytes(compress=False)
    put(snapshot, PLAIN_WARC, flip(data, -5000))  # in the last record's body

    assert problems_of(snapshot, PLAIN_WARC) == [LAST_BODY_FLIPPED]


def test_a_wrong_payload_digest_header_in_a_gzip_warc_is_a_problem(snapshot: Path) -> None:
    buffer = io.BytesIO()
    writer = WARCWriter(buffer, gzip=False)
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], "HTTP/1.1")
    page = b"<html>the page</html>"
    writer.write_record(
        writer.create_warc_record(
            "http://127.0.0.1/",
            "response",
            payload=io.BytesIO(page),
            length=len(page),
            http_headers=http,
        )
    )
    record = re.sub(
        rb"(WARC-Payload-Digest: sha1:)[A-Z2-7]{32}", rb"\g<1>" + b"A" * 32, buffer.getvalue()
    )
    put(snapshot, WARC, gzip.compress(record))  # one gzip member, as WARCWriter writes it

    assert problems_of(snapshot, WARC) == [
        f"{WARC}: WARC record 1 (response http://127.0.0.1/) payload digest mismatch"
    ]


def test_corrupt_gzip_data_is_a_problem_not_a_console_message(
    snapshot: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = warc_bytes(body_size=60_000)
    put(snapshot, WARC, flip(data, len(data) * 3 // 4))  # inside page1's stored deflate data

    problems = problems_of(snapshot, WARC)

    assert len(problems) == 1
    assert problems[0].startswith(f"{WARC}: truncated or not a WARC (corrupt gzip data near byte")
    assert capfd.readouterr().err == ""  # warcio alone would print zlib's error and go on


@pytest.mark.parametrize(
    "data, detail",
    [
        (b"this is not a WARC at all\n" * 20, "not a WARC (record 1 is no WARC record)"),
        (gzip.compress(b"<html>gzip, but no WARC</html>\n" * 20), "truncated or not a WARC ("),
        (gzip.compress(b""), "not a WARC (no records)"),
        (warc_bytes() + b"junk after the last record", "truncated or not a WARC (corrupt gzip"),
        # one gzip member for all records: warcio refuses it, and replay needs one per record
        (gzip.compress(warc_bytes(compress=False)), "truncated or not a WARC (ERROR: non-chunked"),
    ],
    ids=["garbage", "gzip of no WARC", "empty gzip", "trailing junk", "single gzip member"],
)
def test_a_file_that_is_no_warc_is_a_problem(snapshot: Path, data: bytes, detail: str) -> None:
    put(snapshot, WARC, data)

    problems = problems_of(snapshot, WARC)

    assert len(problems) == 1
    assert problems[0].startswith(f"{WARC}: {detail}")


def test_a_record_shorter_than_its_block_is_a_problem(
    snapshot: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = warc_bytes(compress=False)
    length = re.compile(rb"Content-Length: (\d+)\r\n\r\nHTTP").search(data)
    lower = str(int(length[1]) - 10).encode().rjust(len(length[1]), b"0")
    put(snapshot, PLAIN_WARC, data[: length.start(1)] + lower + data[length.end(1) :])

    problems = problems_of(snapshot, PLAIN_WARC)

    label = f"{PLAIN_WARC}: WARC record 2 (response http://127.0.0.1/page0)"
    assert problems == [
        f"{label} block digest mismatch, payload digest mismatch",
        f"{label} runs past its Content-Length",
    ]
    capfd.readouterr()  # warcio prints its own warning for this one


def test_a_malformed_record_header_is_a_problem_not_a_crash(snapshot: Path) -> None:
    data = warc_bytes(compress=False)
    # Without WARC-Target-URI, warcio's loader fails with AttributeError on a response record.
    put(snapshot, PLAIN_WARC, data.replace(b"WARC-Target-URI", b"WARC-Target-URX", 2))

    problems = problems_of(snapshot, PLAIN_WARC)

    assert len(problems) == 1
    assert problems[0].startswith(f"{PLAIN_WARC}: WARC record 1 is malformed (")


@pytest.mark.parametrize(
    "which, problems",
    [
        # A request's payload is empty: warcio compares its digest while parsing the record,
        # and cannot go on.
        (0, [f"{PLAIN_WARC}: WARC record 1 is malformed (Non-base16 digit found)"]),
        # A response's once its block is read: the records after it are still checked.
        (
            1,
            [
                f"{PLAIN_WARC}: WARC record 2 (response http://127.0.0.1/page0) is malformed "
                "(Non-base16 digit found)",
                LAST_BODY_FLIPPED,
            ],
        ),
    ],
    ids=["request", "response"],
)
def test_a_digest_warcio_cannot_decode_is_a_problem_not_a_crash(
    snapshot: Path, which: int, problems: list[str]
) -> None:
    data = flip(warc_bytes(compress=False), -5000)  # in the last record's body
    # Longer than base32, so warcio decodes it as base16, which "Z" is not.
    digest = list(re.finditer(rb"WARC-Payload-Digest: sha1:([A-Z2-7]{32})", data))[which]
    put(snapshot, PLAIN_WARC, data[: digest.start(1)] + b"Z" * 40 + data[digest.end(1) :])

    assert problems_of(snapshot, PLAIN_WARC) == problems


def test_many_problems_in_one_warc_are_capped(snapshot: Path) -> None:
    data = warc_bytes(compress=False, pages=8, body_size=300)
    # Flip one byte of every record's block: 16 records, 16 digest mismatches.
    starts = [match.start() for match in re.finditer(rb"WARC/1\.0\r\n", data)]
    ends = [*starts[1:], len(data)]
    for end in ends:
        data = flip(data, end - 6)

    put(snapshot, PLAIN_WARC, data)

    problems = problems_of(snapshot, PLAIN_WARC)

    assert len(problems) == formats.MAX_PROBLEMS_PER_FILE + 1
    assert problems[-1] == f"{PLAIN_WARC}: and 6 more problems"


# --- PNG -----------------------------------------------------------------------------------------


def test_a_real_png_passes(snapshot: Path) -> None:
    put(snapshot, "screenshot/screenshot.png", png_bytes())

    assert problems_of(snapshot, "screenshot/screenshot.png") == []


def test_a_flipped_idat_byte_fails_the_png_crc(snapshot: Path) -> None:
    data = png_bytes()
    put(snapshot, "screenshot/screenshot.png", flip(data, data.index(b"IDAT") + 50))

    assert problems_of(snapshot, "screenshot/screenshot.png") == [
        "screenshot/screenshot.png: not a readable PNG (broken PNG file "
        "(bad header checksum in b'IDAT'))"
    ]


@pytest.mark.parametrize("cut", ["half", "IEND's CRC", "inside IHDR"])
def test_a_truncated_png_is_a_problem(snapshot: Path, cut: str) -> None:
    data = png_bytes()
    keep = {"half": len(data) // 2, "IEND's CRC": len(data) - 2, "inside IHDR": 20}[cut]
    put(snapshot, "screenshot/screenshot.png", data[:keep])

    problems = problems_of(snapshot, "screenshot/screenshot.png")

    assert len(problems) == 1
    assert re.match(r"screenshot/screenshot\.png: (not a|truncated) ", problems[0])


def test_another_image_format_is_not_a_png(snapshot: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="JPEG")
    put(snapshot, "screenshot/screenshot.png", buffer.getvalue())

    assert problems_of(snapshot, "screenshot/screenshot.png") == [
        "screenshot/screenshot.png: not a PNG image"
    ]


# --- PDF -----------------------------------------------------------------------------------------


def test_a_real_pdf_passes(snapshot: Path) -> None:
    put(snapshot, "pdf/output.pdf", pdf_bytes(pages=2))

    assert problems_of(snapshot, "pdf/output.pdf") == []


def test_a_truncated_pdf_is_a_problem(snapshot: Path) -> None:
    data = pdf_bytes()
    put(snapshot, "pdf/output.pdf", data[: len(data) // 2])

    assert problems_of(snapshot, "pdf/output.pdf") == [
        "pdf/output.pdf: truncated PDF (no %%EOF in its last 1024 bytes)"
    ]


def test_a_pdf_pypdf_cannot_read_is_a_problem(snapshot: Path) -> None:
    data = pdf_bytes()
    put(snapshot, "pdf/output.pdf", data[: len(data) // 2] + b"\n%%EOF\n")  # cut, end restored

    problems = problems_of(snapshot, "pdf/output.pdf")

    assert len(problems) == 1
    assert problems[0].startswith("pdf/output.pdf: not a readable PDF (")


def test_a_pdf_without_pages_is_a_problem(snapshot: Path) -> None:
    put(snapshot, "pdf/output.pdf", pdf_bytes(pages=0))

    assert problems_of(snapshot, "pdf/output.pdf") == ["pdf/output.pdf: a PDF without pages"]


def test_a_pdf_pypdf_repairs_passes_without_logging(
    snapshot: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = pdf_bytes()
    pointer = re.compile(rb"startxref\n(\d+)\n").search(data)
    put(snapshot, "pdf/output.pdf", data[: pointer.start(1)] + b"300" + data[pointer.end(1) :])
    caplog.set_level(logging.WARNING, logger="pypdf")

    problems = problems_of(snapshot, "pdf/output.pdf")

    # pypdf repairs a wrong startxref, as PDF readers do, and would log a warning for it.
    assert problems == []
    assert [record for record in caplog.records if record.name.startswith("pypdf")] == []
    assert logging.getLogger("pypdf").level == logging.WARNING  # restored afterwards


# --- JSON and UTF-8 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["headers/headers.json", "outlinks/outlinks.json", "readability/article.json"]
)
def test_json_outputs_must_parse(snapshot: Path, name: str) -> None:
    put(snapshot, name, '{"status": 200, "headers": {"Content-Type": "text/html"')

    problems = problems_of(snapshot, name)

    assert len(problems) == 1
    assert problems[0].startswith(f"{name}: not valid JSON (")


def test_json_that_is_not_utf8_is_a_problem(snapshot: Path) -> None:
    put(snapshot, "outlinks/outlinks.json", b'["http://example.com/caf\xe9"]')

    problems = problems_of(snapshot, "outlinks/outlinks.json")

    assert len(problems) == 1
    assert problems[0].startswith("outlinks/outlinks.json: not valid JSON (")


@pytest.mark.parametrize(
    "name", ["dom/output.html", "singlefile/singlefile.html", "readability/content.html"]
)
def test_html_vellum_writes_must_be_utf8(snapshot: Path, name: str) -> None:
    put(snapshot, name, b"<html>caf\xe9</html>")

    assert problems_of(snapshot, name) == [
        f"{name}: not valid UTF-8 (byte 9: invalid continuation byte)"
    ]


def test_a_bom_is_allowed_but_is_not_content(snapshot: Path) -> None:
    put(snapshot, "dom/output.html", "\ufeff<html>\u00e9</html>".encode())
    put(snapshot, "singlefile/singlefile.html", b"\xef\xbb\xbf")

    assert problems_of(snapshot, "dom/output.html") == []
    assert problems_of(snapshot, "singlefile/singlefile.html") == [
        "singlefile/singlefile.html: empty (only a byte order mark)"
    ]


def test_utf8_is_decoded_across_read_chunks(
    snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(formats, "READ_CHUNK", 4)
    # "é" (2 bytes) and "✓" (3 bytes) straddle the 4-byte chunks; byte 11 is invalid.
    put(snapshot, "dom/output.html", "<p>\u00e9\u2713\u2713</p>".encode())
    put(snapshot, "readability/content.html", "<p>\u00e9\u2713\u2713".encode() + b"\xff</p>")

    assert problems_of(snapshot, "dom/output.html") == []
    assert problems_of(snapshot, "readability/content.html") == [
        "readability/content.html: not valid UTF-8 (byte 11: invalid start byte)"
    ]


def test_utf8_cut_inside_a_character_is_a_problem(snapshot: Path) -> None:
    put(snapshot, "dom/output.html", "<p>\u2713".encode()[:-1])

    assert problems_of(snapshot, "dom/output.html") == [
        "dom/output.html: not valid UTF-8 (ends inside a character)"
    ]


def test_an_unreadable_file_is_a_problem_not_a_crash(
    snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(snapshot, "headers/headers.json", "{}")

    def failing_read(path: Path) -> list[str]:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(
        integrity, "declared_outputs", lambda: [("headers/headers.json", failing_read)]
    )

    assert problems_of(snapshot, "headers/headers.json") == [
        "headers/headers.json: cannot be read (Input/output error)"
    ]


# --- real extractor output -----------------------------------------------------------------------


def run_into(extractor, url: str, snapshot: Path) -> SimpleNamespace:
    """Run ``extractor`` on ``url`` into ``snapshot/<name>``; return the result as recorded."""
    folder = snapshot / extractor.name
    folder.mkdir()
    output = extractor.run(SimpleNamespace(url=url), folder)
    assert output.outcome is Outcome.SUCCEEDED, output.error
    return SimpleNamespace(
        extractor=extractor.name,
        output=output.output,
        output_files=listed(snapshot, extractor.name),
    )


def response_record(warc: Path, url: str) -> tuple[int, int, int]:
    """Return the number (from 1) of ``url``'s response record in ``warc``, and the offset and
    length of the gzip member that holds it."""
    with open(warc, "rb") as stream:
        records = ArchiveIterator(stream)
        for number, record in enumerate(records, 1):
            if (
                record.rec_type == "response"
                and record.rec_headers.get_header("WARC-Target-URI") == url
            ):
                records.read_to_end()
                return number, records.get_record_offset(), records.get_record_length()
    raise AssertionError(f"no response for {url}")


def test_real_wget_and_headers_output_passes_then_fails_when_damaged(
    live_site: LiveSite, snapshot: Path
) -> None:
    url = live_site.url("/")
    results = [
        run_into(WgetExtractor(), url, snapshot),
        run_into(HeadersExtractor(), url, snapshot),
    ]
    assert PLAIN_WARC in results[0].output_files  # wget's, uncompressed: finalizing packs it
    # The other curl extractors' real output passes too (none of it is damaged below).
    others = [
        run_into(extractor, url, snapshot)
        for extractor in (
            TitleExtractor(),
            FaviconExtractor(),
            HtmlToTextExtractor(),
            OutlinksExtractor(),
        )
    ]

    assert check_snapshot(snapshot, results + others) == {}

    # The page's response record with one byte of its payload changed: its digests no longer
    # match.
    warc = snapshot / PLAIN_WARC
    sound = warc.read_bytes()
    number, _offset, _length = response_record(warc, url)
    warc.write_bytes(flip(sound, sound.index(b"</html>")))

    problems = check_snapshot(snapshot, results)
    assert list(problems) == ["wget"]
    assert problems["wget"] == [
        f"{PLAIN_WARC}: WARC record {number} (response {url}) "
        "block digest mismatch, payload digest mismatch"
    ]

    warc.write_bytes(sound[: len(sound) - 100])  # cut inside the last record: wget's log
    (cut_short,) = check_snapshot(snapshot, results)["wget"]
    assert re.fullmatch(
        rf"{PLAIN_WARC}: WARC record \d+ \(resource metadata://gnu\.org/software/wget/warc/"
        r"wget\.log\) cut short \(\d+ of \d+ bytes missing\)",
        cut_short,
    )

    warc.write_bytes(sound)
    (snapshot / "headers/headers.json").write_text('{"url": ')
    assert list(check_snapshot(snapshot, results)) == ["headers"]
