"""Seed URLs: normalization (crawls/seeds.py normalize_url) and reading them from text."""

from __future__ import annotations

import pytest

from crawls.inputs import parse_seed_text
from crawls.seeds import MAX_URL_LENGTH, InputError, InvalidURL, normalize_url

# --- normalize_url: what it changes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("HTTP://Example.COM/Path", "http://example.com/Path"),  # path case is significant
        ("https://EXAMPLE.com/a?Q=B", "https://example.com/a?Q=B"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:443/a", "http://example.com:443/a"),  # only the scheme's default
        ("https://example.com:8443/a", "https://example.com:8443/a"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com?q=1", "http://example.com/?q=1"),
        ("http://example.com/a#section", "http://example.com/a"),
        ("http://example.com/#", "http://example.com/"),
        ("http://Bücher.example/", "http://xn--bcher-kva.example/"),
        ("http://BÜCHER.example/", "http://xn--bcher-kva.example/"),
        ("http://example.com/straße", "http://example.com/stra%C3%9Fe"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/?q=café", "http://example.com/?q=caf%C3%A9"),
        ("http://example.com/already%20encoded", "http://example.com/already%20encoded"),
        ("http://[2001:DB8::1]:8080/x", "http://[2001:db8::1]:8080/x"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://127.0.0.1:8000/page", "http://127.0.0.1:8000/page"),
        ("  http://example.com/padded  \t", "http://example.com/padded"),
    ],
)
def test_normalize_url(raw: str, normalized: str) -> None:
    assert normalize_url(raw) == normalized


def test_normalize_url_is_idempotent() -> None:
    once = normalize_url("HTTP://Bücher.Example:80/straße?q=é#frag")

    assert normalize_url(once) == once


def test_two_spellings_of_one_url_normalize_to_the_same() -> None:
    assert normalize_url("HTTP://EXAMPLE.COM:80") == normalize_url("http://example.com/#top")


def test_url_of_exactly_the_maximum_length_is_accepted() -> None:
    prefix = "http://example.com/"
    url = prefix + "a" * (MAX_URL_LENGTH - len(prefix))

    assert normalize_url(url) == url


# --- normalize_url: what it refuses --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty URL"),
        ("   ", "empty URL"),
        ("not a url", "not an absolute URL"),
        ("example.com", "not an absolute URL (start it with http:// or https://)"),
        ("/just/a/path", "not an absolute URL"),
        ("file:///etc/passwd", "only http and https URLs can be archived, not file:"),
        ("javascript:alert(1)", "only http and https URLs can be archived, not javascript:"),
        ("data:text/html,<b>hi</b>", "only http and https URLs can be archived, not data:"),
        ("ftp://example.com/file", "only http and https URLs can be archived, not ftp:"),
        ("http://user:pass@example.com/", "credentials"),
        ("http://user@example.com/", "credentials"),
        ("http://" + "a" * 64 + ".example/", "invalid host name"),
        ("http://-bad-.example/", "invalid host name"),
        ("http://xn--zz.example/", "invalid host name"),
        ("http://exa mple.com/", "invalid host name"),
        ("http://a..b/", "invalid host name"),
        ("http:///path-only", "has no host"),
        ("http://example.com:99999/", "not a valid URL"),
        ("http://[::1/", "not a valid URL"),
    ],
)
def test_normalize_url_refuses(raw: str, reason: str) -> None:
    with pytest.raises(InvalidURL) as caught:
        normalize_url(raw)

    message = str(caught.value)
    assert reason in message
    assert "\n" not in message


def test_overlong_url_is_refused_with_the_limit_in_the_message() -> None:
    url = "http://example.com/" + "a" * MAX_URL_LENGTH

    with pytest.raises(InvalidURL, match=f"longer than {MAX_URL_LENGTH} characters"):
        normalize_url(url)


def test_url_that_grows_past_the_limit_when_encoded_is_refused() -> None:
    url = "http://example.com/" + "é" * 1000  # 1019 characters, about 6000 once encoded

    with pytest.raises(InvalidURL, match="longer than 2048 characters once percent-encoded"):
        normalize_url(url)


def test_message_quotes_a_long_url_shortened_on_one_line() -> None:
    url = "ftp://example.com/" + "x" * 500

    with pytest.raises(InvalidURL) as caught:
        normalize_url(url)

    message = str(caught.value)
    assert len(message) < 200
    assert "…" in message


# --- parse_seed_text -----------------------------------------------------------------------------


def test_parse_skips_comments_and_blank_lines() -> None:
    data = (
        b"# my reading list\n\nhttp://a.example/\n   \n  # indented comment\nhttp://b.example/x\n"
    )

    assert parse_seed_text(data, source="urls.txt") == [
        "http://a.example/",
        "http://b.example/x",
    ]


def test_parse_keeps_each_url_once_in_first_seen_order() -> None:
    data = (
        b"http://b.example/\n"
        b"HTTP://A.EXAMPLE:80\n"
        b"http://b.example/#again\n"
        b"http://a.example/\n"
        b"http://c.example/\n"
    )

    assert parse_seed_text(data, source="urls.txt") == [
        "http://b.example/",
        "http://a.example/",
        "http://c.example/",
    ]


def test_parse_accepts_a_byte_order_mark_and_crlf() -> None:
    data = "\ufeffhttp://a.example/\r\nhttp://b.example/\r\n".encode()

    assert parse_seed_text(data, source="urls.txt") == ["http://a.example/", "http://b.example/"]


def test_parse_normalizes_every_url() -> None:
    data = "http://Bücher.example:80/straße#x\n".encode()

    assert parse_seed_text(data, source="urls.txt") == ["http://xn--bcher-kva.example/stra%C3%9Fe"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "urls.txt contains no URLs"),
        (b"\n\n   \n", "urls.txt contains no URLs"),
        (b"# only\n# comments\n", "urls.txt contains no URLs"),
        (b"\xef\xbb\xbf", "urls.txt contains no URLs"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "urls.txt is binary data, not a list of URLs"),
        (b"http://a.example/\n\x00\n", "urls.txt is binary data"),
        (
            b"http://a.example/\nhttp://b.example/caf\xe9\n",
            "urls.txt is not UTF-8 text (line 2, byte 38)",
        ),
    ],
)
def test_parse_refuses_input_without_usable_urls(data: bytes, message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_seed_text(data, source="urls.txt")

    assert message in str(caught.value)


def test_parse_names_the_source_and_line_of_a_bad_url() -> None:
    data = b"# list\nhttp://a.example/\n\nexample.com\n"

    with pytest.raises(InputError) as caught:
        parse_seed_text(data, source="bookmarks.txt")

    assert str(caught.value) == (
        "bookmarks.txt line 4: 'example.com' is not an absolute URL "
        "(start it with http:// or https://)"
    )


def test_parse_lists_every_bad_line() -> None:
    data = b"ftp://x.example/\nhttp://ok.example/\nnot a url\nhttp://u:p@y.example/\n"

    with pytest.raises(InputError) as caught:
        parse_seed_text(data, source="stdin")

    message = str(caught.value)
    assert "stdin line 1: 'ftp://x.example/'" in message
    assert "stdin line 3: 'not a url'" in message
    assert "stdin line 4: 'http://u:p@y.example/'" in message
    assert "line 2" not in message
    assert "\n" not in message


def test_parse_lists_five_bad_lines_and_counts_the_rest() -> None:
    data = b"".join(f"bad{n}\n".encode() for n in range(1, 9))

    with pytest.raises(InputError) as caught:
        parse_seed_text(data, source="urls.txt")

    message = str(caught.value)
    for number in range(1, 6):
        assert f"urls.txt line {number}: 'bad{number}'" in message
    assert "line 6" not in message
    assert message.endswith("(and 3 more)")
