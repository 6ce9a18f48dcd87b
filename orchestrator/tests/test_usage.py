"""What a process says it used as it exits (orchestrator/usage.py), measured on real processes."""

from __future__ import annotations

import subprocess
import sys

from orchestrator.usage import cpu_used

# Python code that keeps a CPU busy for a moment (some 0.1 s here), then exits.
BUSY = "sum(i * i for i in range(2_000_000))"


def test_a_waited_for_command_counts_as_the_callers_commands_not_its_own() -> None:
    before = cpu_used()

    subprocess.run([sys.executable, "-c", BUSY], check=True)
    after = cpu_used()

    assert after.waited - before.waited > 0.05
    assert after.own - before.own < after.waited - before.waited


def test_own_cpu_grows_with_the_process_own_work() -> None:
    before = cpu_used()

    sum(i * i for i in range(2_000_000))  # BUSY's work, in this process
    after = cpu_used()

    assert after.own - before.own > 0.05
    assert after.waited == before.waited
