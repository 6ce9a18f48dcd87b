"""The kinds of work (orchestrator/work.py): what an actor of each kind prepares as it starts,
and who compiles its statements: the orchestrator while it waits, or an actor forked before."""

from __future__ import annotations

import gc
import os
import signal

import pytest

from core.extractors import preloading
from core.extractors.registry import profile_lazy_imports
from core.services.crawls import crawl_create
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator import prepared
from orchestrator.actor import Actor
from orchestrator.forking import start_actor
from orchestrator.orchestrator import Orchestrator
from orchestrator.wakeups import DUE, ping
from orchestrator.work import WorkType, work_types

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


def run_actors_until_sealed(crawl: Crawl, caches: dict[str, dict]) -> Crawl:
    """Tick an actor of each kind in turn, each until nothing of its kind is due and with the
    compiled statements of ``caches[kind]`` as its process's own, until ``crawl`` is sealed;
    return it. Raises AssertionError when 20 rounds do not seal it."""
    kinds = work_types()
    actors = {name: Actor(kinds[name], idle_exit=0) for name in caches}
    for _ in range(20):
        crawl.refresh_from_db()
        if crawl.status == CrawlStatus.SEALED:
            return crawl
        for name, actor in actors.items():
            prepared._compiled = caches[name]
            while actor.tick():
                pass
    raise AssertionError(f"crawl {crawl.pk} did not finish: {crawl.status}")


@pytest.mark.usefixtures("data_dir")
def test_actors_find_every_statement_they_run_compiled_by_the_orchestrator(
    live_site, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an actor compiled itself on its first claim, some of it under SQLite's write lock,
    the orchestrator compiles before forking it: a statement left out of its kind's would be
    compiled by every actor of that kind again, and show here."""
    settings.EXTRACTORS = ["headers", "title"]
    caches = {}
    for name, kind in work_types().items():
        monkeypatch.setattr(prepared, "_compiled", {})  # as an orchestrator that forks one kind
        kind.compile_statements()
        caches[name] = prepared._compiled
    compiled_ahead = {name: set(cache) for name, cache in caches.items()}

    crawl = crawl_create(data=f"{live_site.url('/')}\n".encode(), source_name="urls.txt")
    crawl = run_actors_until_sealed(crawl, caches)

    assert sorted(crawl.report["results"].items()) == [("succeeded", 2)]
    compiled_late = {name: set(cache) - compiled_ahead[name] for name, cache in caches.items()}
    assert compiled_late == {name: set() for name in caches}
    result_statements = {key for _vendor, key, _types in compiled_ahead["archiveresult"]}
    assert result_statements >= {
        "host by name, locked",
        "results running on a host",
        "results waiting for one",
        "active results of a snapshot",
    }


def recording_compilations(monkeypatch: pytest.MonkeyPatch, record) -> None:
    """Make ``WorkType.compile_statements`` call ``record(kind name)`` before it compiles."""
    compile_statements = WorkType.compile_statements

    def recording(kind: WorkType) -> None:
        record(kind.name)
        compile_statements(kind)

    monkeypatch.setattr(WorkType, "compile_statements", recording)


@pytest.mark.parametrize("compiled", [False, True], ids=["not-compiled", "compiled"])
def test_an_actor_forked_before_its_kind_is_compiled_compiles_it_itself(
    settings, tmp_path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """The forked child inherits the recording (fork copies the test process): it writes the
    kind it compiled to a file, or nothing when its parent had compiled the kind."""
    settings.DATA_DIR = tmp_path
    settings.LOGS_DIR = tmp_path / "logs"
    settings.ACTOR_IDLE_EXIT = 0.1  # it finds nothing due and leaves
    report = tmp_path / "compiled-in-child"
    recording_compilations(monkeypatch, lambda name: report.write_text(name))

    actor = start_actor("snapshot", compiled=compiled)
    actor.join(timeout=60)

    assert actor.exitcode == 0
    if compiled:
        assert not report.exists()
    else:
        assert report.read_text() == "snapshot"


def test_spawning_compiles_nothing_in_the_orchestrator(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork comes first; the orchestrator compiles while it waits (the next test)."""
    settings.ACTOR_IDLE_EXIT = 0.1  # the actors find nothing due and leave
    in_parent = []
    parent = os.getpid()
    recording_compilations(
        monkeypatch, lambda name: in_parent.append(name) if os.getpid() == parent else None
    )
    orchestrator = Orchestrator()
    try:
        for name in ("snapshot", "archiveresult"):
            orchestrator.spawn(name)
    finally:
        orchestrator.shutdown()

    assert in_parent == []
    assert orchestrator.spawned == 2
    assert orchestrator.crashed == 0


def test_a_passing_orchestrator_compiles_while_it_waits_and_answers_a_wake_up_first(
    settings, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add --wait's: a ping waiting is returned before anything is compiled; then, with
    nothing coming, every kind is compiled, those without an actor first, before the wait
    runs out."""
    settings.DATA_DIR = tmp_path  # its wake-up FIFO, away from every other listener
    settings.LOGS_DIR = tmp_path / "logs"
    settings.ORCHESTRATOR_TICK = 0.05
    settings.ACTOR_IDLE_EXIT = 60
    compiled = []
    recording_compilations(monkeypatch, compiled.append)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    orchestrator = Orchestrator(exit_on_idle=True)
    orchestrator.initialize()
    try:
        ping(DUE, "crawl")
        first = orchestrator.wait()
        assert (first.pings, compiled) == ({(DUE, "crawl")}, [])

        orchestrator.spawn("crawl")  # one runs now, idle until the test shuts it down
        second = orchestrator.wait()
    finally:
        orchestrator.shutdown()
        gc.unfreeze()  # what initialize froze: the test process goes on
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    assert compiled == ["snapshot", "archiveresult", "storagecopy", "crawl"]
    assert orchestrator.compiled == set(work_types())
    assert second.timed_out


def test_every_declared_statement_names_kinds_of_work_that_exist() -> None:
    """A misspelt kind would leave its statement compiled by every actor, silently."""
    kinds = set(work_types())
    declared = {name for statement in prepared._declared for name in statement.actors}

    assert declared
    assert declared <= kinds
