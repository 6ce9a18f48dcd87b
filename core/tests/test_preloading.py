"""Preloading (core/extractors/preloading.py): what an actor's extractors import on first use is
imported by a thread of its own from the start of the actor's next command, with a short switch
interval that is put back once the queue is empty; a module that cannot be imported is passed
over."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.extractors import preloading
from core.extractors.process import run_command

TIMEOUT = 30  # seconds: only a preload that never comes reaches it
SHORT = preloading.SWITCH_INTERVAL_SECONDS


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The name of a module, not imported yet, that notes the switch interval it is imported
    under; the preloading queue starts empty."""
    name = f"vellum_preload_probe_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text("import sys\nSWITCH_INTERVAL = sys.getswitchinterval()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    finish_preloading()  # of an earlier test
    monkeypatch.setattr(preloading, "_queue", [])
    yield name
    finish_preloading()
    sys.modules.pop(name, None)


def finish_preloading() -> None:
    """Wait for this process's preloading thread, if one runs, to end."""
    thread = preloading._thread
    if thread is not None:
        thread.join(TIMEOUT)
        assert not thread.is_alive()


def test_queued_modules_wait_for_a_command_then_are_imported_past_a_broken_one(
    probe: str, tmp_path: Path, caplog
) -> None:
    preloading.preload(["vellum_preload_missing", probe])
    assert probe not in sys.modules  # the actor's claim is not slowed by it

    with caplog.at_level("DEBUG", logger=preloading.__name__):
        done = run_command(["true"], cwd=tmp_path, timeout=TIMEOUT, log_path=tmp_path / "log")
        finish_preloading()

    imported_under = sys.modules[probe].SWITCH_INTERVAL
    assert imported_under == pytest.approx(SHORT)
    assert done.exit_code == 0
    assert preloading._queue == []
    assert "preloading vellum_preload_missing" in caplog.text


def test_the_switch_interval_is_short_while_importing_and_put_back_after(probe: str) -> None:
    before = sys.getswitchinterval()
    preloading.preload([probe])

    thread = preloading.start()
    thread.join(TIMEOUT)

    imported_under = sys.modules[probe].SWITCH_INTERVAL
    assert not thread.is_alive()
    assert imported_under == pytest.approx(SHORT)
    assert sys.getswitchinterval() == before
    assert preloading._thread is None  # the next start() starts anew


def test_nothing_queued_starts_no_thread(probe: str) -> None:
    before = sys.getswitchinterval()

    assert preloading.start() is None
    assert sys.getswitchinterval() == before
