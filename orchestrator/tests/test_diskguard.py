"""The disk guard (DESIGN.md §3): no new snapshot starts while the data disk is too full.

The real test fills a small tmpfs mounted for it (needs root, as on CI); the others lower
DISK_HOLD_PERCENT below what the disk already uses.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone
from model_bakery import baker

from core.choices import SnapshotStatus
from core.models import Snapshot
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator import diskguard
from orchestrator.actor import Actor
from orchestrator.claims import CLAIM_FIELDS, _candidates
from orchestrator.diskguard import disk_held, disk_usage
from orchestrator.orchestrator import Orchestrator, _claimable_count
from orchestrator.work import work_types

SMALL_DISK_BYTES = 4 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of the test's own, unmounted afterwards."""
    mountpoint = tmp_path / "small-disk"
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK_BYTES}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "--lazy", str(mountpoint)], check=False)


def test_filling_a_small_disk_holds_and_freeing_it_lifts(small_disk: Path, settings) -> None:
    settings.DISK_HOLD_PERCENT = 90

    assert not disk_usage(small_disk).held
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * int(SMALL_DISK_BYTES * 0.95))
    full = disk_usage(small_disk)
    filler.unlink()
    freed = disk_usage(small_disk)

    assert full.held
    assert full.used_percent > 90
    assert not freed.held
    assert freed.used_percent < 10


@pytest.mark.django_db
def test_compiled_claims_follow_the_disk_filling_and_freeing_without_a_setting_changed(
    small_disk: Path, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Statements compiled once per process (orchestrator/prepared.py) once kept the guard as
    it was when they were compiled: a guard that lifted kept snapshots waiting for good."""
    settings.DATA_DIR = small_disk
    settings.DISK_HOLD_PERCENT = 90
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/")
    queued = baker.make(Snapshot, crawl=crawl, url="http://a.example/", retry_at=timezone.now())
    fields = (*CLAIM_FIELDS,)

    def claimable_now() -> tuple[set, int]:
        monkeypatch.setattr(diskguard, "_last_measured", None)  # measure again, now
        now = timezone.now()
        return {s.pk for s in _candidates(Snapshot, fields, now, 5)}, _claimable_count(
            Snapshot, now
        )

    open_before = claimable_now()
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * int(SMALL_DISK_BYTES * 0.95))
    held = claimable_now()
    filler.unlink()
    lifted = claimable_now()

    assert open_before == ({queued.pk}, 1)
    assert held == (set(), 0)
    assert lifted == ({queued.pk}, 1)


@pytest.mark.django_db
def test_a_queued_snapshot_waits_while_the_disk_is_held_and_starts_once_it_lifts(
    settings,
) -> None:
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/")
    queued = baker.make(Snapshot, crawl=crawl, url="http://a.example/", retry_at=timezone.now())
    started = baker.make(
        Snapshot,
        crawl=crawl,
        url="http://a.example/b",
        status=SnapshotStatus.STARTED,
        retry_at=timezone.now(),
    )

    settings.DISK_HOLD_PERCENT = 0  # every disk in use is fuller than that
    assert disk_held()
    held = set(Snapshot.objects.claimable().values_list("pk", flat=True))
    settings.DISK_HOLD_PERCENT = 100
    lifted = set(Snapshot.objects.claimable().values_list("pk", flat=True))

    assert held == {started.pk}
    assert lifted == {queued.pk, started.pk}


@pytest.mark.django_db
def test_a_snapshot_actor_claims_nothing_new_while_the_disk_is_held(settings) -> None:
    settings.EXTRACTORS = ["title"]
    crawl = baker.make(Crawl, status=CrawlStatus.STARTED, seeds="http://a.example/")
    snapshot = baker.make(Snapshot, crawl=crawl, url="http://a.example/", retry_at=timezone.now())
    actor = Actor(work_types()["snapshot"], idle_exit=0)

    settings.DISK_HOLD_PERCENT = 0
    claimed_while_held = actor.tick()
    settings.DISK_HOLD_PERCENT = 100
    claimed_after = actor.tick()

    assert claimed_while_held is False
    assert claimed_after is True
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.STARTED


@pytest.mark.django_db
def test_status_shows_the_hold(settings) -> None:
    settings.DISK_HOLD_PERCENT = 0
    text, as_json = StringIO(), StringIO()

    call_command("status", stdout=text)
    call_command("status", "--json", stdout=as_json)

    assert "Disk guard holding new snapshots:" in text.getvalue()
    assert "(limit 0%)" in text.getvalue()
    guard = json.loads(as_json.getvalue())["disk_guard"]
    assert guard["held"] is True
    assert guard["hold_percent"] == 0
    assert guard["path"] == str(settings.DATA_DIR)


@pytest.mark.django_db
def test_status_shows_an_open_guard(settings) -> None:
    settings.DISK_HOLD_PERCENT = 100
    text = StringIO()

    call_command("status", stdout=text)

    assert "Disk guard open:" in text.getvalue()


@pytest.mark.django_db
def test_status_shows_the_data_path_as_it_is_spelt(settings, tmp_path) -> None:
    settings.DATA_DIR = tmp_path / "Archive-Data"
    settings.DATA_DIR.mkdir()
    text = StringIO()

    call_command("status", stdout=text)

    assert f"Disk guard open: {tmp_path}/Archive-Data is " in text.getvalue()


def test_the_orchestrator_logs_when_the_hold_starts_and_lifts(settings, caplog) -> None:
    orchestrator = Orchestrator()
    caplog.set_level(logging.INFO, logger="orchestrator")

    settings.DISK_HOLD_PERCENT = 0
    orchestrator.watch_disk()
    orchestrator.watch_disk()  # still held: said once
    settings.DISK_HOLD_PERCENT = 100
    orchestrator.watch_disk()

    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2
    assert messages[0].startswith("disk guard holding new snapshots:")
    assert messages[1].startswith("disk guard open:")


def test_a_disk_that_cannot_be_measured_counts_as_held(settings, tmp_path: Path, caplog) -> None:
    settings.DATA_DIR = tmp_path / "gone"  # statvfs fails: no such folder
    settings.DISK_HOLD_PERCENT = 100
    diskguard._last_measured = None  # measure now, not the cached figure

    held = disk_held()

    assert held is True
    assert "cannot measure the disk holding" in caplog.text
    diskguard._last_measured = None
