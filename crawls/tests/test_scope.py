"""Scope rules and include/exclude patterns (crawls/scope.py): pure, no database."""

from __future__ import annotations

import pytest

from crawls import scope as scope_module
from crawls.choices import CrawlScope, SkipReason
from crawls.models import Crawl
from crawls.scope import MAX_PATTERNS, PatternError, ScopeRules, parse_patterns, surt_form

SEED = "https://www.example.org/docs/guide/intro.html"
FOUND_ON = "https://www.example.org/docs/guide/intro.html"


def refusal(scope: str, url: str, *, include: str = "", exclude: str = "", found_on=FOUND_ON):
    rules = ScopeRules(
        scope=scope,
        seeds=(SEED,),
        include=tuple(parse_patterns(include)),
        exclude=tuple(parse_patterns(exclude)),
    )
    return rules.refusal(url, found_on=found_on)


@pytest.mark.parametrize(
    ("scope", "url", "followed"),
    [
        (CrawlScope.PAGE, "https://www.example.org/docs/guide/next.html", False),
        (CrawlScope.PREFIX, "https://www.example.org/docs/guide/next.html", True),
        (CrawlScope.PREFIX, "https://www.example.org/docs/other.html", False),
        (CrawlScope.HOST, "https://www.example.org/elsewhere", True),
        (CrawlScope.HOST, "https://blog.example.org/", False),
        (CrawlScope.DOMAIN, "https://blog.example.org/", True),
        (CrawlScope.DOMAIN, "https://example.org/", True),
        (CrawlScope.DOMAIN, "https://notexample.org/", False),
        (CrawlScope.ANY, "https://elsewhere.net/", True),
    ],
)
def test_each_scope_follows_what_its_name_says(scope: str, url: str, followed: bool) -> None:
    found = refusal(scope, url)
    assert (found is None) is followed
    if not followed:
        assert found == (SkipReason.SCOPE, f"scope {scope}")


def test_host_scope_is_the_host_of_the_page_the_link_is_on() -> None:
    assert refusal(CrawlScope.HOST, "https://b.net/x", found_on="https://b.net/") is None
    assert refusal(CrawlScope.HOST, "http://a.net:8080/", found_on="http://a.net/") is not None


def test_an_include_pattern_adds_to_the_scope() -> None:
    assert refusal(CrawlScope.HOST, "https://cdn.example.net/a", include=r"cdn\.example") is None


def test_an_exclude_pattern_wins_over_scope_and_include() -> None:
    found = refusal(CrawlScope.ANY, "https://x.net/logout", include="logout", exclude="/logout$")
    assert found == (SkipReason.EXCLUDED, "exclude /logout$")


def test_a_surt_prefix_matches_the_urls_surt_form() -> None:
    pattern = "surt:org,example)/docs"
    assert refusal(CrawlScope.PAGE, "http://example.org/docs/a", include=pattern) is None
    assert refusal(CrawlScope.PAGE, "https://www.example.org/docs", include=pattern) is None
    assert refusal(CrawlScope.PAGE, "https://example.org/blog", include=pattern) is not None


def test_a_links_surt_form_is_made_once_for_all_patterns(monkeypatch) -> None:
    made: list[str] = []

    def counted(url: str) -> str:
        made.append(url)
        return surt_form(url)

    monkeypatch.setattr(scope_module, "surt_form", counted)
    patterns = "surt:org,example)/blog\nsurt:org,example)/news\nsurt:org,example)/docs"
    url = "https://example.org/docs/a"

    assert refusal(CrawlScope.PAGE, url, exclude="surt:net,", include=patterns) is None
    assert made == [url]


def test_a_crawls_rules_are_made_once_for_the_same_rules() -> None:
    crawl = Crawl(seeds=SEED, scope=CrawlScope.HOST, exclude="/logout$")
    same = Crawl(seeds=SEED, scope=CrawlScope.HOST, exclude="/logout$")
    edited = Crawl(seeds=SEED, scope=CrawlScope.HOST, exclude="/login$")

    assert ScopeRules.for_crawl(crawl) is ScopeRules.for_crawl(same)
    login = "https://www.example.org/login"
    assert ScopeRules.for_crawl(crawl).refusal(login, found_on=FOUND_ON) is None
    assert ScopeRules.for_crawl(edited).refusal(login, found_on=FOUND_ON) == (
        SkipReason.EXCLUDED,
        "exclude /login$",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("scope", list(CrawlScope))
def test_only_the_scopes_that_follow_the_seeds_read_them(scope: str) -> None:
    Crawl.objects.create(seeds=SEED, scope=scope)
    # As a claim loads it: the seeds, which grow with the crawl, are read when first used.
    crawl = Crawl.objects.defer(*Crawl.LOADED_ON_DEMAND).get()

    rules = ScopeRules.for_crawl(crawl)

    follows_seeds = scope in (CrawlScope.PREFIX, CrawlScope.DOMAIN)
    assert ("seeds" not in crawl.get_deferred_fields()) is follows_seeds
    assert rules.seeds == ((SEED,) if follows_seeds else ())


def test_blank_lines_are_not_patterns() -> None:
    assert [p.text for p in parse_patterns("\n  a+\n\n surt:org,x)/ \n")] == ["a+", "surt:org,x)/"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("(unclosed", "is not a regular expression"),
        ("surt:", "an empty SURT prefix"),
        ("x" * 1001, "at most 1000 characters"),
        ("\n".join(["a"] * (MAX_PATTERNS + 1)), f"at most {MAX_PATTERNS}"),
    ],
)
def test_an_unreadable_pattern_is_named(text: str, message: str) -> None:
    with pytest.raises(PatternError, match=message):
        parse_patterns(text)
