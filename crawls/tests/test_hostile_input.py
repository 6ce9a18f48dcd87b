"""Hostile input (issue 3, item 7): URLs and input files that must end in a clear error.

URLs: overlong, invalid IDNA, spaces, credentials, unknown schemes, IPv6 literals. Files: empty,
binary, 10 MB of garbage, invalid UTF-8. Each gives one readable line (InvalidURL or InputError)
and, through ``crawl_create``, queues and saves nothing. What ``manage.py add`` shows for the
same files is checked in core/tests/test_cli.py.
"""

from __future__ import annotations

import random
from functools import cache

import pytest

from core.services.crawls import crawl_create
from crawls.inputs import parse_seed_text
from crawls.models import Crawl
from crawls.seeds import MAX_URL_LENGTH, InputError, InvalidURL, normalize_url

MiB = 1024**2


def refused(raw: str) -> str:
    """Return the message normalize_url refuses ``raw`` with; fail if it accepts it."""
    with pytest.raises(InvalidURL) as caught:
        normalize_url(raw)
    message = str(caught.value)
    assert "\n" not in message
    assert len(message) < 300
    return message


# --- URLs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # overlong: Snapshot.url holds 2048 characters
        ("http://example.com/" + "a" * 3000, f"URL is longer than {MAX_URL_LENGTH} characters"),
        ("http://" + "a." * 1500 + "com/", f"URL is longer than {MAX_URL_LENGTH} characters"),
        # invalid IDNA: the reason names the offending code point or rule
        ("http://☃.example/", "has an invalid host name (Codepoint U+2603"),
        ("http://a\u200db.example/", "has an invalid host name (Joiner U+200D"),
        ("http://xn--zz.example/", "has an invalid host name (Invalid A-label)"),
        ("http://ab--cd.example/", "has an invalid host name (Label has disallowed hyphens"),
        ("http://" + "a" * 64 + ".example/", "has an invalid host name"),
        ("http://under_score.example/", "has an invalid host name (Codepoint U+005F"),
        # spaces inside the host (spaces in a path are percent-encoded instead)
        ("http://exa mple.com/", "has an invalid host name (Codepoint U+0020"),
        # credentials are refused, not stripped (crawls/seeds.py says why)
        ("http://user:secret@example.com/", "URLs with credentials (user:password@)"),
        ("https://token@example.com/", "URLs with credentials (user:password@)"),
        ("http://user@[::1]:8000/", "URLs with credentials (user:password@)"),
        # unknown schemes
        ("gopher://example.com/", "only http and https URLs can be archived, not gopher:"),
        ("ws://example.com/socket", "only http and https URLs can be archived, not ws:"),
        ("mailto:someone@example.com", "only http and https URLs can be archived, not mailto:"),
        ("about:blank", "only http and https URLs can be archived, not about:"),
        # IPv6 literals that are not addresses, or not usable
        ("http://::1/", "put an IPv6 address in brackets: http://[::1]:8000/"),
        ("http://[v1.fe80]/", "has an invalid IPv6 address"),
        ("http://[fe80::1%25eth0]/", "an IPv6 zone (%...) only has a meaning on one host"),
        ("http://[::1/", "is not a valid URL"),
        ("http://[::1]:99999/", "is not a valid URL (Port out of range 0-65535)"),
        # IPv4 look-alikes, and ports nobody can connect to
        ("http://999.1.2.3/", "has an invalid IPv4 address"),
        ("http://01.2.3.4/", "has an invalid IPv4 address"),  # octal or decimal? neither
        ("http://1.2.3/", "has an invalid IPv4 address"),
        ("http://example.com:0/", "port 0 cannot be connected to"),
    ],
)
def test_hostile_url_is_refused_with_a_readable_reason(raw: str, message: str) -> None:
    assert message in refused(raw)


def test_a_refused_url_is_quoted_in_its_message() -> None:
    assert refused("http://☃.example/").startswith("'http://☃.example/' ")


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("http://[::1]:8000/", "http://[::1]:8000/"),
        ("http://[::1]:8000", "http://[::1]:8000/"),
        ("HTTP://[0:0:0:0:0:0:0:1]:8000/a", "http://[::1]:8000/a"),  # RFC 5952 canonical form
        ("http://[2001:DB8:0:0:0:0:0:1]/", "http://[2001:db8::1]/"),
        ("https://[2001:db8::1]:443/", "https://[2001:db8::1]/"),  # the default port goes
        ("http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"),  # as the WHATWG URL writes it
        ("http://127.0.0.1:8765/x", "http://127.0.0.1:8765/x"),
        ("http://example.com/with space", "http://example.com/with%20space"),
        ("  http://example.com/  ", "http://example.com/"),
        ("http://faß.de/", "http://xn--fa-hia.de/"),  # IDNA 2008: ß is kept, not mapped to ss
    ],
)
def test_edge_case_url_is_accepted_and_normalized(raw: str, normalized: str) -> None:
    assert normalize_url(raw) == normalized
    assert normalize_url(normalized) == normalized


def test_two_spellings_of_one_ipv6_host_are_one_url() -> None:
    assert normalize_url("http://[::1]/") == normalize_url("http://[0000::0001]:80/#x")


# --- input files ---------------------------------------------------------------------------------


@cache
def garbage() -> bytes:
    """10 MiB of random bytes (a fixed seed: the same garbage every run)."""
    return random.Random(20240607).randbytes(10 * MiB)


@cache
def text_garbage() -> bytes:
    """10 MiB of garbage that is valid UTF-8 without NUL: 105,000 lines of printable junk."""
    rng = random.Random(20240608)
    lines = [bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz:/.?#%&=", k=99)) for _ in range(1000)]
    return b"\n".join(lines * 105)


# Each hostile file, built when a test asks for it (a 10 MiB parameter would slow collection).
FILES = {
    "empty": lambda: b"",
    "blank": lambda: b"   \n\t\n",
    "binary": lambda: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "10mb-garbage": garbage,
    "10mb-garbage-without-nul": lambda: bytes(b or 1 for b in garbage()),
    "10mb-text-garbage": text_garbage,
    "nul-late": lambda: b"http://a.example/\n" * 1000 + b"http://b.example/\x00\n",
    "utf16": lambda: "http://a.example/\n".encode("utf-16"),
    "invalid-utf8": lambda: b"http://a.example/\nhttp://b.example/\xc3\x28\n",
    "latin1": lambda: b"http://a.example/caf\xe9\n",
    "bom-then-latin1": lambda: b"\xef\xbb\xbfhttp://a.example/\nhttp://b.example/caf\xe9\n",
}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("empty", "urls.txt contains no URLs"),
        ("blank", "urls.txt contains no URLs"),
        ("binary", "urls.txt is binary data, not a list of URLs"),
        ("10mb-garbage", "urls.txt is binary data, not a list of URLs"),
        ("10mb-garbage-without-nul", "urls.txt is not UTF-8 text (line 1, byte "),
        ("nul-late", "urls.txt is binary data, not a list of URLs"),
        ("utf16", "urls.txt is UTF-16 text; save it as UTF-8"),
        ("invalid-utf8", "urls.txt is not UTF-8 text (line 2, byte 35)"),
        ("latin1", "urls.txt is not UTF-8 text (line 1, byte 20)"),
        ("bom-then-latin1", "urls.txt is not UTF-8 text (line 2, byte 41)"),  # BOM counted
    ],
)
def test_hostile_input_file_is_refused_with_one_line(name: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_seed_text(FILES[name](), source="urls.txt")

    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_ten_megabytes_of_text_garbage_lists_five_lines_and_counts_the_rest() -> None:
    with pytest.raises(InputError) as caught:
        parse_seed_text(text_garbage(), source="junk.txt")

    message = str(caught.value)
    assert message.startswith("junk.txt line 1: ")
    assert "junk.txt line 5: " in message
    assert "junk.txt line 6: " not in message
    assert message.endswith(" more)")
    assert len(message) < 2000
    assert int(message.rsplit("(and ", 1)[1].split()[0]) > 100_000 - 5


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", ["empty", "binary", "10mb-garbage", "10mb-text-garbage", "invalid-utf8"]
)
def test_hostile_input_queues_and_saves_nothing(name: str, settings, tmp_path) -> None:
    settings.SOURCES_DIR = tmp_path / "sources"

    with pytest.raises(InputError):
        crawl_create(data=FILES[name](), source_name="urls.txt")

    assert Crawl.objects.count() == 0
    assert not settings.SOURCES_DIR.exists() or not any(settings.SOURCES_DIR.iterdir())
