"""What a pipeline process used, said as it exits: its own CPU time and its commands'.

An actor's log line as it exits (orchestrator/actor.py) and the orchestrator's as it stops give
the CPU seconds, user plus system, of the process itself and of the descendants it waited for
(``getrusage``, POSIX.1-2008): for an actor, the extractors' tools and the browser it stopped;
for the orchestrator, its actors and everything they ran (``add --wait``'s own orchestrator
runs in the ``add`` process: its own figure is that whole command's). A forked child's counts
start at zero at the fork, so an actor's own figure is its own work, not the orchestrator's
before it. Summed over a crawl's actors (bench/throughput.py does) they tell where the CPU
went.

A descendant counts only once every process between it and the caller has waited for it. With
a browser the commands' figure is therefore a lower bound: on 20 pages of the default profile
the actors' figures held some 27 s of the 65 s that Chromium's processes and Playwright's driver
used (read from /proc while they ran).
"""

from __future__ import annotations

import re
import resource
from dataclasses import dataclass

# What an actor logs as it exits (orchestrator/actor.py), and how it is read back (``ACTOR_EXIT``,
# for bench/throughput.py and the tests): one pair, so that the two never drift apart.
ACTOR_EXIT_FORMAT = "actor %s exits after %d records (pid %d); CPU %.2f s, its commands %.2f s"
ACTOR_EXIT = re.compile(
    r"actor (?P<kind>\w+) exits after (?P<records>\d+) records \(pid (?P<pid>\d+)\); "
    r"CPU (?P<own>\d+\.\d+) s, its commands (?P<commands>\d+\.\d+) s"
)
# The orchestrator's last line (orchestrator/orchestrator.py), the same way.
ORCHESTRATOR_STOP_FORMAT = (
    "orchestrator stopped; %d actors spawned, %d crashed; CPU %.2f s, its actors and their "
    "commands %.2f s"
)
ORCHESTRATOR_STOP = re.compile(
    r"orchestrator stopped; (?P<spawned>\d+) actors spawned, (?P<crashed>\d+) crashed; "
    r"CPU (?P<own>\d+\.\d+) s, its actors and their commands (?P<waited>\d+\.\d+) s"
)


@dataclass(frozen=True)
class CpuUsed:
    """CPU seconds (user + system) used by a process (``own``) and by the descendants it has
    waited for (``waited``)."""

    own: float
    waited: float


def cpu_used() -> CpuUsed:
    """Return the CPU this process and its waited-for descendants have used so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return CpuUsed(own.ru_utime + own.ru_stime, waited.ru_utime + waited.ru_stime)
