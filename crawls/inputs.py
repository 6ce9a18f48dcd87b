"""Read seed URLs, with their titles and tags, from the formats people hand an archive.

- ``text``: URLs anywhere in plain text. A line that is one word is taken as one URL, so a typo
  in a list of URLs is reported with its line; in a line of prose, every http(s) URL is taken
  and the other words are ignored (with ``strict``, every line must be one URL). Blank lines
  and ``#`` comments are skipped.
- ``feed``: RSS 0.9x/1.0/2.0 and Atom 0.3/1.0, read by feedparser: each entry's link, title and
  categories (as tags).
- ``bookmarks``: the Netscape bookmark file format (``<!DOCTYPE NETSCAPE-Bookmark-file-1>``) that
  Chromium, Firefox, Safari and most bookmark services export: each ``<A HREF>``, its text as the
  title and its ``TAGS`` attribute (Firefox, Pinboard) as tags. Read with lxml's HTML parser, at
  any depth (``_read_bookmarks``).
- ``json``: a list of URLs, or of objects with ``url`` and optional ``title`` and ``tags`` (a list
  or a comma-separated string).

A broken entry is reported with its line (text, bookmarks) or its number (feed, JSON, a
bookmarks file deeper than the lines are kept for: ``_read_bookmarks``) and left
out; the valid entries are still read. Each URL is normalized (crawls/seeds.py) and kept once,
the first time it appears; tags of later duplicates are merged in.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from crawls.seeds import (
    MAX_LISTED_PROBLEMS,
    InputError,
    InvalidURL,
    decode_input,
    has_control_character,
    normalize_url,
)

FORMATS = ("text", "feed", "bookmarks", "json")
MAX_TITLE_LENGTH = 512  # characters kept of a title given with a URL
MAX_TAG_LENGTH = 100
# An http(s) URL inside prose: up to white space, quotes or angle brackets (RFC 3986 Appendix C
# names these as delimiters of URLs in text); trailing punctuation is trimmed after matching.
URL_IN_TEXT = re.compile(r"""https?://[^\s<>"'`]+""", re.IGNORECASE)
TRAILING_PUNCTUATION = ".,;:!?)]}'\""
BOOKMARKS_DOCTYPE = "<!doctype netscape-bookmark-file-1>"
FEED_ROOTS = ("<rss", "<feed", "<rdf:rdf")
SNIFF_CHARS = 4096  # how much of the input format detection looks at


@dataclass(frozen=True)
class SeedEntry:
    """One URL to archive, with the title and tags its input gave it."""

    url: str
    title: str = ""
    tags: tuple[str, ...] = ()


@dataclass
class ParsedInput:
    """What an input held: its format, the valid entries in order, and what was left out.

    ``problems`` names the first MAX_LISTED_PROBLEMS things left out: whole entries, which
    ``rejected`` counts, and tags of entries that were kept, which ``tags_left_out`` counts.
    """

    format: str
    entries: list[SeedEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rejected: int = 0
    tags_left_out: int = 0

    def problem_summary(self) -> str:
        """The listed problems in one line, with a count of the ones not listed."""
        more = problems_not_listed(self.report())
        return "; ".join(self.problems) + (f" (and {more} more)" if more > 0 else "")

    def report(self) -> dict:
        """What a crawl keeps of the reading (``Crawl.input_report``; ``left_out_headline``
        says it in words)."""
        return {
            "format": self.format,
            "accepted": len(self.entries),
            "rejected": self.rejected,
            "tags_left_out": self.tags_left_out,
            "problems": self.problems,
        }


def problems_not_listed(report: dict) -> int:
    """How many of what an input report (``ParsedInput.report``) left out its ``problems`` do
    not name (it names the first MAX_LISTED_PROBLEMS)."""
    left_out = report.get("rejected", 0) + report.get("tags_left_out", 0)
    return max(left_out - len(report.get("problems", [])), 0)


def left_out_headline(report: dict) -> str:
    """What an input report (``ParsedInput.report``) left out, in words: "2 entries left out",
    "1 entry left out, 3 tags left out"; "" when nothing was. A report saved before tags were
    counted apart has no ``tags_left_out``."""
    entries, tags = report.get("rejected", 0), report.get("tags_left_out", 0)
    parts = [f"{entries} {'entry' if entries == 1 else 'entries'} left out"] if entries else []
    if tags:
        parts.append(f"{tags} {'tag' if tags == 1 else 'tags'} left out")
    return ", ".join(parts)


def read_input(
    data: bytes, *, source: str, parser: str = "auto", strict: bool = False
) -> ParsedInput:
    """Read the seed entries of ``data``, in the format ``parser`` names or, with "auto", the
    one detect_format finds.

    ``source`` names the input in messages ("bookmarks.html", "stdin"). Raises InputError for
    input that is not UTF-8 text (crawls/seeds.py's decode_input), an unknown parser, a file
    that is not of the format at all (JSON that does not parse, a feed with no entries), input
    with no valid entry (naming the bad ones), and with ``strict`` for any bad entry at all.
    """
    text = decode_input(data, source=source)
    if parser == "auto":
        parser = detect_format(text)
    if parser not in PARSERS:
        raise InputError(f"unknown input format {parser!r}: one of auto, {', '.join(FORMATS)}")
    parsed = ParsedInput(format=parser)
    collector = _Collector(parsed, source, strict=strict)
    PARSERS[parser](text, collector)
    if parsed.problems and (strict or not parsed.entries):
        raise InputError(parsed.problem_summary())
    if not parsed.entries:
        raise InputError(f"{source} contains no URLs")
    return parsed


def parse_seed_text(data: bytes, *, source: str) -> list[str]:
    """Return the URLs of plain text ``data``, normalized, each once, in input order.

    Strict: raises InputError listing the bad lines when any line is not a valid URL, so that
    nothing is half added (for URLs typed on the command line), and as read_input does.
    """
    parsed = read_input(data, source=source, parser="text", strict=True)
    return [entry.url for entry in parsed.entries]


def is_valid_tag(name: str) -> bool:
    """Tell whether ``name`` can be a tag: printable, 1 to MAX_TAG_LENGTH characters."""
    return 0 < len(name) <= MAX_TAG_LENGTH and name.isprintable()


def detect_format(text: str) -> str:
    """Return the format ``text`` looks like: "json" when it starts with [ or {, "bookmarks"
    with the Netscape doctype, "feed" when its root is rss, feed or rdf:RDF, else "text"."""
    head = text[:SNIFF_CHARS].lstrip().lower()
    if head.startswith(("[", "{")):
        return "json"
    if BOOKMARKS_DOCTYPE in head:
        return "bookmarks"
    if head.startswith("<") and any(root in head for root in FEED_ROOTS):
        return "feed"
    return "text"


class _Collector:
    """Gathers entries into a ParsedInput: normalizes URLs, merges duplicates, records
    problems under a location such as "line 4" or "entry 2"."""

    def __init__(self, parsed: ParsedInput, source: str, *, strict: bool) -> None:
        self.parsed = parsed
        self.source = source
        self.strict = strict  # every text line must be one URL: no prose around them
        self.by_url: dict[str, int] = {}

    def add(self, raw_url: str, where: str, *, title: str = "", tags: Iterable[str] = ()) -> bool:
        """Keep the entry (merged into an earlier one of the same URL); False when its URL is
        invalid and it is left out."""
        try:
            url = normalize_url(raw_url)
        except InvalidURL as error:
            self.problem(where, str(error))
            return False
        clean_tags = tuple(self._clean_tags(tags, where))
        title = " ".join(title.split())[:MAX_TITLE_LENGTH]
        if url in self.by_url:
            index = self.by_url[url]
            first = self.parsed.entries[index]
            merged = tuple(dict.fromkeys(first.tags + clean_tags))
            self.parsed.entries[index] = SeedEntry(url, first.title or title, merged)
            return True
        self.by_url[url] = len(self.parsed.entries)
        self.parsed.entries.append(SeedEntry(url, title, clean_tags))
        return True

    def problem(self, where: str, message: str, *, entry_kept: bool = False) -> None:
        """Record what was left out at ``where``: the entry, or (``entry_kept``) a tag of it."""
        if entry_kept:
            self.parsed.tags_left_out += 1
        else:
            self.parsed.rejected += 1
        if len(self.parsed.problems) < MAX_LISTED_PROBLEMS:
            place = f"{self.source} {where}" if where else self.source
            self.parsed.problems.append(f"{place}: {message}")

    def _clean_tags(self, tags: Iterable[str], where: str) -> Iterable[str]:
        for raw in tags:
            name = " ".join(str(raw).split())
            if not name:
                continue
            if not is_valid_tag(name):
                message = f"tag {name[:40]!r} left out (printable, at most 100 chars)"
                self.problem(where, message, entry_kept=True)
                continue
            yield name


def _read_text(text: str, collector: _Collector) -> None:
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"line {number}"
        if collector.strict or len(line.split()) == 1:
            collector.add(line, where)
            continue
        for match in URL_IN_TEXT.finditer(line):
            collector.add(match.group().rstrip(TRAILING_PUNCTUATION), where)


def _read_feed(text: str, collector: _Collector) -> None:
    import feedparser  # here, not at the top: only a feed needs it (3 MB in every process)

    # A stream, not the string: feedparser fetches a string that looks like a URL or a path.
    feed = feedparser.parse(io.BytesIO(text.encode("utf-8")), resolve_relative_uris=False)
    if feed.bozo and not feed.entries:
        raise InputError(f"{collector.source} is not a feed Vellum can read: {feed.bozo_exception}")
    if feed.bozo:
        collector.problem("", f"read up to an error: {feed.bozo_exception}")
    for number, entry in enumerate(feed.entries, start=1):
        title = entry.get("title", "")
        where = f"entry {number}" + (f" ({title[:40]!r})" if title else "")
        link = entry.get("link") or _first_alternate(entry)
        if not link:
            collector.problem(where, "no link")
            continue
        tags = [tag.get("term") or tag.get("label") or "" for tag in entry.get("tags", [])]
        collector.add(link, where, title=title, tags=tags)


def _first_alternate(entry) -> str:
    for link in entry.get("links", []):
        if link.get("rel", "alternate") == "alternate" and link.get("href"):
            return link["href"]
    return ""


def _read_bookmarks(text: str, collector: _Collector) -> None:
    """Read each ``<A HREF>`` of a bookmarks export, however many there are.

    Exports leave every ``<DT>`` open, and libxml2 nests each in the one before it: a folder of
    N bookmarks is a tree N levels deep. lxml's own tree stops, silently, at 256 levels (one
    folder of 1,000 bookmarks, written as Chromium writes them, gave 252), so the file is
    parsed as pages are (core/extractors/html_tree.py), at any depth. A file as deep as
    MAX_TREE_DEPTH levels is read by a tree that keeps no line numbers: its problems are placed
    by the link's number instead (the n-th ``<A HREF>``).
    """
    # Here, not at the top: only a bookmarks file needs lxml (5 MB in every process).
    from core.extractors.html_tree import parse_html

    try:
        root = parse_html(text)
    except ValueError as error:  # a lone surrogate; a file of no element is read as empty
        raise InputError(f"{collector.source} is not a bookmarks file: {error}") from None
    links = (anchor for anchor in root.iter("a") if anchor.get("href") is not None)
    for number, anchor in enumerate(links, start=1):
        href = anchor.get("href")
        where = f"line {anchor.sourceline}" if anchor.sourceline else f"entry {number}"
        tags = (anchor.get("tags") or "").split(",")
        collector.add(href, where, title=anchor.text_content(), tags=tags)


def _read_json(text: str, collector: _Collector) -> None:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{collector.source} is not valid JSON (line {error.lineno}, column {error.colno}: "
            f"{error.msg})"
        ) from None
    except RecursionError:
        # Python's decoder recurses once per level: some 1,000 levels exhaust its stack.
        raise InputError(f"{collector.source} is JSON nested too deeply") from None
    if not isinstance(document, list):
        raise InputError(
            f"{collector.source}: expected a JSON list of URLs or of objects with a url, "
            f"not {type(document).__name__}"
        )
    for number, item in enumerate(document, start=1):
        where = f"entry {number}"
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and has_control_character(url):  # one entry, one URL
            collector.problem(where, "a URL cannot hold a line break or other control character")
        elif isinstance(item, str):
            collector.add(item, where)
        elif isinstance(item, dict) and isinstance(item.get("url"), str):
            tags = item.get("tags") or []
            if isinstance(tags, str):
                tags = tags.split(",")
            tags_readable = isinstance(tags, list)
            title = item.get("title")
            kept = collector.add(item["url"], where, title=title if isinstance(title, str) else "",
                                 tags=tags if tags_readable else [])  # fmt: skip
            if kept and not tags_readable:  # of an entry left out, nothing more
                message = "tags left out: they must be a list or a comma-separated string"
                collector.problem(where, message, entry_kept=True)
        else:
            collector.problem(where, "neither a URL nor an object with a url")


PARSERS: dict[str, Callable[[str, _Collector], None]] = {
    "text": _read_text,
    "feed": _read_feed,
    "bookmarks": _read_bookmarks,
    "json": _read_json,
}
