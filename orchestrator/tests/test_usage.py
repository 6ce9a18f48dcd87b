"""What a process says it used as it exits (orchestrator/usage.py), measured on real processes."""

from __future__ import annotations

import subprocess
import sys
import time

from orchestrator.usage import cpu_used

WORK_SECONDS = 0.3  # CPU seconds each side keeps busy for: far above the clock's tick
# Python code that keeps a CPU busy for WORK_SECONDS of its own time, then exits.
BUSY = f"""
import time
end = time.process_time() + {WORK_SECONDS}
while time.process_time() < end:
    pass
"""


def test_a_waited_for_command_counts_as_the_callers_commands_not_its_own() -> None:
    before = cpu_used()

    subprocess.run([sys.executable, "-c", BUSY], check=True)
    after = cpu_used()

    assert after.waited - before.waited >= WORK_SECONDS
    assert after.own - before.own < WORK_SECONDS


def test_own_cpu_grows_with_the_process_own_work() -> None:
    before = cpu_used()

    end = time.process_time() + WORK_SECONDS
    while time.process_time() < end:
        pass
    after = cpu_used()

    assert after.own - before.own >= WORK_SECONDS - 0.01  # getrusage and process_time agree
    assert after.waited == before.waited
