"""What a wget capture lacks: the requisites it asked for and did not save, and why.

wget's ``--no-verbose`` log names a requisite that answered with an HTTP error (``<url>:`` then
``ERROR 404: Not Found.``) but not one whose connection failed: that prints "No data received."
or "Read error ..." alone. Its WARC names them all: a request record for every fetch it made,
and a response record for every one that was answered. So a request without a response is a
network failure (its reason is the log's message, when the log's unnamed messages pair up with
them one to one), and a response of 4xx or 5xx is an HTTP error, classified as every other
status is (core/extractors/errors.py). What the address policy refused is left out: the result
lists it in ``refused`` already.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from core.extractors.addresses import Refusal
from core.extractors.errors import Outcome, classify_http_status
from core.extractors.warc_index import warc_index

# Lines of a --no-verbose log that are not a network failure's message: the command line (the
# log's first line, core/extractors/process.py), a saved file or an error (both start with the
# date), the "<url>:" naming the next error, and the closing summary.
_NOT_A_FAILURE = re.compile(
    r"^(\$ |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d |\S+:$|FINISHED --|Total wall clock time:|Downloaded: )"
)
NO_RESPONSE = "no response (network error; see wget.log)"


@dataclass(frozen=True)
class Missing:
    """One requisite the capture lacks: its URL, why (in a few words), and whether asking again
    later may bring it (a network error, 408, 429, 5xx) or not (404, 410...)."""

    url: str
    reason: str
    temporary: bool

    def as_json(self) -> dict[str, str]:
        """Return what a result records of it: ``{"url": ..., "reason": ...}``."""
        return {"url": self.url, "reason": self.reason}


def missing_requisites(
    warc: Path,
    log_text: str,
    *,
    refusals: Sequence[Refusal] = (),
    unreachable: Sequence[Refusal] = (),
) -> list[Missing]:
    """Return the fetches of a wget run (its WARC and ``--no-verbose`` log) that saved nothing,
    in the order wget made them; [] when the WARC cannot be read.

    Redirects are not listed (their target is a fetch of its own); fetches the address policy
    refused (``refusals``) are left out; a host the egress proxy could not reach
    (``unreachable``) is listed with the proxy's reason, once.
    """
    requests, statuses = _read_warc(warc)
    refused = {refusal.target for refusal in refusals}
    unreached = {refusal.target: refusal.reason for refusal in unreachable}
    unanswered = [url for url in requests if url not in statuses]
    messages = [line.strip() for line in log_text.splitlines() if _is_failure_message(line)]
    paired = len(messages) == len(unanswered)
    missing: list[Missing] = []
    for url in requests:
        if url in refused or _tunnel(url) in refused:
            continue
        status = statuses.get(url)
        if url in unreached or _tunnel(url) in unreached:
            reason = unreached.get(url) or unreached[_tunnel(url)]
            missing.append(Missing(url, reason, temporary=True))
        elif status is None:
            reason = messages[unanswered.index(url)].rstrip(".") if paired else NO_RESPONSE
            missing.append(Missing(url, reason, temporary=True))
        elif status >= 400:
            temporary = classify_http_status(status) is Outcome.TEMPORARY
            missing.append(Missing(url, f"HTTP {status}", temporary=temporary))
    listed = {item.url for item in missing} | {_tunnel(item.url) for item in missing}
    for target, reason in unreached.items():
        if target not in listed:  # a tunnel that never opened: no request was recorded
            missing.append(Missing(target, reason, temporary=True))
    return missing


def _read_warc(warc: Path) -> tuple[list[str], dict[str, int]]:
    """Return the URLs requested, in order and once each, and the last status each got; none
    of either when the WARC cannot be read to its end (core/extractors/warc_index.py says
    what that finds)."""
    try:
        index = warc_index(warc)
    except OSError:
        return [], {}
    if index.error is not None:
        return [], {}
    requests: dict[str, None] = {}
    statuses: dict[str, int] = {}
    for record in index.records:
        if record.type == "request" and record.uri:
            requests[record.uri] = None
        elif record.type == "response" and record.uri and record.status is not None:
            statuses[record.uri] = record.status
    return list(requests), statuses


def _is_failure_message(line: str) -> bool:
    return bool(line.strip()) and not _NOT_A_FAILURE.match(line)


def _tunnel(url: str) -> str:
    """Return the ``host:port`` an https URL's CONNECT tunnel named (how the proxy records it),
    or ``url`` itself when it is no https URL."""
    parts = urlsplit(url)
    try:
        port = parts.port or 443
    except ValueError:
        return url
    if parts.scheme != "https" or not parts.hostname:
        return url
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}"
