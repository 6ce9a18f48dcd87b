"""The kinds of work (orchestrator/work.py): what an actor of each kind prepares as it starts,
and when the orchestrator compiles their statements: before it forks the first actor of a kind,
and ahead, statement by statement, while it waits."""

from __future__ import annotations

import gc
import signal
from functools import partial

import pytest

from core.extractors import preloading
from core.extractors.registry import profile_lazy_imports
from core.services.crawls import crawl_create
from crawls.choices import CrawlStatus
from crawls.models import Crawl
from orchestrator import prepared
from orchestrator.actor import Actor
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
    result_statements = {key for _vendor, key, _types, _how in compiled_ahead["archiveresult"]}
    assert result_statements >= {
        "host by name, locked",
        "results running on a host",
        "results waiting for one",
        "active results of a snapshot",
        "update: a host's last start",
        "update: bytes a crawl wrote",
        "update: wake a started snapshot",
        "compare and set core.ArchiveResult",
    }


def recording_compilations(monkeypatch: pytest.MonkeyPatch, record) -> None:
    """Make ``WorkType.compilations`` (which ``compile_statements`` runs too) call
    ``record(kind name)`` first."""
    compilations = WorkType.compilations

    def recording(kind: WorkType) -> list:
        record(kind.name)
        return compilations(kind)

    monkeypatch.setattr(WorkType, "compilations", recording)


def test_the_orchestrator_compiles_a_kind_before_its_first_actor_only(
    settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.ACTOR_IDLE_EXIT = 0.1  # the actors find nothing due and leave
    compiled = []
    recording_compilations(monkeypatch, compiled.append)
    orchestrator = Orchestrator()
    try:
        for name in ("snapshot", "archiveresult", "archiveresult", "snapshot"):
            orchestrator.spawn(name)
    finally:
        orchestrator.shutdown()

    assert compiled == ["snapshot", "archiveresult"]
    assert orchestrator.spawned == 4
    assert orchestrator.crashed == 0


def test_an_actor_forked_while_its_kind_compiles_waits_for_the_rest_of_it(
    settings, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statements not compiled yet are compiled before the fork, so that the actor
    inherits them all; none is compiled twice."""
    settings.DATA_DIR = tmp_path
    settings.ACTOR_IDLE_EXIT = 0.1
    ran = []
    compilations = WorkType.compilations

    def counted(kind: WorkType) -> list:
        return [partial(ran.append, kind.name), *compilations(kind)]

    monkeypatch.setattr(WorkType, "compilations", counted)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    orchestrator = Orchestrator(exit_on_idle=True)
    orchestrator.initialize()
    try:
        orchestrator._compile("crawl", steps=1)  # crawl's first: its compilation is under way
        under_way = ("crawl", bool(orchestrator.steps_left.get("crawl")))
        orchestrator.spawn("crawl")
    finally:
        orchestrator.shutdown()
        gc.unfreeze()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    assert under_way == ("crawl", True)
    assert "crawl" in orchestrator.compiled
    assert (orchestrator.steps_left, ran) == ({}, ["crawl"])


def test_a_passing_orchestrator_compiles_while_it_waits_and_answers_a_wake_up_first(
    settings, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add --wait's: a ping waiting is returned before anything is compiled; then, with
    nothing coming, every kind not compiled yet is, in pipeline order, before the wait runs
    out."""
    settings.DATA_DIR = tmp_path  # its wake-up FIFO, away from every other listener
    settings.LOGS_DIR = tmp_path / "logs"
    settings.ORCHESTRATOR_TICK = 2  # the longest wait: compiling all fits in it
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

        orchestrator.spawn("crawl")  # compiled first; it idles until the test shuts it down
        second = orchestrator.wait()
    finally:
        orchestrator.shutdown()
        gc.unfreeze()  # what initialize froze: the test process goes on
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    assert compiled == ["crawl", "snapshot", "archiveresult", "storagecopy"]
    assert orchestrator.compiled == set(work_types())
    assert second.timed_out


def test_every_declared_statement_names_kinds_of_work_that_exist() -> None:
    """A misspelt kind would leave its statement compiled by every actor, silently."""
    kinds = set(work_types())
    declared = {name for statement in prepared._declared for name in statement.actors}

    assert declared
    assert declared <= kinds


def test_a_wake_up_waits_for_one_statement_at_most(
    settings, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ping that comes while a kind is compiled is answered after the statement being
    compiled; the kind's other statements are compiled at the next waits. (Here each kind's
    first step sends the ping.)"""
    settings.DATA_DIR = tmp_path
    settings.ORCHESTRATOR_TICK = 2  # the longest wait: compiling all fits in it
    compilations = WorkType.compilations

    def pinging_first(kind: WorkType) -> list:
        return [partial(ping, DUE, "crawl"), *compilations(kind)]

    monkeypatch.setattr(WorkType, "compilations", pinging_first)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    orchestrator = Orchestrator(exit_on_idle=True)
    orchestrator.initialize()
    try:
        woken = orchestrator.wait()
        left = next((name, len(steps)) for name, steps in orchestrator.steps_left.items())
        for _ in work_types():  # each kind's first step pings again
            orchestrator.wait()
    finally:
        orchestrator.shutdown()
        gc.unfreeze()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    assert woken.pings == {(DUE, "crawl")}
    assert left == ("crawl", len(compilations(work_types()["crawl"])))
    assert orchestrator.compiled == set(work_types())


def test_a_kind_that_failed_to_compile_is_tried_again_by_spawn_only(
    settings, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DATA_DIR = tmp_path
    settings.ORCHESTRATOR_TICK = 2  # the longest wait: compiling all fits in it
    settings.ACTOR_IDLE_EXIT = 0.1
    tried = []
    compilations = WorkType.compilations

    def failing_for_crawl(kind: WorkType) -> list:
        tried.append(kind.name)
        if kind.name == "crawl" and tried.count("crawl") == 1:
            raise RuntimeError("the database went away")
        return compilations(kind)

    monkeypatch.setattr(WorkType, "compilations", failing_for_crawl)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    orchestrator = Orchestrator(exit_on_idle=True)
    orchestrator.initialize()
    try:
        for _ in range(3):
            orchestrator.wait()
        after_waits = (set(orchestrator.failed_compiling), tried.count("crawl"))
        orchestrator.spawn("crawl")
    finally:
        orchestrator.shutdown()
        gc.unfreeze()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    assert after_waits == ({"crawl"}, 1)
    assert tried.count("crawl") == 2
    assert orchestrator.compiled == set(work_types())


def test_compiling_ahead_ends_with_the_pause(settings, tmp_path) -> None:
    """A pause already over (a retry_at due now) is not put off for compilation."""
    settings.DATA_DIR = tmp_path
    settings.ORCHESTRATOR_TICK = 0
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    orchestrator = Orchestrator(exit_on_idle=True)
    orchestrator.initialize()
    try:
        woken = orchestrator.wait()
    finally:
        orchestrator.shutdown()
        gc.unfreeze()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    assert woken.timed_out
    assert (orchestrator.compiled, orchestrator.steps_left) == (set(), {})
