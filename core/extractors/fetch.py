"""Fetch one URL with curl, bounded in time and size, for the extractors that read a page.

Each extractor fetches for itself so that every capture is independent of the others (the
mission: several independent extractors). curl is told to follow redirects, to give up after the
extractor's timeout (and to connect within CONNECT_TIMEOUT_SECONDS) and to refuse bodies over
``MAX_DOWNLOAD_BYTES``. curl's own ``--max-filesize`` only checks a length the server announces,
so the size is also bounded from outside (``download_limit``): a body without Content-Length,
or one that a gzip bomb inflates, is stopped when it passes the limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

from django.conf import settings

from core.extractors.addresses import Refusal
from core.extractors.credentials import Credentials, persona_arguments, persona_files
from core.extractors.errors import (
    Outcome,
    classify_curl_exit,
    classify_http_status,
    egress_failure,
    timeout_reason,
    too_large_reason,
)
from core.extractors.process import (
    CommandResult,
    OutputLimit,
    binary_version,
    find_binary,
    run_command,
)

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
    retry_after: float | None = None  # seconds, from the final response's Retry-After
    refusals: list[Refusal] = field(default_factory=list)  # what the address policy refused
    headers: dict[str, str] = field(default_factory=dict)  # the final response's fields

    @property
    def is_html(self) -> bool:
        return self.content_type in HTML_TYPES


def download_limit(folder: Path) -> OutputLimit:
    """Return the bound on what one extractor run may write into ``folder``, in bytes.

    Any one file: MAX_DOWNLOAD_BYTES (a response body; for wget also its WARC, which holds every
    response of the capture). The folder altogether: twice that, since wget keeps each byte it
    downloads twice, as a file and in the WARC.
    """
    limit = settings.MAX_DOWNLOAD_BYTES
    return OutputLimit(folder=folder, file_bytes=limit, total_bytes=2 * limit)


def fetch(
    url: str,
    *,
    body_path: Path,
    headers_path: Path | None,
    log_path: Path,
    timeout: float,
    user_agent: str = "",
    arguments: Sequence[str] = (),
    credentials: Credentials | None = None,
) -> FetchResult:
    """GET ``url`` into ``body_path``; keep curl's header dump in ``headers_path`` if given.

    Redirects are followed (at most 10). The body, as written (decompressed), is bounded by
    ``download_limit``; ``timeout`` is in seconds. ``user_agent`` (default USER_AGENT) and
    ``arguments`` (extra curl options) come from the calling extractor's EXTRACTOR_OPTIONS. The
    outcome is classified by curl's exit code, then by the final HTTP status
    (core/extractors/errors.py); the final response's header fields and Retry-After are read
    from the dump. ``credentials`` (a persona's) are sent from files in a private folder
    (``--cookie FILE``, ``--header @FILE``): no secret is on the command line.
    Raises LookupError if curl is not installed.
    """
    curl = find_binary("curl")
    if curl is None:
        raise LookupError("curl not found")
    dump = headers_path or body_path.with_name(body_path.name + ".headers")
    try:
        with persona_files(credentials) as files:
            cmd = _curl_command(
                curl, url, body_path, dump, timeout, user_agent,
                [*persona_arguments(files, "curl"), *arguments],
            )  # fmt: skip
            done, fields = _run_curl(cmd, body_path, dump, timeout, log_path)
    finally:
        if headers_path is None:
            dump.unlink(missing_ok=True)
    result = FetchResult(
        outcome=Outcome.SUCCEEDED,
        error="",
        cmd=cmd,
        cmd_version=binary_version(curl),
        exit_code=done.exit_code,
        headers=fields,
        retry_after=parse_retry_after(header(fields, "Retry-After")),
        refusals=done.refusals,
    )
    _judge(result, done, url, timeout)
    return result


def _curl_command(
    curl: str,
    url: str,
    body_path: Path,
    dump: Path,
    timeout: float,
    user_agent: str,
    arguments: Sequence[str],
) -> list[str]:
    """Return the curl command line that GETs ``url`` as ``fetch`` says, its body into
    ``body_path`` and its header dump into ``dump``."""
    return [
        curl,
        "-q",  # first, or it is not read: no ~/.curlrc, which could set a proxy or noproxy
        "--silent",
        "--show-error",
        "--location",
        "--max-redirs", "10",
        "--max-time", str(timeout),
        # A server that does not accept the connection fails now, not at --max-time.
        "--connect-timeout", f"{settings.CONNECT_TIMEOUT_SECONDS:g}",
        "--max-filesize", str(settings.MAX_DOWNLOAD_BYTES),
        "--user-agent", user_agent or settings.USER_AGENT,
        "--compressed",
        "--suppress-connect-headers",  # the egress proxy's tunnel answer is not the page's
        "--output", str(body_path),
        "--write-out", "%{json}",
        "--dump-header", str(dump),
        *arguments,
        url,
    ]  # fmt: skip


def _run_curl(
    cmd: list[str], body_path: Path, dump: Path, timeout: float, log_path: Path
) -> tuple[CommandResult, dict[str, str]]:
    """Run ``cmd`` beside ``body_path``, bounded by ``download_limit`` and ``timeout``
    (seconds); return how it ended and the final response's header fields, read from
    ``dump``."""
    # Give curl's own --max-time a moment to fire before the group is killed from outside.
    done = run_command(
        cmd,
        cwd=body_path.parent,
        timeout=timeout + 5,
        log_path=log_path,
        capture_stdout=True,
        limit=download_limit(body_path.parent),
    )
    _, fields = final_response(read_header_text(dump))
    return done, fields


def _judge(result: FetchResult, done: CommandResult, url: str, timeout: float) -> None:
    """Set ``result``'s outcome and error from how curl ended (``done``): a timeout or a body
    too large first, then curl's exit code, the final HTTP status, and what the egress proxy
    refused or could not reach. Status, type and final URL are read from curl's write-out,
    except after a timeout or a body too large."""
    if done.timed_out:
        result.outcome, result.error = timeout_reason("curl", timeout)
        return
    if done.too_large:
        result.outcome, result.error = too_large_reason(settings.MAX_DOWNLOAD_BYTES)
        return
    _read_write_out(result, done.stdout)
    result.outcome, result.error = classify_curl_exit(done.exit_code)
    if result.outcome is Outcome.SUCCEEDED and result.http_status is not None:
        result.outcome = classify_http_status(result.http_status)
        if result.outcome is not Outcome.SUCCEEDED:
            result.error = f"HTTP {result.http_status} from {result.final_url or url}"
    failure = egress_failure(done.refusals, done.unreachable)
    if failure and result.outcome is not Outcome.SUCCEEDED:
        # curl fetched only the URL and its redirects, through the egress proxy: what the proxy
        # met is why it failed, not the 403 or 502 it answered curl with.
        result.outcome, result.error = failure


def _read_write_out(result: FetchResult, stdout: str) -> None:
    """Fill status, type and final URL from curl's ``--write-out %{json}``.

    Retry-After is not among curl's write-out variables: ``fetch`` reads it from the dump.
    """
    try:
        info = json.loads(stdout)
    except ValueError:
        return
    result.http_status = info.get("http_code") or info.get("response_code") or None
    result.content_type = (info.get("content_type") or "").split(";")[0].strip().lower()
    result.final_url = info.get("url_effective") or ""


def read_header_text(path: Path) -> str:
    """Return the text of a curl ``--dump-header`` file ("" if absent).

    Header values are octets (RFC 9110 §5.5): UTF-8 in practice, Latin-1 in older servers.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def final_response(text: str) -> tuple[int | None, dict[str, str]]:
    """Parse the last response of a ``--dump-header`` text: (status, {name: value}).

    curl writes one block per response (redirects, 1xx) starting with its status line. Names keep
    the case first seen; repeated fields are joined with ", " (RFC 9110 §5.3), compared
    case-insensitively. Obsolete line folding (RFC 9112 §5.2) is unfolded into one space.
    """
    status: int | None = None
    fields: dict[str, str] = {}
    names: dict[str, str] = {}  # lowercased name -> the name as first seen
    last_name = ""
    for line in text.splitlines():
        if line.startswith("HTTP/"):
            status, fields, names, last_name = _status_code(line), {}, {}, ""
        elif line[:1] in (" ", "\t") and last_name:
            fields[last_name] += " " + line.strip()
        elif ":" in line:
            name, value = (part.strip() for part in line.split(":", 1))
            last_name = names.setdefault(name.lower(), name)
            fields[last_name] = f"{fields[last_name]}, {value}" if last_name in fields else value
    return status, fields


def _status_code(status_line: str) -> int | None:
    """Return the code of a status line such as "HTTP/1.1 200 OK" or "HTTP/2 404"."""
    parts = status_line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def header(fields: dict[str, str], name: str) -> str:
    """Return the value of header ``name`` (compared case-insensitively), or ""."""
    return next((value for key, value in fields.items() if key.lower() == name.lower()), "")


def parse_retry_after(value: str | None) -> float | None:
    """Return a Retry-After value in seconds from now: delay-seconds or an HTTP-date.

    RFC 9110 §10.2.3; a date in the past gives 0, anything unreadable None.
    """
    value = (value or "").strip()
    if value.isdigit():
        return float(value)
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # RFC 9110 §5.6.7: HTTP-dates are in GMT
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
