"""Tell people a crawl sealed: its report POSTed as JSON to webhooks, and sent by email.

Where to: NOTIFY_WEBHOOK_URL and NOTIFY_EMAIL for every crawl, plus a crawl's own
``notify_webhook`` and ``notify_email`` (``add --webhook``, ``--email``). Each seal notifies,
so a crawl sealed again after a retry or a re-archive sends its updated report. The huey
consumer does the sending (crawls/tasks.py); a webhook that answers 429 or 5xx, or not at all,
is tried again with backoff, up to NOTIFY_MAX_ATTEMPTS times.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email

from core.extractors.egress import EgressProxy
from core.extractors.errors import Outcome, classify_http_status, egress_failure
from core.extractors.fetch import parse_retry_after
from crawls.models import Crawl
from crawls.seeds import normalize_url

logger = logging.getLogger(__name__)

EVENT = "crawl.sealed"


@dataclass(frozen=True)
class Delivery:
    """How one webhook POST went: ``outcome`` SUCCEEDED, TEMPORARY (try again) or FATAL."""

    outcome: Outcome
    detail: str
    retry_after: float | None = None  # seconds, from a 429 or 503's Retry-After


def check_webhook_url(url: str) -> str:
    """Return ``url`` normalized; raise InvalidURL unless it is an http(s) URL."""
    return normalize_url(url)


def check_email_addresses(addresses: list[str]) -> list[str]:
    """Return ``addresses`` stripped; raise ValidationError naming the first invalid one."""
    cleaned = [address.strip() for address in addresses if address.strip()]
    for address in cleaned:
        try:
            validate_email(address)
        except ValidationError:
            raise ValidationError(f"{address!r} is not an email address") from None
    return cleaned


def webhooks_for(crawl: Crawl) -> list[str]:
    """The webhook URLs to tell about ``crawl``: the global one and its own, each once."""
    urls = [settings.NOTIFY_WEBHOOK_URL, crawl.notify_webhook]
    return list(dict.fromkeys(url for url in urls if url))


def emails_for(crawl: Crawl) -> list[str]:
    """The addresses to tell about ``crawl``: NOTIFY_EMAIL and its own, each once."""
    own = [address for address in crawl.notify_email.split(",") if address.strip()]
    return list(dict.fromkeys(address.strip() for address in [*settings.NOTIFY_EMAIL, *own]))


def wants_notification(crawl: Crawl) -> bool:
    return bool(webhooks_for(crawl) or emails_for(crawl))


def crawl_payload(crawl: Crawl) -> dict:
    """The JSON document a webhook receives: the event, the crawl, and its report."""
    return {
        "event": EVENT,
        "crawl": {
            "id": crawl.pk,
            "seeds": len(crawl.seed_list()),
            "depth": crawl.depth,
            "tags": sorted(tag.name for tag in crawl.tags.all()),
            "created_at": crawl.created_at.isoformat(),
            "sealed_at": crawl.end_ts.isoformat() if crawl.end_ts else None,
        },
        "report": crawl.report,
    }


def deliver_webhook(url: str, payload: dict, *, timeout: float) -> Delivery:
    """POST ``payload`` as JSON to ``url``; classify the answer as extractors classify HTTP
    (core/extractors/errors.py): 2xx succeeded; 429, 5xx, timeouts and refused connections are
    temporary; other statuses fatal. ``timeout`` is in seconds.

    The POST goes through the egress proxy, never a proxy from the environment: a webhook is
    fetched under the address policy like any page (DESIGN.md §8), so a URL on the machine or
    its private network is refused (FATAL) unless ALLOWED_PRIVATE_NETWORKS, or
    WEBHOOK_ALLOWED_NETWORKS for webhooks alone, opens it. Redirects are followed to http and
    https URLs only (urllib would follow one to ftp:, around the proxy)."""
    body = json.dumps(payload).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": settings.USER_AGENT},
    )
    with EgressProxy(also=settings.WEBHOOK_ALLOWED_NETWORKS) as proxy:
        delivery = _post(_opener(proxy.url), request, timeout)
        failure = egress_failure(proxy.refusals, proxy.unreachable)
    if failure and delivery.outcome is not Outcome.SUCCEEDED:
        return Delivery(*failure)  # the proxy's 403 or 502 is not the webhook's answer
    return delivery


class RedirectRefused(Exception):
    """A webhook redirected somewhere other than an http or https URL."""


class _WebRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http and https URLs only; raise RedirectRefused for any other."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urlsplit(newurl).scheme not in ("http", "https"):
            raise RedirectRefused(f"HTTP {code} redirect to {newurl} refused (http and https only)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(proxy_url: str) -> urllib.request.OpenerDirector:
    """An opener that speaks http and https through ``proxy_url``, and nothing else (no ftp:,
    file: or data: handler, which build_opener would add)."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler({"http": proxy_url, "https": proxy_url}),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        _WebRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def _post(opener, request: urllib.request.Request, timeout: float) -> Delivery:
    try:
        with opener.open(request, timeout=timeout) as response:
            return Delivery(Outcome.SUCCEEDED, f"HTTP {response.status}")
    except RedirectRefused as refused:
        return Delivery(Outcome.FATAL, str(refused))
    except urllib.error.HTTPError as error:
        outcome = classify_http_status(error.code)
        retry_after = parse_retry_after(error.headers.get("Retry-After"))
        return Delivery(outcome, f"HTTP {error.code}", retry_after)
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return Delivery(Outcome.TEMPORARY, f"no answer ({reason})")


def send_report_email(crawl: Crawl, addresses: list[str]) -> None:
    """Email ``crawl``'s report to ``addresses`` with Django's mail backend (EMAIL_* settings).
    Raises what the backend raises (OSError, smtplib.SMTPException)."""
    report = crawl.report
    counts = ", ".join(f"{n} {state}" for state, n in sorted(report.get("snapshots", {}).items()))
    lines = [
        f"Crawl {crawl.pk} sealed: {counts or 'no snapshots'}.",
        f"Results: {', '.join(f'{n} {s}' for s, n in sorted(report.get('results', {}).items()))}",
        f"Stored: {report.get('bytes', 0):,} bytes in {report.get('duration_seconds', 0):.0f} s",
    ]
    failures = report.get("failures", [])
    if failures:
        lines.append("")
        lines.append(f"Failures ({len(failures)}):")
        lines += [
            f"  {failure['url']} ({failure['extractor'] or 'finalizing'}): {failure['error']}"
            for failure in failures[:50]
        ]
    send_mail(
        subject=f"Vellum: crawl {crawl.pk} sealed ({counts or 'no snapshots'})",
        message="\n".join(lines) + "\n",
        from_email=None,
        recipient_list=addresses,
    )
