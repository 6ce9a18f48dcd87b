"""Notifications when a crawl seals (crawls/notifications.py, crawls/tasks.py): webhooks against
a test server on 127.0.0.1 (retried with backoff after a 500), email through Django's mail
backend, and a real huey consumer end to end."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from ipaddress import ip_network
from urllib.parse import urlsplit

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone
from django_huey import get_queue
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.errors import Outcome
from core.models import ArchiveResult, Snapshot
from core.services.crawls import crawl_seal
from core.tests.test_browser_extractors import unused_port
from crawls.choices import CrawlStatus
from crawls.models import Crawl, crawl_add_bytes
from crawls.notifications import deliver_webhook
from crawls.tasks import webhook_send

pytestmark = pytest.mark.django_db


class Webhook:
    """A webhook receiver on 127.0.0.1 that answers with ``statuses`` in turn (the last one
    again once they run out) and keeps every JSON body it was sent."""

    def __init__(
        self, *statuses: int, retry_after: str | None = None, location: str | None = None
    ) -> None:
        self.statuses = list(statuses)
        self.retry_after = retry_after
        self.location = location
        self.received: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                receiver.received.append(json.loads(self.rfile.read(length)))
                status = (
                    receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                )
                self.send_response(status)
                if receiver.retry_after:
                    self.send_header("Retry-After", receiver.retry_after)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[callable]:
    made = []

    def make(*statuses: int, **options) -> Webhook:
        made.append(Webhook(*statuses, **options))
        return made[-1]

    yield make
    for receiver in made:
        receiver.stop()


def run_when_due(queue, task) -> None:
    """Do what the consumer's scheduler does once ``task``'s time has come: take it off the
    schedule and run it."""
    (due,) = queue.read_schedule(task.eta)
    queue.execute(due, task.eta)


def finished_crawl(**fields) -> Crawl:
    """A started crawl whose one snapshot is sealed with a failed favicon result."""
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/", **fields)
    snapshot = baker.make(
        Snapshot, crawl=crawl, url="http://a.example/", status=SnapshotStatus.SEALED, retry_at=None
    )
    baker.make(
        ArchiveResult, snapshot=snapshot, extractor="wget", status=ResultStatus.SUCCEEDED,
        output_size=2048, retry_at=None,
    )  # fmt: skip
    crawl_add_bytes(crawl.pk, 2048)  # as recording the result counts it
    baker.make(
        ArchiveResult, snapshot=snapshot, extractor="favicon", status=ResultStatus.FAILED,
        error="HTTP 404 from http://a.example/favicon.ico", retry_at=None,
    )  # fmt: skip
    return crawl


# --- one delivery ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(200, Outcome.SUCCEEDED), (204, Outcome.SUCCEEDED), (500, Outcome.TEMPORARY),
     (404, Outcome.FATAL)],
)  # fmt: skip
def test_a_delivery_is_classified_by_its_status(webhook, status: int, outcome: Outcome) -> None:
    receiver = webhook(status)

    delivery = deliver_webhook(receiver.url, {"event": "x"}, timeout=5)

    assert (delivery.outcome, delivery.detail) == (outcome, f"HTTP {status}")
    assert receiver.received == [{"event": "x"}]


def test_a_429_is_temporary_with_its_retry_after(webhook) -> None:
    delivery = deliver_webhook(webhook(429, retry_after="7").url, {}, timeout=5)

    assert (delivery.outcome, delivery.retry_after) == (Outcome.TEMPORARY, 7.0)


def test_a_receiver_that_is_down_is_temporary() -> None:
    delivery = deliver_webhook(f"http://127.0.0.1:{unused_port()}/", {}, timeout=5)

    assert delivery.outcome is Outcome.TEMPORARY
    assert delivery.detail.startswith("network error: ")
    assert "Connection refused" in delivery.detail


def test_a_webhook_on_a_private_address_is_refused_by_the_address_policy(webhook) -> None:
    receiver = webhook(200)
    port = urlsplit(receiver.url).port

    with override_settings(ALLOWED_PRIVATE_NETWORKS=[(ip_network("127.0.0.1/32"), port + 1)]):
        delivery = deliver_webhook(receiver.url, {"secret": 1}, timeout=5)

    assert delivery.outcome is Outcome.FATAL
    assert f"refused by the address policy: {receiver.url}: " in delivery.detail
    assert "127.0.0.1 is a loopback address" in delivery.detail
    assert receiver.received == []


# --- sealing notifies --------------------------------------------------------------------------


def test_sealing_posts_the_report_and_a_500_is_retried_with_backoff(
    webhook, settings, django_capture_on_commit_callbacks
) -> None:
    receiver = webhook(500, 200)
    crawl = finished_crawl(notify_webhook=receiver.url)
    queue = get_queue("default")
    queue.flush()

    with django_capture_on_commit_callbacks(execute=True):
        assert crawl_seal(crawl=crawl)

    (first,) = receiver.received
    assert first["event"] == "crawl.sealed"
    assert first["crawl"]["id"] == crawl.pk
    assert first["report"]["snapshots"] == {"sealed": 1}
    assert first["report"]["bytes"] == 2048
    assert first["report"]["failures"][0]["extractor"] == "favicon"
    # The 500 scheduled attempt 2 after a backoff delay (BACKOFF_BASE: 0.1 to 0.2 s in tests).
    (retry,) = queue.scheduled()
    assert retry.args == (receiver.url, first, 2)
    assert 0 < (retry.eta - timezone.now().replace(tzinfo=None)).total_seconds() <= 0.2 + 1
    run_when_due(queue, retry)
    assert receiver.received == [first, first]
    assert queue.scheduled() == []


def test_a_webhook_is_given_up_after_notify_max_attempts(webhook, settings) -> None:
    settings.NOTIFY_MAX_ATTEMPTS = 2
    receiver = webhook(503)
    queue = get_queue("default")
    queue.flush()
    payload = {"event": "crawl.sealed", "crawl": {"id": 1}}

    webhook_send(receiver.url, payload, 1)
    (retry,) = queue.scheduled()
    run_when_due(queue, retry)

    assert len(receiver.received) == 2
    assert queue.scheduled() == []


def test_sealing_again_after_a_retry_sends_the_updated_report(
    webhook, django_capture_on_commit_callbacks
) -> None:
    receiver = webhook(200)
    crawl = finished_crawl(notify_webhook=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        crawl_seal(crawl=crawl)
    crawl.reopen()
    crawl.save()
    ArchiveResult.objects.filter(extractor="favicon").update(status=ResultStatus.SUCCEEDED)

    with django_capture_on_commit_callbacks(execute=True):
        crawl_seal(crawl=Crawl.objects.get(pk=crawl.pk))

    first, second = receiver.received
    assert first["report"]["results"] == {"failed": 1, "succeeded": 1}
    assert second["report"]["results"] == {"succeeded": 2}


def test_the_report_is_emailed_to_the_global_and_the_crawls_addresses(
    settings, mailoutbox, django_capture_on_commit_callbacks
) -> None:
    settings.NOTIFY_EMAIL = ["ops@example.org"]
    crawl = finished_crawl(notify_email="me@example.org")

    with django_capture_on_commit_callbacks(execute=True):
        crawl_seal(crawl=crawl)

    (mail,) = mailoutbox
    assert mail.to == ["ops@example.org", "me@example.org"]
    assert mail.subject == f"Vellum: crawl {crawl.pk} sealed (1 sealed)"
    assert "Stored: 2,048 bytes" in mail.body
    assert "http://a.example/ (favicon): HTTP 404 from http://a.example/favicon.ico" in mail.body


def test_without_a_webhook_or_address_nothing_is_sent(
    mailoutbox, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        crawl_seal(crawl=finished_crawl())

    # What is left once the orchestrator's wake-ups (orchestrator/wakeups.py) are set aside.
    sending = [call for call in callbacks if not call.__module__.startswith("orchestrator.")]
    assert sending == [] and mailoutbox == []


# --- add ---------------------------------------------------------------------------------------


def test_add_keeps_the_crawls_webhook_and_addresses() -> None:
    call_command(
        "add", "--webhook", "https://Hooks.example/x", "--email", "a@example.org, b@example.org",
        "https://a.example/", stdout=StringIO(),
    )  # fmt: skip

    crawl = Crawl.objects.get()
    assert crawl.notify_webhook == "https://hooks.example/x"
    assert crawl.notify_email == "a@example.org,b@example.org"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--webhook", "ftp://hooks.example/", "webhook: 'ftp://hooks.example/': only http"),
        ("--email", "a@example.org,nobody", "email: 'nobody' is not an email address"),
    ],
)
def test_add_refuses_a_bad_webhook_or_address(option: str, value: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("add", option, value, "https://a.example/", stdout=StringIO())

    assert not Crawl.objects.exists()


# --- end to end: the huey consumer -------------------------------------------------------------


@pytest.mark.slow
def test_the_huey_consumer_delivers_a_crawls_report_after_a_500(
    tmp_path, live_site, webhook
) -> None:
    from orchestrator.tests.test_orchestrator import COMMAND_TIMEOUT, CRAWL_TIMEOUT, Vellum

    receiver = webhook(500, 200)
    vellum = Vellum(tmp_path / "data", HUEY_IMMEDIATE="0", EXTRACTORS="headers,title")
    assert vellum.manage("init").returncode == 0
    consumer = vellum.start("djangohuey", "--queue", "default")
    try:
        done = vellum.manage(
            "add", "--wait", "--webhook", receiver.url, live_site.url("/"),
            timeout=CRAWL_TIMEOUT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while len(receiver.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        consumer.terminate()
        consumer.wait(timeout=COMMAND_TIMEOUT)
    first, second = receiver.received
    assert first == second
    assert first["report"]["snapshots"] == {"sealed": 1}
    assert len(receiver.received) == 2  # the 200 ended it


def test_a_queue_that_cannot_be_reached_leaves_the_crawl_sealed(
    monkeypatch, caplog, django_capture_on_commit_callbacks
) -> None:
    def unreachable(crawl_id: int) -> None:
        raise ConnectionError("redis is down")

    monkeypatch.setattr("crawls.tasks.crawl_notify", unreachable)
    crawl = finished_crawl(notify_webhook="https://hooks.example/")

    with django_capture_on_commit_callbacks(execute=True):
        assert crawl_seal(crawl=crawl)

    assert Crawl.objects.get(pk=crawl.pk).status == CrawlStatus.SEALED
    assert f"crawl {crawl.pk}: could not queue its notification" in caplog.text


def test_a_webhook_that_redirects_to_ftp_is_not_followed() -> None:
    ftp = socket.create_server(("127.0.0.1", 0))  # an FTP server would greet whoever connects
    ftp.settimeout(0.5)
    redirect = Webhook(302, location=f"ftp://127.0.0.1:{ftp.getsockname()[1]}/")
    try:
        delivery = deliver_webhook(redirect.url, {}, timeout=5)
        with pytest.raises(TimeoutError):
            ftp.accept()
    finally:
        redirect.stop()
        ftp.close()

    assert delivery.outcome is Outcome.FATAL
    assert delivery.detail.startswith("HTTP 302 redirect to ftp://127.0.0.1:")


def test_webhook_allowed_networks_open_a_receiver_to_webhooks_alone(webhook, settings) -> None:
    receiver = webhook(200)
    port = urlsplit(receiver.url).port
    settings.ALLOWED_PRIVATE_NETWORKS = []
    settings.WEBHOOK_ALLOWED_NETWORKS = [(ip_network("127.0.0.1/32"), port)]

    delivery = deliver_webhook(receiver.url, {"n": 1}, timeout=5)

    assert delivery.outcome is Outcome.SUCCEEDED
    assert receiver.received == [{"n": 1}]
