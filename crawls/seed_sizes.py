"""Asking seeds for their size before a crawl (crawls/estimate.py adds the answers up).

Every seed is asked for its headers (HEAD; a server that refuses HEAD with 405 or 501 is asked
with a GET whose body is never read) and its ``Content-Length`` (RFC 9110 §8.6) is its size. A
seed that gives no length, or no answer in time, has none, with the reason.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests
from django.conf import settings

from core.extractors.egress import EgressProxy
from core.extractors.errors import egress_failure

MAX_REDIRECTS = 10
NO_HEAD = {405, 501}  # Method Not Allowed, Not Implemented: ask with GET instead


@dataclass(frozen=True)
class SeedSize:
    """One seed's answer: its size in bytes, or None with the reason it is unknown."""

    url: str
    size: int | None
    problem: str = ""


def seed_sizes(urls: list[str], *, timeout: float, workers: int) -> list[SeedSize]:
    """Ask every URL of ``urls`` for its Content-Length, ``workers`` at a time, each within
    ``timeout`` seconds; return one SeedSize per URL, in order. Never raises for a URL: a
    failure is that seed's ``problem``."""
    with requests.Session() as session, ThreadPoolExecutor(max_workers=workers) as pool:
        session.max_redirects = MAX_REDIRECTS
        session.headers["User-Agent"] = settings.USER_AGENT
        session.trust_env = False  # the egress proxy, never one from the environment
        return list(pool.map(lambda url: _seed_size(session, url, timeout), urls))


def _seed_size(session: requests.Session, url: str, timeout: float) -> SeedSize:
    """Ask ``url`` through an egress proxy of its own, so that the address policy applies to
    it and its redirects, and a refusal is told apart from the server's own answer."""
    with EgressProxy() as proxy:
        size = _ask(session, url, timeout, {"http": proxy.url, "https": proxy.url})
        failure = egress_failure(proxy.refusals, proxy.unreachable)
    if failure and size.size is None:
        return SeedSize(url, None, failure[1])
    return size


def _ask(session: requests.Session, url: str, timeout: float, proxies: dict) -> SeedSize:
    try:
        response = session.head(url, allow_redirects=True, timeout=timeout, proxies=proxies)
        if response.status_code in NO_HEAD:
            with session.get(url, stream=True, timeout=timeout, proxies=proxies) as response:
                pass  # only the headers are wanted; closing drops the body unread
    except requests.RequestException as error:
        return SeedSize(url, None, _describe(error))
    if response.status_code >= 400:
        return SeedSize(url, None, f"HTTP {response.status_code}")
    length = response.headers.get("Content-Length", "")
    if not length.isdigit():
        return SeedSize(url, None, "no Content-Length")
    return SeedSize(url, int(length))


def _describe(error: requests.RequestException) -> str:
    if isinstance(error, requests.Timeout):
        return "no answer in time"
    if isinstance(error, requests.TooManyRedirects):
        return f"more than {MAX_REDIRECTS} redirects"
    if isinstance(error, requests.ConnectionError):
        return "cannot connect"
    return type(error).__name__
