"""Classify what went wrong in an extractor run: temporary (retry with backoff) or fatal.

This is the one place that decides; extractors report an exit code, an HTTP status or a timeout
and call these functions rather than matching strings of their own (DESIGN.md §2, ArchiveResult).
"""

from __future__ import annotations

import re
from enum import StrEnum

from core.extractors.addresses import refused_message


class Outcome(StrEnum):
    """How an extractor run ended, as the ArchiveResult state machine needs to know it."""

    SUCCEEDED = "succeeded"
    SKIPPED = "skipped"  # does not apply (binary missing, not HTML, nothing to save)
    TEMPORARY = "temporary"  # retry later with backoff: timeout, connection refused, 429, 5xx
    FATAL = "fatal"  # retrying will not help: 404, unsupported content, malformed URL


# RFC 9110 §15: 408 Request Timeout, 425 Too Early, 429 Too Many Requests (RFC 6585) and every
# 5xx say "try again later"; every other 4xx says the request itself will keep failing.
TEMPORARY_HTTP_STATUSES = frozenset({408, 425, 429})

# curl's exit codes (man curl, "EXIT CODES") that a later attempt may not hit again.
TEMPORARY_CURL_EXITS = {
    5: "could not resolve proxy",
    6: "could not resolve host",
    7: "failed to connect (connection refused or unreachable)",
    16: "HTTP/2 framing error",
    18: "partial file: transfer ended early",
    28: "operation timed out",
    35: "TLS handshake failed",
    52: "server replied with nothing",
    55: "failed sending network data",
    56: "failed receiving network data (connection reset)",
    92: "HTTP/2 stream error",
}
FATAL_CURL_EXITS = {
    1: "unsupported protocol",
    3: "malformed URL",
    47: "too many redirects",
    60: "TLS certificate could not be verified",
    63: "response larger than MAX_DOWNLOAD_BYTES",
}

# GNU wget's exit statuses (wget(1), "EXIT STATUS").
TEMPORARY_WGET_EXITS = {4: "network failure (timeout, refused or reset)"}
FATAL_WGET_EXITS = {
    1: "generic error",
    2: "command-line parse error",
    3: "file I/O error",
    5: "TLS verification failure",
    6: "authentication failure",
    7: "protocol error",
}


# The failures that say the page's server was never reached or never answered: it did not
# resolve, refused or reset the connection, closed it without a word, or the page did not arrive
# before the timeout. The host is at fault, not the page: such a failure backs off the
# snapshot's other results with it and counts towards the host's circuit breaker (issue 19,
# core/services/hosts.py). A server that answers, even with an error, is not among them.
UNREACHABLE_CURL_EXITS = frozenset({6, 7, 28, 52, 55, 56})
UNREACHABLE_WGET_EXITS = frozenset({4})
UNREACHABLE_NET_ERRORS = frozenset(
    {
        "ERR_CONNECTION_REFUSED",
        "ERR_CONNECTION_RESET",
        "ERR_CONNECTION_CLOSED",
        "ERR_CONNECTION_ABORTED",
        "ERR_CONNECTION_TIMED_OUT",
        "ERR_TIMED_OUT",
        "ERR_EMPTY_RESPONSE",
        "ERR_NAME_NOT_RESOLVED",
        "ERR_NAME_RESOLUTION_FAILED",
        "ERR_ADDRESS_UNREACHABLE",
    }
)
# The tools that fetch the page itself first: their timeout means the page did not arrive (a
# git clone, a media download or SingleFile's run do more than that, and may just be long).
PAGE_FETCHERS = ("curl", "wget", "chromium")
NETWORK_ERROR = "network error: "  # what the egress proxy could not resolve or connect to


def classify_http_status(status: int) -> Outcome:
    """Classify a final HTTP status code (after redirects): 2xx/3xx succeed (RFC 9110 §15)."""
    if 200 <= status < 400:
        return Outcome.SUCCEEDED
    if status in TEMPORARY_HTTP_STATUSES or status >= 500:
        return Outcome.TEMPORARY
    return Outcome.FATAL


def classify_curl_exit(code: int) -> tuple[Outcome, str]:
    """Classify curl's exit code; return the outcome and a human-readable reason."""
    if code == 0:
        return Outcome.SUCCEEDED, ""
    if code in TEMPORARY_CURL_EXITS:
        return Outcome.TEMPORARY, f"curl: {TEMPORARY_CURL_EXITS[code]} (exit {code})"
    reason = FATAL_CURL_EXITS.get(code, "failed")
    return Outcome.FATAL, f"curl: {reason} (exit {code})"


def classify_wget_exit(
    code: int, http_status: int | None, *, too_many_redirects: bool = False
) -> tuple[Outcome, str]:
    """Classify wget's exit code; exit 8 (server error response) is judged by ``http_status``.

    ``too_many_redirects``: wget's log said "N redirections exceeded." (it exits 8 with no HTTP
    error status), which is fatal like curl's exit 47.
    """
    if code == 0:
        return Outcome.SUCCEEDED, ""
    if too_many_redirects:
        return Outcome.FATAL, f"wget: too many redirects (exit {code})"
    if code == 8 and http_status is not None:
        return classify_http_status(http_status), f"HTTP {http_status}"
    if code in TEMPORARY_WGET_EXITS:
        return Outcome.TEMPORARY, f"wget: {TEMPORARY_WGET_EXITS[code]} (exit {code})"
    if code == 8:
        return Outcome.FATAL, "wget: server issued an error response (exit 8)"
    reason = FATAL_WGET_EXITS.get(code, "failed")
    return Outcome.FATAL, f"wget: {reason} (exit {code})"


def timeout_reason(binary: str, seconds: float) -> tuple[Outcome, str]:
    """A command killed after its timeout: always temporary (the server may answer next time)."""
    return Outcome.TEMPORARY, f"{binary} timed out after {seconds:g} s"


def too_large_reason(max_bytes: int) -> tuple[Outcome, str]:
    """A command killed for writing more than ``max_bytes``: fatal (the page will not shrink).

    ``max_bytes`` is settings.MAX_DOWNLOAD_BYTES, named in the message so that the person who
    reads it knows which setting to raise.
    """
    return Outcome.FATAL, f"download exceeds MAX_DOWNLOAD_BYTES ({max_bytes} bytes)"


def egress_failure(refusals: list, unreachable: list) -> tuple[Outcome, str] | None:
    """Return why a fetch that went through the egress proxy (core/extractors/egress.py) never
    reached a server: refused by the address policy (FATAL: it would be refused again), or a
    host that did not resolve or answer (TEMPORARY). None when neither happened.

    ``refusals`` and ``unreachable`` are the proxy's lists, oldest first; the first is the cause.
    """
    if refusals:
        return Outcome.FATAL, refused_message(refusals[0])
    if unreachable:
        return Outcome.TEMPORARY, f"{NETWORK_ERROR}{unreachable[0]}"
    return None


def net_error_reason(code: str) -> str:
    """Return the reason for Chromium's network error ``code`` (``ERR_*``, from Chromium's
    net/base/net_error_list.h): ``"chromium: <code>"``."""
    return f"chromium: {code}"


_UNREACHABLE_REASONS = frozenset(
    {classify_curl_exit(code)[1] for code in UNREACHABLE_CURL_EXITS}
    | {classify_wget_exit(code, None)[1] for code in UNREACHABLE_WGET_EXITS}
    | {net_error_reason(code) for code in UNREACHABLE_NET_ERRORS}
)
# timeout_reason's words, for one of PAGE_FETCHERS
_PAGE_TIMEOUT = re.compile(rf"(?:{'|'.join(PAGE_FETCHERS)}) timed out after \S+ s")


def unreachable(outcome: Outcome, error: str) -> bool:
    """True when a run that ended with ``outcome`` and ``error`` (a reason this module gave)
    failed because the page's server was not reached or did not answer: a temporary failure
    named in UNREACHABLE_CURL_EXITS, UNREACHABLE_WGET_EXITS or UNREACHABLE_NET_ERRORS, the
    egress proxy's network error, or the timeout of one of PAGE_FETCHERS."""
    if outcome is not Outcome.TEMPORARY:
        return False
    return (
        error.startswith(NETWORK_ERROR)
        or error in _UNREACHABLE_REASONS
        or _PAGE_TIMEOUT.fullmatch(error) is not None
    )
