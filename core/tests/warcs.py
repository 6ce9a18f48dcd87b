"""Small, real WARC files for tests, written with warcio (ISO 28500 records with digests)."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter


def write_warc(path: Path, url: str, body: bytes = b"<html><title>x</title></html>") -> Path:
    """Write a gzipped WARC with one ``response`` record of ``url`` (HTTP 200, ``body``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        headers = StatusAndHeaders(
            "200 OK",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))],
            protocol="HTTP/1.1",
        )
        record = writer.create_warc_record(
            url, "response", payload=BytesIO(body), http_headers=headers
        )
        writer.write_record(record)
    return path
