"""What each extractor needs installed, and whether it is: the report ``manage.py binaries``
prints (DESIGN.md §7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from core.extractors.process import binary_version, find_binary
from core.extractors.registry import EXTRACTORS


@dataclass(frozen=True)
class Binary:
    """One program an extractor runs: where it was found on PATH (None: not found) and the
    first line of its ``--version``."""

    name: str
    path: str | None
    version: str


@dataclass(frozen=True)
class ExtractorReadiness:
    """One extractor: its settings and binaries, and ``status``: "ready", "disabled" or
    "missing <binary>[, <binary>...]" (its results are then skipped with that reason)."""

    name: str
    enabled: bool
    timeout: int
    max_attempts: int
    binaries: tuple[Binary, ...]

    @property
    def status(self) -> str:
        if not self.enabled:
            return "disabled"
        missing = [binary.name for binary in self.binaries if binary.path is None]
        return f"missing {', '.join(missing)}" if missing else "ready"

    def as_dict(self) -> dict:
        """JSON-ready: every field, plus ``status``."""
        return {**asdict(self), "status": self.status}


def binaries_report() -> list[ExtractorReadiness]:
    """Return every registered extractor, in order, with what it needs and what was found.

    Versions are read by running each binary found with ``--version`` once per process.
    """
    report = []
    for extractor in EXTRACTORS:
        found = []
        for name in extractor.binaries:
            path = find_binary(name)
            found.append(Binary(name, path, binary_version(path) if path else ""))
        report.append(
            ExtractorReadiness(
                name=extractor.name,
                enabled=extractor.enabled,
                timeout=extractor.timeout,
                max_attempts=extractor.max_attempts,
                binaries=tuple(found),
            )
        )
    return report
