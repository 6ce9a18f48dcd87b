"""Which links a crawl follows: its scope, include and exclude patterns (issue 21, item 2).

The scope names follow Browsertrix Crawler's ``scopeType``: ``page`` (the seeds only),
``prefix`` (a seed's URL up to its last ``/``), ``host`` (the host[:port] of the page the link
is on, Vellum's rule before scopes), ``domain`` (a seed's host name without ``www.``, and
every subdomain of it) and ``any``. Include patterns add to the scope, exclude patterns take
away from it and win over everything (Browsertrix Crawler's ``--include``/``--exclude``).

A pattern is a regular expression searched (``re.search``) in the normalized URL, or, written
``surt:<prefix>``, a SURT prefix as Heritrix writes them without the scheme, compared with the
URL's SURT form (the ``surt`` package: ``http://www.example.org/a`` is ``org,example)/a``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from urllib.parse import urlsplit

from crawls.choices import CrawlScope, SkipReason
from crawls.seeds import domain_match

SURT_PREFIX = "surt:"
MAX_PATTERNS = 100
MAX_PATTERN_LENGTH = 1000


class PatternError(ValueError):
    """A pattern that cannot be read; the message names it and says why."""


@dataclass(frozen=True)
class Pattern:
    """One include or exclude pattern, as written and compiled."""

    text: str
    regex: re.Pattern | None
    surt_prefix: str

    def matches(self, url: Link) -> bool:
        if self.regex is not None:
            return self.regex.search(url.url) is not None
        return url.surt.startswith(self.surt_prefix)


class Link:
    """A normalized URL under test, with its SURT form made on first use and then kept (every
    ``surt:`` pattern compares with the same one)."""

    def __init__(self, url: str) -> None:
        self.url = url

    @cached_property
    def surt(self) -> str:
        return surt_form(self.url)


def surt_form(url: str) -> str:
    """``url``'s SURT form without the scheme, e.g. ``org,example)/a?b=c`` (lowercased)."""
    # Imported on use: surt brings tldextract and requests, which no command needs at start
    # (core/tests/test_startup.py), and only crawls with a surt: pattern use it.
    import surt

    return surt.surt(url).lower()


def parse_patterns(text: str) -> list[Pattern]:
    """Read patterns, one a line (blank lines ignored); raise PatternError naming the first
    that is not a valid regular expression or SURT prefix, or when there are more than
    MAX_PATTERNS or one is longer than MAX_PATTERN_LENGTH characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_PATTERNS:
        raise PatternError(f"{len(lines)} patterns: at most {MAX_PATTERNS}")
    patterns = []
    for line in lines:
        if len(line) > MAX_PATTERN_LENGTH:
            raise PatternError(f"pattern {line[:40]!r}...: at most {MAX_PATTERN_LENGTH} characters")
        if line.lower().startswith(SURT_PREFIX):
            prefix = line[len(SURT_PREFIX) :].strip().lower()
            if not prefix:
                raise PatternError(f"pattern {line!r}: an empty SURT prefix")
            patterns.append(Pattern(line, None, prefix))
            continue
        try:
            patterns.append(Pattern(line, re.compile(line), ""))
        except re.error as error:
            raise PatternError(
                f"pattern {line[:80]!r} is not a regular expression: {error}"
            ) from None
    return patterns


@dataclass(frozen=True)
class ScopeRules:
    """What a crawl follows: ``scope`` (a CrawlScope value) relative to ``seeds`` (normalized
    URLs), widened by ``include`` and narrowed by ``exclude``."""

    scope: str
    seeds: tuple[str, ...]
    include: tuple[Pattern, ...] = ()
    exclude: tuple[Pattern, ...] = ()

    @classmethod
    def for_crawl(cls, crawl) -> ScopeRules:
        """The rules of ``crawl`` (crawls.models.Crawl): its ``any_host`` means scope ``any``.
        Patterns were checked when it was made; raises PatternError if they were changed since
        into something unreadable. Made once for the same rules (a crawl's every batch of
        links, in one process), not parsed and compiled again for each."""
        scope = CrawlScope.ANY if crawl.any_host else crawl.scope
        # Only these two read the seeds, which a claimed crawl has not loaded (they grow with
        # it: Crawl.LOADED_ON_DEMAND).
        seeds = crawl.seeds if scope in (CrawlScope.PREFIX, CrawlScope.DOMAIN) else ""
        return _rules(scope, seeds, crawl.include, crawl.exclude)

    def refusal(self, url: str, *, found_on: str) -> tuple[str, str] | None:
        """Why the link ``url`` found on page ``found_on`` (both normalized) is not followed,
        as ``(SkipReason value, detail)``, or None when it is."""
        link = Link(url)
        for pattern in self.exclude:
            if pattern.matches(link):
                return SkipReason.EXCLUDED, f"exclude {pattern.text}"
        if self._in_scope(url, found_on) or any(p.matches(link) for p in self.include):
            return None
        return SkipReason.SCOPE, f"scope {self.scope}"

    def _in_scope(self, url: str, found_on: str) -> bool:
        if self.scope == CrawlScope.ANY:
            return True
        if self.scope == CrawlScope.HOST:
            return urlsplit(url).netloc == urlsplit(found_on).netloc
        if self.scope == CrawlScope.PREFIX:
            return any(url.startswith(_directory(seed)) for seed in self.seeds)
        if self.scope == CrawlScope.DOMAIN:
            host = urlsplit(url).hostname or ""
            return any(domain_match(host, _domain(seed)) for seed in self.seeds)
        return False  # page: the seeds only


@lru_cache(maxsize=64)
def _rules(scope: str, seeds: str, include: str, exclude: str) -> ScopeRules:
    """ScopeRules for a crawl's fields as stored (``seeds``: one URL a line)."""
    return ScopeRules(
        scope=scope,
        seeds=tuple(line for line in seeds.splitlines() if line),
        include=tuple(parse_patterns(include)),
        exclude=tuple(parse_patterns(exclude)),
    )


def _directory(url: str) -> str:
    """``url`` up to and including the last ``/`` of its path (without query or fragment)."""
    parts = urlsplit(url)
    path = parts.path[: parts.path.rfind("/") + 1] or "/"
    return f"{parts.scheme}://{parts.netloc}{path}"


def _domain(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")
