"""The work item every queue shares (orchestrator/models.py): waking records that wait, and
loading some fields of many in one query."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from model_bakery import baker

from crawls.choices import CrawlStatus
from crawls.models import Crawl

pytestmark = pytest.mark.django_db


def test_wake_makes_a_waiting_record_due_now(settings) -> None:
    settings.POLL_INTERVAL = 5
    waiting = baker.make(
        Crawl, status=CrawlStatus.STARTED, retry_at=timezone.now() + timedelta(seconds=4)
    )

    assert Crawl.objects.filter(pk=waiting.pk).wake() == 1

    assert Crawl.objects.get(pk=waiting.pk).retry_at <= timezone.now()


def test_wake_leaves_a_leased_record_alone(settings) -> None:
    settings.POLL_INTERVAL = 5
    lease_end = timezone.now() + timedelta(seconds=settings.LEASE_SECONDS)
    leased = baker.make(Crawl, status=CrawlStatus.STARTED, retry_at=lease_end)

    assert Crawl.objects.filter(pk=leased.pk).wake() == 0

    assert Crawl.objects.get(pk=leased.pk).retry_at == lease_end


def test_records_loaded_with_only_some_fields_cost_one_query(django_assert_num_queries) -> None:
    # django-fsm reads each record's state as it is made: only() keeps it loaded.
    baker.make(Crawl, status=CrawlStatus.STARTED, _quantity=3)

    with django_assert_num_queries(1):
        crawls = list(Crawl.objects.only("pk", "retry_at"))
        assert [crawl.status for crawl in crawls] == [CrawlStatus.STARTED] * 3
    assert "status" not in crawls[0].get_deferred_fields()
