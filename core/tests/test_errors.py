"""The classification of extractor failures into temporary and fatal (core/extractors/errors.py)."""

from __future__ import annotations

import pytest

from core.extractors.addresses import Refusal
from core.extractors.errors import (
    Outcome,
    classify_curl_exit,
    classify_http_status,
    classify_wget_exit,
    egress_failure,
    net_error_reason,
    timeout_reason,
    too_large_reason,
    unreachable,
)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.SUCCEEDED),
        (204, Outcome.SUCCEEDED),
        (301, Outcome.SUCCEEDED),
        (304, Outcome.SUCCEEDED),
        (400, Outcome.FATAL),
        (401, Outcome.FATAL),
        (403, Outcome.FATAL),
        (404, Outcome.FATAL),
        (410, Outcome.FATAL),
        (408, Outcome.TEMPORARY),
        (425, Outcome.TEMPORARY),
        (429, Outcome.TEMPORARY),
        (500, Outcome.TEMPORARY),
        (502, Outcome.TEMPORARY),
        (503, Outcome.TEMPORARY),
        (504, Outcome.TEMPORARY),
    ],
)
def test_classify_http_status(status: int, outcome: Outcome) -> None:
    assert classify_http_status(status) is outcome


@pytest.mark.parametrize(
    ("code", "outcome", "words"),
    [
        (0, Outcome.SUCCEEDED, ""),
        (6, Outcome.TEMPORARY, "could not resolve host"),
        (7, Outcome.TEMPORARY, "failed to connect"),
        (28, Outcome.TEMPORARY, "timed out"),
        (56, Outcome.TEMPORARY, "connection reset"),
        (3, Outcome.FATAL, "malformed URL"),
        (47, Outcome.FATAL, "too many redirects"),
        (63, Outcome.FATAL, "MAX_DOWNLOAD_BYTES"),
        (99, Outcome.FATAL, "failed"),  # an exit curl has no name for: retrying will not help
    ],
)
def test_classify_curl_exit(code: int, outcome: Outcome, words: str) -> None:
    got, reason = classify_curl_exit(code)
    assert got is outcome
    assert words in reason
    if code:
        assert reason.startswith("curl: ")
        assert f"(exit {code})" in reason
    else:
        assert reason == ""


@pytest.mark.parametrize(
    ("code", "http_status", "outcome", "reason"),
    [
        (0, None, Outcome.SUCCEEDED, ""),
        (4, None, Outcome.TEMPORARY, "wget: network failure (timeout, refused or reset) (exit 4)"),
        (8, 404, Outcome.FATAL, "HTTP 404"),
        (8, 410, Outcome.FATAL, "HTTP 410"),
        (8, 429, Outcome.TEMPORARY, "HTTP 429"),
        (8, 503, Outcome.TEMPORARY, "HTTP 503"),
        (8, None, Outcome.FATAL, "wget: server issued an error response (exit 8)"),
        (5, None, Outcome.FATAL, "wget: TLS verification failure (exit 5)"),
        (2, None, Outcome.FATAL, "wget: command-line parse error (exit 2)"),
    ],
)
def test_classify_wget_exit(
    code: int, http_status: int | None, outcome: Outcome, reason: str
) -> None:
    assert classify_wget_exit(code, http_status) == (outcome, reason)


def test_timeout_is_temporary_and_names_the_binary_and_seconds() -> None:
    assert timeout_reason("wget", 2) == (Outcome.TEMPORARY, "wget timed out after 2 s")
    assert timeout_reason("curl", 1.5) == (Outcome.TEMPORARY, "curl timed out after 1.5 s")


def test_too_many_redirects_in_wget_is_fatal_whatever_its_exit() -> None:
    assert classify_wget_exit(8, None, too_many_redirects=True) == (
        Outcome.FATAL,
        "wget: too many redirects (exit 8)",
    )
    assert classify_wget_exit(0, None, too_many_redirects=True) == (Outcome.SUCCEEDED, "")


def test_too_large_is_fatal_and_names_the_setting_and_its_value() -> None:
    assert too_large_reason(2097152) == (
        Outcome.FATAL,
        "download exceeds MAX_DOWNLOAD_BYTES (2097152 bytes)",
    )


# --- which failures say the page's server was not reached (issue 19) ---------------------------


@pytest.mark.parametrize(
    ("outcome", "error", "expected"),
    [
        (*classify_curl_exit(6), True),  # could not resolve host
        (*classify_curl_exit(7), True),  # refused
        (*classify_curl_exit(28), True),  # timed out (connecting, or --max-time)
        (*classify_curl_exit(52), True),  # closed without a word
        (*classify_curl_exit(56), True),  # reset
        (*classify_wget_exit(4, None), True),
        (*timeout_reason("curl", 60), True),
        (*timeout_reason("wget", 2.5), True),
        (*timeout_reason("chromium", 30), True),
        (Outcome.TEMPORARY, net_error_reason("ERR_CONNECTION_REFUSED"), True),
        (Outcome.TEMPORARY, net_error_reason("ERR_EMPTY_RESPONSE"), True),
        (*egress_failure([], [Refusal("http://a.example/", "could not connect")]), True),
        # the server answered, or something else went wrong
        (*classify_curl_exit(18), False),  # a body cut short: it did answer
        (*classify_curl_exit(35), False),  # TLS
        (Outcome.TEMPORARY, "HTTP 503 from http://a.example/", False),
        (Outcome.TEMPORARY, net_error_reason("ERR_HTTP2_PROTOCOL_ERROR"), False),
        (*timeout_reason("git", 60), False),  # a clone may just be long
        (*timeout_reason("single-file", 60), False),
        (Outcome.TEMPORARY, "interrupted: stop requested", False),
        (*egress_failure([Refusal("http://10.0.0.1/", "private address")], []), False),
        (Outcome.FATAL, "curl timed out after 60 s", False),  # not TEMPORARY: not ours
    ],
)
def test_unreachable_names_the_failures_of_a_server_that_never_answered(
    outcome: Outcome, error: str, expected: bool
) -> None:
    assert unreachable(outcome, error) is expected
