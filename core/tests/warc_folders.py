"""Snapshot folders built by hand for packaging and export tests: a WARC written with warcio,
an optional screenshot, the WACZ, and the manifest, laid out as finalizing leaves them."""

from __future__ import annotations

import io
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from core.tests.site import PIXEL_PNG

WARC_PATH = "wget/warc/archive.warc.gz"
WARC_DATE = "2025-03-04T05:06:07Z"


def page_html(title: str) -> bytes:
    return f"<!doctype html><title>{title}</title><p>{title}, archived.</p>".encode()


def write_warc(path: Path, url: str, body: bytes, *, date: str = WARC_DATE) -> Path:
    """Write a gzipped WARC at ``path``: warcinfo, then a request and a 200 text/html response
    for ``url`` with ``body``, both dated ``date``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        writer = WARCWriter(out, gzip=True)
        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "tests"}))
        request = StatusAndHeaders("GET / HTTP/1.1", [("Host", "example")], is_http_request=True)
        writer.write_record(
            writer.create_warc_record(
                url, "request", http_headers=request, warc_headers_dict={"WARC-Date": date}
            )
        )
        headers = StatusAndHeaders(
            "200 OK",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))],
            protocol="HTTP/1.1",
        )
        writer.write_record(
            writer.create_warc_record(
                url,
                "response",
                payload=io.BytesIO(body),
                http_headers=headers,
                warc_headers_dict={"WARC-Date": date},
            )
        )
    return path


def make_snapshot_folder(
    folder: Path, url: str, *, title: str = "A page", warc: bool = True, screenshot: bool = True
) -> Path:
    """Lay out a snapshot folder: ``index.json``, a title output, the WARC (``warc``) and
    ``screenshot/screenshot.png`` (``screenshot``). No WACZ and no manifest yet."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.json").write_text(f'{{"url": "{url}"}}\n')
    (folder / "title").mkdir(exist_ok=True)
    (folder / "title" / "title.txt").write_text(title + "\n")
    if warc:
        write_warc(folder / WARC_PATH, url, page_html(title))
    if screenshot:
        (folder / "screenshot").mkdir(exist_ok=True)
        (folder / "screenshot" / "screenshot.png").write_bytes(PIXEL_PNG)
    return folder


def flip_byte(path: Path, offset: int = -10) -> None:
    """Invert one byte of ``path`` (silent corruption, size unchanged).

    The damaged bytes go in a file of the path's own: snapshots' identical files are one
    read-only file on disk (core/folder/blobs.py), and a test damages one snapshot at a time.
    """
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.unlink()
    path.write_bytes(bytes(data))
