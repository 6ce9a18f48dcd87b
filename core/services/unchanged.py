"""Keeping only changes: a page that serves its last capture's bytes again is recorded as a small
capture that points at that one instead of being archived again (issue 20 item 4).

A crawl with ``only_changes`` (a schedule's option, or ``add --only-changes``) looks at each page
before its extractors run: one GET with curl (core/extractors/fetch.py: the extractors' bounds,
egress rules and user agent; no Accept-Encoding, so the body is the payload as wget records it),
whose body's SHA-256 is compared with the payload of the page's response in its latest sealed
capture (PayloadRecord; when that capture was itself unchanged, the original its revisit refers
to). When they are equal the snapshot starts with no results (``Snapshot.start_unchanged``) and
its folder holds ``unchanged/warc/unchanged.warc.gz``: the response just fetched, which
finalizing writes as a WARC revisit record of the original (identical-payload-digest profile:
core/services/dedup.py), beside index.json, the manifest and its signature. Its content digest is
the original capture's, so the URL's timeline marks it unchanged.

Anything else archives the page in full: no earlier capture, another body, a failed or refused
GET. A page kept this way queues no outlinks (its links are those of the capture it points at).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path

from django.conf import settings
from django.db.models import Q
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from core.choices import SnapshotStatus
from core.extractors.errors import Outcome
from core.extractors.fetch import fetch
from core.folder.manifest import TEMP_PREFIX, sha256_file
from core.models import PayloadRecord, PayloadRevisit, Snapshot

logger = logging.getLogger(__name__)

WARC_PATH = "unchanged/warc/unchanged.warc.gz"  # in the snapshot folder
PROBE_TIMEOUT = 30  # seconds at most for the GET (the snapshot's actor waits for it)


@dataclass(frozen=True)
class PagePayload:
    """What the latest capture of a URL served as its page: the payload's SHA-256 (hex) and
    the snapshot that holds it in full."""

    sha256: str
    holder: Snapshot


def snapshot_find_unchanged(*, snapshot: Snapshot) -> Snapshot | None:
    """Return the capture whose page ``snapshot``'s URL serves again, byte for byte, when its
    crawl keeps only changes; else None (archive the page in full).

    On a match the response is written to ``WARC_PATH`` in the snapshot folder. Network and
    file errors give None (logged), never an exception: the full capture is always right.
    """
    if not snapshot.crawl.only_changes:
        return None
    latest = latest_page_payload(url=snapshot.url, exclude=snapshot)
    if latest is None:
        return None
    work = snapshot.output_dir / f"{TEMP_PREFIX}unchanged"
    try:
        if not _serves(snapshot.url, latest.sha256, work):
            return None
        target = snapshot.output_dir / WARC_PATH
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work / "unchanged.warc.gz", target)
    except OSError as error:
        logger.warning("snapshot %s: looking for changes failed: %s", snapshot.pk, error)
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("snapshot %s: %s unchanged since snapshot %s",
                snapshot.pk, snapshot.url, latest.holder.pk)  # fmt: skip
    return latest.holder


def latest_page_payload(*, url: str, exclude: Snapshot) -> PagePayload | None:
    """The page payload of the latest sealed capture of ``url`` other than ``exclude`` kept
    alike (``_kept_alike``), or None when it has none recorded (no WARC, a page under
    DEDUP_MIN_BYTES, a redirect)."""
    captures = Snapshot.objects.captures_of(url).exclude(pk=exclude.pk)
    captures = captures.filter(_kept_alike(exclude.crawl))
    latest = captures.filter(status=SnapshotStatus.SEALED).order_by("-captured_at").first()
    if latest is None:
        return None
    record = PayloadRecord.objects.filter(snapshot=latest, target_uri=url).first()
    if record is None:
        revisit = (
            PayloadRevisit.objects.filter(snapshot=latest, original__target_uri=url)
            .select_related("original__snapshot")
            .first()
        )
        record = revisit.original if revisit is not None else None
    if record is None:
        return None
    holder = record.snapshot
    if not Snapshot.objects.filter(pk=holder.pk).filter(_kept_alike(exclude.crawl)).exists():
        holder = latest  # the bytes' first keeper is someone else's: point at this one's own
    return PagePayload(sha256=record.payload_sha256, holder=holder)


def _kept_alike(crawl) -> Q:
    """The captures an unchanged capture of ``crawl`` may point at: those of crawls added by
    the same user (or, for both, by the operator at the command line) with the same persona
    (or none). A capture points at one that replays in its place, and a user reads only their
    own captures; another persona's capture holds what another account saw."""
    return Q(crawl__created_by=crawl.created_by_id, crawl__persona=crawl.persona_id)


def _serves(url: str, sha256: str, work: Path) -> bool:
    """GET ``url`` into ``work``; when its body's SHA-256 is ``sha256``, write the response as
    a WARC record (``work/unchanged.warc.gz``) and return True."""
    work.mkdir(parents=True, exist_ok=True)
    body, headers = work / "body", work / "headers.txt"
    fetched = fetch(
        url,
        body_path=body,
        headers_path=headers,
        log_path=work / "curl.log",
        timeout=min(PROBE_TIMEOUT, settings.EXTRACTOR_TIMEOUT),
        arguments=("--no-compressed",),
    )
    if fetched.outcome != Outcome.SUCCEEDED or fetched.http_status != HTTPStatus.OK:
        logger.info("%s: no answer to compare (%s): archived in full", url, fetched.error or
                    fetched.http_status)  # fmt: skip
        return False
    if fetched.final_url not in ("", url) or sha256_file(body) != sha256:
        return False
    _write_response(work / "unchanged.warc.gz", url, fetched.headers, body)
    return True


def _write_response(warc: Path, url: str, fields: dict[str, str], body: Path) -> None:
    """Write a WARC/1.1 file (each record its own gzip member) holding the 200 response of
    ``url``: ``fields`` (its header fields) and ``body`` (its payload)."""
    # curl took the chunks apart: the payload written is the body whole.
    kept = [(name, value) for name, value in fields.items() if name.lower() != "transfer-encoding"]
    http_headers = StatusAndHeaders("200 OK", kept, protocol="HTTP/1.1")
    with open(warc, "wb") as output, open(body, "rb") as payload:
        writer = WARCWriter(output, gzip=True, warc_version="WARC/1.1")
        writer.write_record(writer.create_warcinfo_record(warc.name, {"software": "Vellum"}))
        writer.write_record(
            writer.create_warc_record(url, "response", payload=payload, http_headers=http_headers)
        )
