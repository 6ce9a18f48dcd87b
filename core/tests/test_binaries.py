"""Binary discovery (``manage.py binaries``) and turning an extractor off (EXTRACTOR_OPTIONS)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from model_bakery import baker

from core.choices import ResultStatus, SnapshotStatus
from core.extractors.binaries import binaries_report
from core.extractors.registry import BY_NAME, get_extractor
from core.models import ArchiveResult, Snapshot
from core.services.results import result_tick
from crawls.choices import CrawlStatus
from crawls.models import Crawl


def test_the_report_lists_every_extractor_with_its_binaries_found() -> None:
    report = {row.name: row for row in binaries_report()}

    assert list(report) == list(BY_NAME)
    assert {row.status for row in report.values()} == {"ready"}
    (wget,) = report["wget"].binaries
    assert wget.path.endswith("/wget")
    assert wget.version.startswith("GNU Wget ")
    (curl,) = report["headers"].binaries
    assert curl.version.startswith("curl ")


def test_a_binary_missing_from_path_is_reported(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: nothing is found

    report = {row.name: row for row in binaries_report()}

    assert report["wget"].status == "missing wget"
    assert report["wget"].binaries[0].path is None
    assert report["title"].status == "missing curl"


def test_a_disabled_extractor_is_reported_and_skips_its_results(settings) -> None:
    settings.EXTRACTOR_OPTIONS = {"title": {"enabled": False}}

    report = {row.name: row for row in binaries_report()}

    assert report["title"].status == "disabled"
    assert report["wget"].status == "ready"
    assert get_extractor("title").should_run(None) == (False, "disabled in EXTRACTOR_OPTIONS")


@pytest.mark.django_db
def test_a_result_of_a_disabled_extractor_is_skipped_with_the_reason(settings) -> None:
    settings.EXTRACTOR_OPTIONS = {"title": {"enabled": False}}
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/")
    snapshot = baker.make(
        Snapshot, crawl=crawl, url="http://a.example/", status=SnapshotStatus.STARTED
    )
    result = baker.make(ArchiveResult, snapshot=snapshot, extractor="title")

    result_tick(result=result)

    result = ArchiveResult.objects.get(pk=result.pk)
    assert (result.status, result.error) == (ResultStatus.SKIPPED, "disabled in EXTRACTOR_OPTIONS")


def test_the_command_prints_a_table_and_json() -> None:
    table, as_json = StringIO(), StringIO()

    call_command("binaries", stdout=table)
    call_command("binaries", "--json", stdout=as_json)

    assert "/usr/bin/wget" in table.getvalue()
    assert "ready" in table.getvalue()
    rows = json.loads(as_json.getvalue())
    assert [row["name"] for row in rows] == list(BY_NAME)
    assert rows[1]["binaries"][0]["name"] == "wget"
    assert rows[1]["status"] == "ready"
