"""What a pipeline process used, said as it exits: its own CPU time and its commands'.

An actor's log line as it exits (orchestrator/actor.py) and the orchestrator's as it stops give
the CPU seconds, user plus system, of the process itself and of the descendants it waited for
(``getrusage``, POSIX.1-2008): for an actor, the extractors' tools and the browser it stopped;
for the orchestrator, its actors and everything they ran. A forked child's counts start at
zero at the fork, so an actor's own figure is its own work, not the orchestrator's before it.
Summed over a crawl's actors (bench/throughput.py does) they tell where the CPU went.

A descendant counts only once every process between it and the caller has waited for it. With
a browser the commands' figure is therefore a lower bound: on 20 pages of the default profile
the actors' figures held some 27 s of the 65 s that Chromium's processes and Playwright's driver
used (read from /proc while they ran).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass


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
