"""Reading seeds from text, feeds, bookmarks exports and JSON (crawls/inputs.py), including the
real bookmarks file Debian's chromium package ships and malformed variants of each format."""

# ruff: noqa: E501  (the sample files keep their long lines, as browsers write them)

from __future__ import annotations

from pathlib import Path

import pytest

from crawls.inputs import SeedEntry, detect_format, left_out_headline, read_input
from crawls.seeds import InputError

CHROMIUM_BOOKMARKS = Path("/usr/share/chromium/initial_bookmarks.html")

# As Firefox exports bookmarks (Bookmarks > Manage > Export Bookmarks to HTML): nested folders,
# TAGS on tagged bookmarks, and "place:" queries that are no web pages.
FIREFOX_EXPORT = """<!DOCTYPE NETSCAPE-Bookmark-file-1>
<!-- This is an automatically generated file.
     It will be read and overwritten.
     DO NOT EDIT! -->
<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'self'; script-src 'none'; img-src data: *; object-src 'none'"></meta>
<TITLE>Bookmarks</TITLE>
<H1>Bookmarks Menu</H1>

<DL><p>
    <DT><A HREF="place:parent=menu________&sort=12&maxResults=10" ADD_DATE="1700000000">Recent Tags</A>
    <DT><H3 ADD_DATE="1700000000" LAST_MODIFIED="1700000001">Reading</H3>
    <DL><p>
        <DT><A HREF="https://docs.python.org/3/library/json.html" ADD_DATE="1700000002" TAGS="python,docs">json — JSON encoder and decoder</A>
        <DT><A HREF="https://www.rfc-editor.org/rfc/rfc8493" ADD_DATE="1700000003">RFC 8493: The BagIt File Packaging Format</A>
        <DD>A note on the bookmark above
        <DT><A HREF="https://DOCS.python.org:443/3/library/json.html#module-json" TAGS="stdlib">json again</A>
    </DL><p>
    <DT><A HREF="javascript:void(0)">A bookmarklet</A>
</DL>
"""

ATOM_FEED = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Example Engineering</title>
  <link href="https://blog.example.com/"/>
  <updated>2026-11-20T10:00:00Z</updated>
  <id>urn:uuid:60a76c80-d399-11d9-b93C-0003939e0af6</id>
  <entry>
    <title>Preserving the web, one WARC at a time</title>
    <link rel="alternate" type="text/html" href="https://blog.example.com/2026/warc"/>
    <link rel="enclosure" href="https://blog.example.com/2026/warc.mp3"/>
    <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
    <updated>2026-11-20T10:00:00Z</updated>
    <category term="archiving"/>
    <category term="warc"/>
  </entry>
  <entry>
    <title>Fixity, explained</title>
    <link href="https://blog.example.com/2026/fixity"/>
    <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6b</id>
    <updated>2026-11-18T10:00:00Z</updated>
  </entry>
</feed>
"""

RSS_FEED = """<?xml version="1.0"?>
<rss version="2.0">
  <channel>
    <title>Example News</title>
    <link>https://news.example.org/</link>
    <description>News</description>
    <item>
      <title>First story</title>
      <link>https://news.example.org/1</link>
      <category>world</category>
    </item>
    <item>
      <title>A story without a link</title>
      <description>Only text here.</description>
    </item>
    <item>
      <title>Second story</title>
      <link>https://news.example.org/2</link>
    </item>
  </channel>
</rss>
"""


def read(text: str, source: str = "input", **options):
    return read_input(text.encode(), source=source, **options)


# --- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (ATOM_FEED, "feed"),
        (RSS_FEED, "feed"),
        (FIREFOX_EXPORT, "bookmarks"),
        ('\n  ["https://a.example/"]', "json"),
        ('{"url": "https://a.example/"}', "json"),
        ("https://a.example/\n", "text"),
        ("<p>see https://a.example/</p>", "text"),
    ],
)
def test_the_format_is_detected(text: str, expected: str) -> None:
    assert detect_format(text) == expected


# --- bookmarks ----------------------------------------------------------------------------------


@pytest.mark.skipif(not CHROMIUM_BOOKMARKS.exists(), reason="Debian's chromium is not installed")
def test_chromiums_own_bookmarks_export_is_read() -> None:
    parsed = read_input(CHROMIUM_BOOKMARKS.read_bytes(), source="initial_bookmarks.html")

    assert parsed.format == "bookmarks"
    assert parsed.entries[:3] == [
        SeedEntry("https://www.debian.org/", "Debian.org"),
        SeedEntry("https://www.debian.org/News/", "Latest News"),
        SeedEntry("https://www.debian.org/support", "Help"),
    ]
    assert parsed.rejected == 0


def test_a_firefox_export_keeps_titles_and_tags_and_names_what_it_left_out() -> None:
    parsed = read(FIREFOX_EXPORT, source="bookmarks.html")

    assert parsed.entries == [
        SeedEntry(
            "https://docs.python.org/3/library/json.html",
            "json — JSON encoder and decoder",
            ("python", "docs", "stdlib"),  # the duplicate's tags are merged into the first
        ),
        SeedEntry(
            "https://www.rfc-editor.org/rfc/rfc8493", "RFC 8493: The BagIt File Packaging Format"
        ),
    ]
    assert parsed.rejected == 2
    assert parsed.problems[0].startswith("bookmarks.html line 12: 'place:parent=menu")
    assert parsed.problems[1] == (
        "bookmarks.html line 20: 'javascript:void(0)': only http and https URLs can be "
        "archived, not javascript:"
    )


def one_folder_export(count: int, first_href: str, last_href: str) -> str:
    """A bookmarks file as Chromium exports one folder of ``count`` bookmarks (every <DT> left
    open), the first one linking to ``first_href`` and the last to ``last_href``."""
    rows = [
        f'        <DT><A HREF="https://example.org/page/{n}" ADD_DATE="1700000000">Page {n}</A>'
        for n in range(2, count)
    ]
    first = f'        <DT><A HREF="{first_href}" ADD_DATE="1700000000">The first</A>'
    last = f'        <DT><A HREF="{last_href}" ADD_DATE="1700000000">The last</A>'
    return "\n".join(
        [
            "<!DOCTYPE NETSCAPE-Bookmark-file-1>",
            '<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">',
            "<TITLE>Bookmarks</TITLE>",
            "<H1>Bookmarks</H1>",
            "<DL><p>",
            '    <DT><H3 ADD_DATE="1700000000">Bookmarks bar</H3>',
            '    <DL><p><DT><A NAME="no-link">An anchor without a link</A>',
            first,
            *rows,
            last,
            "    </DL><p>",
            "</DL><p>",
        ]
    )


@pytest.mark.parametrize(
    ("count", "first_place", "last_place"),
    [
        (300, "line 8", "line 307"),  # past the 256 levels lxml's own tree stops at: 252 read
        (3000, "entry 1", "entry 3000"),  # past html_tree's 2,048: no line numbers there
    ],
)
def test_every_bookmark_of_a_large_folder_is_read(
    count: int, first_place: str, last_place: str
) -> None:
    text = one_folder_export(count, first_href="place:x", last_href="javascript:void(0)")

    parsed = read(text, source="bookmarks.html")

    assert [entry.url for entry in parsed.entries] == [
        f"https://example.org/page/{n}" for n in range(2, count)
    ]
    assert parsed.entries[-1].title == f"Page {count - 1}"
    assert parsed.rejected == 2
    assert parsed.problems == [
        f"bookmarks.html {first_place}: 'place:x': only http and https URLs can be archived, "
        "not place:",
        f"bookmarks.html {last_place}: 'javascript:void(0)': only http and https URLs can be "
        "archived, not javascript:",
    ]


def test_a_truncated_bookmarks_file_gives_what_it_holds() -> None:
    cut = FIREFOX_EXPORT[: FIREFOX_EXPORT.index("RFC 8493") + 20]

    parsed = read(cut, source="bookmarks.html")

    assert [entry.url for entry in parsed.entries] == [
        "https://docs.python.org/3/library/json.html",
        "https://www.rfc-editor.org/rfc/rfc8493",
    ]


def test_a_bookmarks_file_without_a_web_link_is_refused() -> None:
    text = FIREFOX_EXPORT.split("<DL>")[0] + '<DL><DT><A HREF="place:x">Only a query</A></DL>'

    with pytest.raises(InputError, match=r"^bookmarks.html line 11: 'place:x'"):
        read(text, source="bookmarks.html")


# --- feeds --------------------------------------------------------------------------------------


def test_an_atom_feed_gives_each_entrys_page_title_and_categories() -> None:
    parsed = read(ATOM_FEED, source="atom.xml")

    assert parsed.format == "feed"
    assert parsed.entries == [
        SeedEntry(
            "https://blog.example.com/2026/warc",
            "Preserving the web, one WARC at a time",
            ("archiving", "warc"),
        ),
        SeedEntry("https://blog.example.com/2026/fixity", "Fixity, explained"),
    ]


def test_an_rss_item_without_a_link_is_named_and_left_out() -> None:
    parsed = read(RSS_FEED, source="news.rss")

    assert [entry.url for entry in parsed.entries] == [
        "https://news.example.org/1",
        "https://news.example.org/2",
    ]
    assert parsed.entries[0].tags == ("world",)
    assert parsed.problems == ["news.rss entry 2 ('A story without a link'): no link"]


def test_a_feed_cut_off_mid_entry_keeps_the_entries_before_the_break() -> None:
    cut = ATOM_FEED[: ATOM_FEED.index("<title>Fixity")]

    parsed = read(cut, source="atom.xml")

    assert parsed.entries[0].url == "https://blog.example.com/2026/warc"
    assert parsed.rejected >= 1
    assert parsed.problems[0].startswith("atom.xml: read up to an error:")


def test_a_feed_with_a_bad_link_names_the_entry() -> None:
    text = RSS_FEED.replace("https://news.example.org/2", "ftp://news.example.org/2")

    parsed = read(text, source="news.rss")

    assert [entry.url for entry in parsed.entries] == ["https://news.example.org/1"]
    assert parsed.problems[1] == (
        "news.rss entry 3 ('Second story'): 'ftp://news.example.org/2': only http and https "
        "URLs can be archived, not ftp:"
    )


def test_a_broken_feed_with_no_usable_entry_is_refused_with_the_parsers_reason() -> None:
    with pytest.raises(InputError) as caught:
        read('<?xml version="1.0"?><rss><channel><item><title>x', source="feed.xml")

    assert str(caught.value) == (
        "feed.xml: read up to an error: <unknown>:1:66: no element found; feed.xml entry 1: no link"
    )


def test_a_feed_named_by_a_url_is_never_fetched() -> None:
    # feedparser fetches a string that looks like a URL: the input must be read as a document.
    with pytest.raises(InputError, match="not a feed"):
        read("http://127.0.0.1:9/feed.xml", source="feed.xml", parser="feed")


# --- JSON ---------------------------------------------------------------------------------------


def test_json_lists_of_urls_and_of_objects() -> None:
    text = """[
        "https://a.example/",
        {"url": "https://b.example/", "title": "B", "tags": ["one", "two"]},
        {"url": "https://c.example/", "tags": "x, y"},
        {"title": "no url"},
        42
    ]"""

    parsed = read(text, source="links.json")

    assert parsed.entries == [
        SeedEntry("https://a.example/"),
        SeedEntry("https://b.example/", "B", ("one", "two")),
        SeedEntry("https://c.example/", "", ("x", "y")),
    ]
    assert parsed.problems == [
        "links.json entry 4: neither a URL nor an object with a url",
        "links.json entry 5: neither a URL nor an object with a url",
    ]


def test_json_that_does_not_parse_names_the_line_and_column() -> None:
    with pytest.raises(InputError, match=r"^links.json is not valid JSON \(line 2, column 1: "):
        read('["https://a.example/",\n]', source="links.json")


def test_json_nested_too_deeply_is_refused_saying_so() -> None:
    """50,000 nested arrays once exhausted the decoder's recursion (RecursionError, a 500)."""
    with pytest.raises(InputError, match=r"^links.json is JSON nested too deeply$"):
        read("[" * 50_000 + "]" * 50_000, source="links.json")


def test_a_json_entry_holding_a_line_break_is_left_out_not_split() -> None:
    parsed = read('["https://c.example/", {"url": "http://a.example/\\nhttp://b.example/"}]')

    assert [entry.url for entry in parsed.entries] == ["https://c.example/"]
    assert parsed.problems == [
        "input entry 2: a URL cannot hold a line break or other control character"
    ]


def test_json_of_another_shape_is_refused() -> None:
    with pytest.raises(InputError, match="expected a JSON list of URLs or of objects with a url"):
        read('{"url": "https://a.example/"}', source="links.json")


def test_an_invalid_tag_is_named_and_the_entry_kept() -> None:
    parsed = read('[{"url": "https://a.example/", "tags": ["ok", "' + "x" * 101 + '"]}]')

    assert parsed.entries == [SeedEntry("https://a.example/", "", ("ok",))]
    assert parsed.problems[0].startswith("input entry 1: tag 'xxxx")
    # The entry was kept: a tag was left out, not the entry.
    assert (parsed.rejected, parsed.tags_left_out) == (0, 1)
    assert left_out_headline(parsed.report()) == "1 tag left out"


def test_what_was_left_out_counts_entries_apart_from_the_tags_of_kept_ones() -> None:
    parsed = read(
        '[{"url": "https://a.example/", "tags": 5}, {"url": "ftp://b.example/", "tags": 6},'
        ' {"url": "https://c.example/", "tags": ["' + "y" * 101 + '", "' + "z" * 101 + '"]}]'
    )

    assert [entry.url for entry in parsed.entries] == ["https://a.example/", "https://c.example/"]
    assert parsed.problems == [
        "input entry 1: tags left out: they must be a list or a comma-separated string",
        "input entry 2: 'ftp://b.example/': only http and https URLs can be archived, not ftp:",
        "input entry 3: tag 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy' left out (printable, at "
        "most 100 chars)",
        "input entry 3: tag 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz' left out (printable, at "
        "most 100 chars)",
    ]
    assert left_out_headline(parsed.report()) == "1 entry left out, 3 tags left out"
    assert left_out_headline({"rejected": 2}) == "2 entries left out"  # saved before tags counted
    assert left_out_headline({"rejected": 0, "tags_left_out": 0}) == ""


# --- text ---------------------------------------------------------------------------------------


def test_urls_are_found_anywhere_in_prose() -> None:
    text = (
        "Read https://a.example/post, and (see https://b.example/x?q=1).\n"
        "Nothing to archive on this line.\n"
        "https://c.example/\n"
    )

    parsed = read(text, source="notes.txt")

    assert [entry.url for entry in parsed.entries] == [
        "https://a.example/post",
        "https://b.example/x?q=1",
        "https://c.example/",
    ]
    assert parsed.rejected == 0


def test_a_bad_line_in_a_list_is_named_and_the_rest_kept() -> None:
    parsed = read("https://a.example/\nexample.com/page\nhttps://b.example/\n", source="urls.txt")

    assert [entry.url for entry in parsed.entries] == ["https://a.example/", "https://b.example/"]
    assert parsed.problems == [
        "urls.txt line 2: 'example.com/page' is not an absolute URL (start it with http:// or "
        "https://)"
    ]


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(InputError, match="unknown input format 'csv'"):
        read("https://a.example/", parser="csv")
