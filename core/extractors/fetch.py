"""Fetch one URL with curl, bounded in time and size, for the extractors that read a page.

Each extractor fetches for itself so that every capture is independent of the others (the
mission: several independent extractors). curl is told to follow redirects, to give up after the
extractor's timeout and to refuse bodies over ``MAX_DOWNLOAD_BYTES``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from core.extractors.errors import Outcome, classify_curl_exit, classify_http_status, timeout_reason
from core.extractors.process import binary_version, find_binary, run_command

HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass
class FetchResult:
    """A finished fetch: how it went, the final response's status, type and URL, and the command."""

    outcome: Outcome
    error: str
    cmd: list[str]
    cmd_version: str
    exit_code: int | None
    http_status: int | None = None
    content_type: str = ""  # media type only, lowercased, without parameters
    final_url: str = ""
    retry_after: float | None = None

    @property
    def is_html(self) -> bool:
        return self.content_type in HTML_TYPES


def fetch(
    url: str, *, body_path: Path, headers_path: Path | None, log_path: Path, timeout: float
) -> FetchResult:
    """GET ``url`` into ``body_path`` (and its response headers into ``headers_path``).

    Redirects are followed (at most 10). The outcome is classified by curl's exit code, then by
    the final HTTP status (core/extractors/errors.py). Raises LookupError if curl is not installed.
    """
    curl = find_binary("curl")
    if curl is None:
        raise LookupError("curl not found")
    cmd = [
        curl,
        "--silent",
        "--show-error",
        "--location",
        "--max-redirs", "10",
        "--max-time", str(timeout),
        "--max-filesize", str(settings.MAX_DOWNLOAD_BYTES),
        "--user-agent", settings.USER_AGENT,
        "--compressed",
        "--output", str(body_path),
        "--write-out", "%{json}",
    ]  # fmt: skip
    if headers_path is not None:
        cmd += ["--dump-header", str(headers_path)]
    cmd.append(url)
    # Give curl's own --max-time a moment to fire before the group is killed from outside.
    done = run_command(
        cmd, cwd=body_path.parent, timeout=timeout + 5, log_path=log_path, capture_stdout=True
    )
    result = FetchResult(
        outcome=Outcome.SUCCEEDED,
        error="",
        cmd=cmd,
        cmd_version=binary_version(curl),
        exit_code=done.exit_code,
    )
    if done.timed_out:
        result.outcome, result.error = timeout_reason("curl", timeout)
        return result
    _read_write_out(result, done.stdout)
    result.outcome, result.error = classify_curl_exit(done.exit_code)
    if result.outcome is Outcome.SUCCEEDED and result.http_status is not None:
        result.outcome = classify_http_status(result.http_status)
        if result.outcome is not Outcome.SUCCEEDED:
            result.error = f"HTTP {result.http_status} from {result.final_url or url}"
    return result


def _read_write_out(result: FetchResult, stdout: str) -> None:
    """Fill status, type and final URL from curl's ``--write-out %{json}``.

    Retry-After is not among curl's write-out variables; core/extractors/page.py reads it from
    the header dump.
    """
    try:
        info = json.loads(stdout)
    except ValueError:
        return
    result.http_status = info.get("http_code") or info.get("response_code") or None
    result.content_type = (info.get("content_type") or "").split(";")[0].strip().lower()
    result.final_url = info.get("url_effective") or ""
