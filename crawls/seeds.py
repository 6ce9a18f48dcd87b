"""Validate and normalize seed URLs, and decode the input a person gives ``add``.

Normalization makes two spellings of one resource into one URL, so a crawl holds each page once:
scheme and host lowercased (RFC 3986 §6.2.2.1), the host in its IDNA ASCII form (RFC 5891), the
default port dropped and an empty path made ``/`` (RFC 3986 §6.2.3), the fragment removed (it never
reaches the server), and characters outside ASCII percent-encoded (RFC 3986 §2.1). An IPv6 literal
is written in its canonical compressed form (RFC 5952 §4, as the WHATWG URL standard serializes
it), so ``[0:0:0:0:0:0:0:1]`` and ``[::1]`` are one host.

URLs with credentials (``user:password@host``) are refused rather than stripped: the URL is kept
and shown everywhere (the admin, index.json, public pages, logs, the commands that ran), so a
password in it would leak, and without it the server would usually serve another page (a login
form) than the one asked for. The person who gave it decides what to do instead.
"""

from __future__ import annotations

import codecs
import ipaddress
import unicodedata
from functools import lru_cache
from urllib.parse import quote, urlsplit, urlunsplit

import idna
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

MAX_URL_LENGTH = 2048  # characters: Snapshot.url's max_length
MAX_LISTED_PROBLEMS = 5  # bad lines named in an InputError; the others are counted
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

    Raises InvalidURL with a one-line reason for an empty, overlong (over MAX_URL_LENGTH
    characters, before or after percent-encoding), relative, non-http(s), credential-bearing
    URL, one whose host is not a valid IDNA host name, IPv4 or bracketed IPv6 address, one with
    port 0, or an otherwise malformed one.
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
        if _bare_ipv6(url):
            raise InvalidURL(
                f"{_short(url)} is not a valid URL (put an IPv6 address in brackets: "
                "http://[::1]:8000/)"
            ) from None
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
    host = _ascii_host(parts.hostname or "", url, bracketed="[" in parts.netloc)
    netloc = f"[{host}]" if ":" in host else host
    if port == 0:
        raise InvalidURL(f"{_short(url)} is not a valid URL (port 0 cannot be connected to)")
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


def domain_match(host: str, domain: str) -> bool:
    """Tell whether ``host`` domain-matches ``domain`` (RFC 6265 §5.1.3, as cookies do): the two
    are the same (without case, and a leading dot of ``domain`` ignored), or ``host`` is a host
    name (not an IP address) that ends with ``"." + domain``."""
    host, domain = host.lower().rstrip("."), domain.lower().strip(".")
    if not host or not domain:
        return False
    if host == domain:
        return True
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        return host.endswith(f".{domain}")


def has_control_character(text: str) -> bool:
    """Tell whether ``text`` holds a control character (Unicode category Cc: C0, DEL, C1), which
    no URL does (RFC 3986 §2; the WHATWG URL standard strips tabs and line breaks)."""
    return any(unicodedata.category(char) == "Cc" for char in text)


def _bare_ipv6(url: str) -> bool:
    """Tell whether ``url``'s authority looks like an IPv6 address without its brackets."""
    authority = url.partition("//")[2].split("/", 1)[0].rpartition("@")[2]
    return "[" not in authority and authority.count(":") > 1


def _ascii_host(host: str, url: str, *, bracketed: bool) -> str:
    """Return the host lowercased and IDNA-encoded, or an IP address in canonical form.

    ``bracketed``: the URL wrote the host in brackets, which only an IPv6 address may be.
    Raises InvalidURL if the host is none of these.
    """
    if not host:
        raise InvalidURL(f"{_short(url)} has no host")
    if bracketed:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidURL(f"{_short(url)} has an invalid IPv6 address") from None
        if address.scope_id:
            raise InvalidURL(f"{_short(url)}: an IPv6 zone (%...) only has a meaning on one host")
        return address.compressed
    if host.replace(".", "").isdigit():
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise InvalidURL(f"{_short(url)} has an invalid IPv4 address") from None
    try:
        return _idna(host)
    except idna.IDNAError as error:
        raise InvalidURL(f"{_short(url)} has an invalid host name ({error})") from None


@lru_cache(maxsize=4096)
def _idna(host: str) -> str:
    """Return ``host`` in IDNA ASCII form (UTS #46 mapping: lowercased); raise IDNAError.

    Cached: a list of thousands of URLs names few hosts, and encoding is the slow part.
    """
    return idna.encode(host, uts46=True).decode("ascii")


def _short(url: str, limit: int = 80) -> str:
    return repr(url if len(url) <= limit else url[: limit - 1] + "…")


def decode_input(data: bytes, *, source: str) -> str:
    """Return ``data`` as text, without a UTF-8 byte order mark.

    ``source`` names the input in messages ("urls.txt", "stdin", "command line"). Raises
    InputError for binary data (a NUL byte anywhere), UTF-16, and other non-UTF-8 text (naming
    the line and byte offset of the first bad byte).
    """
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InputError(f"{source} is UTF-16 text; save it as UTF-8")
    if b"\0" in data:
        raise InputError(f"{source} is binary data, not a list of URLs")
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = bom + error.start  # counted from the start of the input, as an editor would
        line = data.count(b"\n", 0, offset) + 1
        raise InputError(f"{source} is not UTF-8 text (line {line}, byte {offset})") from None
