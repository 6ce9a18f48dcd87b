"""Validate and normalize seed URLs, and read them from the text a person gives ``add``.

Normalization makes two spellings of one resource into one URL, so a crawl holds each page once:
scheme and host lowercased (RFC 3986 §6.2.2.1), the host in its IDNA ASCII form (RFC 5891), the
default port dropped and an empty path made ``/`` (RFC 3986 §6.2.3), the fragment removed (it never
reaches the server), and characters outside ASCII percent-encoded (RFC 3986 §2.1).
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

import idna
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

MAX_URL_LENGTH = 2048
SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 3986 §2.2 reserved characters plus "%" (already-encoded octets) stay as they are.
SAFE_PATH_CHARS = "/%:@!$&'()*+,;=-._~"
SAFE_QUERY_CHARS = SAFE_PATH_CHARS + "?"

_validate = URLValidator(schemes=list(SCHEMES))


class InvalidURL(ValueError):
    """A string that is not an absolute http(s) URL Vellum can archive; the message says why."""


class InputError(ValueError):
    """Input that holds no usable URLs, or some invalid ones; the message names the line."""


def normalize_url(raw: str) -> str:
    """Return ``raw`` as a normalized absolute http(s) URL.

    Raises InvalidURL with a one-line reason for an empty, overlong, relative, non-http(s),
    credential-bearing or otherwise malformed URL.
    """
    url = raw.strip()
    if not url:
        raise InvalidURL("empty URL")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidURL(f"URL is longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise InvalidURL(f"{_short(url)} is not a valid URL ({error})") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidURL(
            f"{_short(url)} is not an absolute URL (start it with http:// or https://)"
        )
    if scheme not in SCHEMES:
        raise InvalidURL(f"{_short(url)}: only http and https URLs can be archived, not {scheme}:")
    if parts.username is not None or parts.password is not None:
        raise InvalidURL(f"{_short(url)}: URLs with credentials (user:password@) are not archived")
    host = _ascii_host(parts.hostname or "", url)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    path = quote(parts.path or "/", safe=SAFE_PATH_CHARS)
    query = quote(parts.query, safe=SAFE_QUERY_CHARS)
    normalized = urlunsplit((scheme, netloc, path, query, ""))
    if len(normalized) > MAX_URL_LENGTH:
        raise InvalidURL(f"URL is longer than {MAX_URL_LENGTH} characters once percent-encoded")
    try:
        _validate(normalized)
    except ValidationError:
        raise InvalidURL(f"{_short(url)} is not a valid URL") from None
    return normalized


def _ascii_host(host: str, url: str) -> str:
    """Return the host lowercased and IDNA-encoded; raise InvalidURL if it cannot be."""
    if not host:
        raise InvalidURL(f"{_short(url)} has no host")
    if ":" in host or host.replace(".", "").isdigit():
        return host.lower()  # an IP literal: nothing to encode
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError as error:
        raise InvalidURL(f"{_short(url)} has an invalid host name ({error})") from None


def _short(url: str, limit: int = 80) -> str:
    return repr(url if len(url) <= limit else url[: limit - 1] + "…")


def parse_seed_text(data: bytes, *, source: str) -> list[str]:
    """Read URLs from plain text, one per line; blank lines and ``#`` comments are ignored.

    ``source`` names the input in messages ("urls.txt", "stdin", "command line"). Return the
    normalized URLs, each once, in input order. Raises InputError for binary or non-UTF-8 data, for
    input with no URLs, and for any invalid line (every bad line is listed, so nothing is half
    added).
    """
    if b"\0" in data[:8192]:
        raise InputError(f"{source} is binary data, not a list of URLs")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{source} is not UTF-8 text (byte {error.start})") from None
    urls: dict[str, None] = {}
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            urls[normalize_url(line)] = None
        except InvalidURL as error:
            problems.append(f"{source} line {number}: {error}")
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InputError("; ".join(problems[:5]) + more)
    if not urls:
        raise InputError(f"{source} contains no URLs")
    return list(urls)
