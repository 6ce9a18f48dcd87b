"""The kinds of work (orchestrator/work.py): what an actor of each kind prepares as it starts."""

from __future__ import annotations

import signal

import pytest

from core.extractors import preloading
from core.extractors.registry import profile_lazy_imports
from orchestrator.actor import Actor
from orchestrator.work import work_types

pytestmark = pytest.mark.django_db(transaction=True)


def start_and_stop(actor: Actor) -> None:
    """Run ``actor``'s start-up and shut-down, leaving this process's signal handlers as
    they were (the actor installs its own)."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        actor.initialize()
        actor.shutdown()
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)


def test_the_lazy_imports_of_the_profile_come_once_each_in_its_order(settings) -> None:
    settings.EXTRACTORS = ["screenshot", "title", "favicon", "headers"]

    assert profile_lazy_imports() == [
        "core.extractors.html_tree",  # title's (and favicon's, once)
        "bs4.dammit",
        "playwright.sync_api",  # screenshot's, after title in the registry's order
    ]


def test_a_result_actor_queues_its_extractors_lazy_imports_as_it_starts(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.EXTRACTORS = ["headers", "wget", "title"]
    monkeypatch.setattr(preloading, "_queue", [])

    start_and_stop(Actor(work_types()["archiveresult"], idle_exit=0))

    assert preloading._queue == ["core.extractors.html_tree", "bs4.dammit"]


def test_the_other_actors_prepare_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preloading, "_queue", [])
    kinds = work_types()

    for name in ("crawl", "snapshot", "storagecopy"):
        assert kinds[name].prepare is None
        start_and_stop(Actor(kinds[name], idle_exit=0))

    assert preloading._queue == []
