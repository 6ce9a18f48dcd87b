"""What ``manage.py add`` and ``schedule add`` share: the input (URLs, a file or stdin) and a
crawl's options on the command line."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import CommandError

from core.services.crawls import (
    MAX_BEHAVIOUR_SECONDS,
    MAX_DEPTH,
    MAX_SCROLL_PAGES,
    CrawlOptions,
)
from crawls.choices import CrawlScope
from crawls.inputs import FORMATS

MAX_INPUT_BYTES = 64 * 1024 * 1024
ARGUMENTS = "command line"  # the source name of URLs given as arguments


def add_crawl_arguments(parser) -> None:
    """Add the input (URLs, --file, -) and the crawl options to ``parser``."""
    parser.add_argument("urls", nargs="*", metavar="URL", help="URLs to archive, or - for stdin.")
    parser.add_argument("--file", type=Path, help="A file of URLs: text, feed, bookmarks or JSON.")
    parser.add_argument(
        "--parser",
        choices=["auto", *FORMATS],
        default="auto",
        help="The input's format (default: detected). feed: RSS or Atom; bookmarks: the "
        "Netscape format browsers export; json: a list of URLs or of {url, title, tags}.",
    )
    parser.add_argument(
        "--depth", type=int, default=0, help=f"Links to follow from each URL (0-{MAX_DEPTH})."
    )
    parser.add_argument(
        "--any-host", action="store_true", help="With --depth, follow links to other hosts too."
    )
    parser.add_argument("--tag", action="append", default=[], help="Tag(s), comma-separated.")
    parser.add_argument("--priority", type=int, default=0, help="Higher runs first.")
    parser.add_argument(
        "--webhook", default="", help="POST the crawl's report as JSON here when it seals."
    )
    parser.add_argument(
        "--email", default="", help="Email the crawl's report to these addresses (a,b)."
    )
    parser.add_argument(
        "--profile",
        default="",
        help="The profile (steps to run) by name; default: the one marked default, else "
        "every extractor. manage.py profile list shows them.",
    )
    parser.add_argument(
        "--persona",
        default="",
        help="Sign in as this persona (its cookies, headers, user agent); manage.py persona "
        "list shows them. Default: none.",
    )
    # Taken as typed: check_crawl_options reads the numbers, and names what is wrong in one line.
    parser.add_argument(
        "--behaviour-seconds",
        metavar="SECONDS",
        help="Seconds the browser extractors (screenshot, pdf, dom, singlefile) may spend on a "
        "page before capturing it: scroll to the bottom, load lazy images, wait for the network "
        f"(0-{MAX_BEHAVIOUR_SECONDS}; 0: none; default: BEHAVIOUR_SECONDS); never more than a "
        "quarter of the extractor's timeout.",
    )
    parser.add_argument(
        "--scroll-pages",
        metavar="N",
        help="Times an infinite scroll may grow while a page is scrolled "
        f"(0-{MAX_SCROLL_PAGES}; default: SCROLL_PAGE_LIMIT).",
    )
    parser.add_argument(
        "--only-changes",
        action="store_true",
        help="Keep only changes: a page that serves the same bytes as its last sealed capture "
        "is recorded as a small capture pointing at that one (a WARC revisit), not archived "
        "again. Meant for schedules.",
    )


def add_politeness_arguments(parser) -> None:
    """Add a crawl's politeness and scope options (``add`` and ``schedule add``)."""
    parser.add_argument(
        "--scope",
        choices=CrawlScope.values,
        default=CrawlScope.HOST,
        help="With --depth, which links to follow: page (none), prefix (under a seed's "
        "directory), host (the page's own host, the default), domain (a seed's domain and its "
        "subdomains), any (like --any-host).",
    )
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="Also follow links matching: a regular expression, or a SURT prefix written "
        "surt:org,example)/path (repeatable).",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="Never follow links matching (as --include; repeatable); wins over everything.",
    )
    parser.add_argument(
        "--robots",
        action="store_true",
        help="Obey robots.txt (RFC 9309): disallowed URLs are skipped and listed in the report.",
    )
    parser.add_argument(
        "--max-pages", type=int, metavar="N", help="Archive at most N pages (seeds included)."
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        metavar="BYTES",
        help="Stop following links once the crawl's results wrote BYTES bytes.",
    )
    parser.add_argument(
        "--host-concurrency",
        type=int,
        metavar="N",
        help="Results of one host run at once, at most HOST_CONCURRENCY (default: that).",
    )
    parser.add_argument(
        "--host-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="Seconds between the starts of two fetches of one host (default 0).",
    )


def read_crawl_input(urls: list[str], file: Path | None) -> tuple[bytes, str]:
    """Return the raw input and its name; exactly one source may be given.

    A file or stdin is read up to MAX_INPUT_BYTES; a larger one is refused (CommandError)
    rather than cut short in the middle of a line.
    """
    sources = bool(urls) + (file is not None)
    if sources != 1 or (urls and "-" in urls and len(urls) > 1):
        raise CommandError("give URLs, --file PATH, or - (stdin): exactly one of them")
    if urls == ["-"]:
        data, name, shown = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1), "stdin", "stdin"
    elif file is not None:
        try:
            with open(file, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
        except OSError as error:
            raise CommandError(f"cannot read {file}: {error.strerror}") from None
        name, shown = file.name, str(file)
    else:
        return "\n".join(urls).encode(), ARGUMENTS
    if len(data) > MAX_INPUT_BYTES:
        raise CommandError(f"{shown} is larger than {MAX_INPUT_BYTES // 2**20} MiB")
    return data, name


def crawl_keywords(options: dict, source_name: str, depth: int) -> dict:
    """The keyword arguments of crawl_create and schedule_create from the parsed options.

    URLs given as arguments are plain text, and one bad URL among them refuses them all (a typo
    there is fixed by typing again); a file's bad entries are left out and named.
    """
    from_arguments = source_name == ARGUMENTS
    return {
        "parser": "text" if from_arguments else options["parser"],
        "strict": from_arguments,
        "options": CrawlOptions(
            depth=depth,
            any_host=options["any_host"],
            tags=options["tag"],
            priority=options["priority"],
            profile=options["profile"],
            notify_webhook=options["webhook"],
            notify_email=options["email"],
            behaviour_seconds=options["behaviour_seconds"],
            scroll_page_limit=options["scroll_pages"],
            only_changes=options["only_changes"],
            scope=options.get("scope", CrawlScope.HOST),
            include="\n".join(options.get("include", [])),
            exclude="\n".join(options.get("exclude", [])),
            robots=options.get("robots", False),
            max_pages=options.get("max_pages"),
            max_bytes=options.get("max_bytes"),
            host_concurrency=options.get("host_concurrency"),
            host_delay_seconds=options.get("host_delay", 0.0),
            persona=options["persona"],
        ),
    }
