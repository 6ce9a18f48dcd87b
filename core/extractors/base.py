"""The one base every extractor subclasses, and what a run returns (DESIGN.md §4).

An extractor is a small class: a ``name``, the ``binaries`` it needs, a ``timeout``,
``should_run(snapshot)`` and ``run(snapshot, out_dir)``. Extractors never touch the database:
``run`` writes files into ``out_dir`` (a fresh temporary folder that the caller moves into place
only on success) and returns an ``ExtractorOutput``; the caller records the ArchiveResult.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from django.conf import settings

from core.extractors.addresses import Refusal
from core.extractors.errors import Outcome, timeout_reason, too_large_reason
from core.extractors.fetch import download_limit
from core.extractors.process import CommandResult, binary_version, find_binary, run_command
from core.extractors.redaction import redact_command


class HasURL(Protocol):
    """What ``run`` reads of a snapshot: its URL (so a benchmark can pass a plain object)."""

    url: str


@dataclass
class ExtractorOutput:
    """The result of one ``run``.

    ``output`` is the main output: a path relative to ``out_dir`` (``output.txt``) or a short
    value (the title). ``cmd``/``cmd_version``/``exit_code`` describe the last command that
    ran. ``error`` explains any outcome but SUCCEEDED; ``retry_after`` (seconds) is the server's
    Retry-After, if it sent one. ``facts`` carries what the caller applies to the snapshot:
    ``{"title": str}`` or ``{"outlinks": [url, ...]}``. ``cmd`` is kept as
    ``redact_command`` records it (core/extractors/redaction.py).
    """

    outcome: Outcome
    output: str = ""
    cmd: list[str] = field(default_factory=list)
    cmd_version: str = ""
    exit_code: int | None = None
    error: str = ""
    retry_after: float | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)  # fetches the address policy refused

    def __post_init__(self) -> None:
        # The command is recorded and shown to readers: never with the credentials it ran with.
        self.cmd = redact_command(self.cmd)


class Extractor:
    """Base class: subclasses set ``name`` and ``binaries`` and implement ``run``."""

    name: ClassVar[str]
    binaries: ClassVar[tuple[str, ...]] = ()
    default_timeout: ClassVar[int | None] = None  # None: settings.EXTRACTOR_TIMEOUT
    # Extractors whose results, on the same snapshot, must be final before this one runs (it
    # reads their output when they succeeded): DESIGN.md §4's depends_on.
    depends_on: ClassVar[tuple[str, ...]] = ()
    # False when the ``arguments`` option cannot apply (core/checks.py rejects it then).
    takes_arguments: ClassVar[bool] = True

    @property
    def options(self) -> dict:
        """This extractor's entry in settings.EXTRACTOR_OPTIONS (``{}`` when it has none)."""
        return settings.EXTRACTOR_OPTIONS.get(self.name, {})

    @property
    def timeout(self) -> int:
        """Seconds one run may take before its process group is killed."""
        return self.options.get("timeout") or self.default_timeout or settings.EXTRACTOR_TIMEOUT

    @property
    def max_attempts(self) -> int:
        """Runs before a temporary error becomes "attempts exhausted" (default MAX_ATTEMPTS)."""
        return self.options.get("max_attempts") or settings.MAX_ATTEMPTS

    def binary_path(self, name: str) -> str:
        """Return the path of a required binary; raise LookupError if it is not installed."""
        path = find_binary(name)
        if path is None:
            raise LookupError(f"{name} not found")
        return path

    def version(self, name: str) -> str:
        """Return the installed version line of a required binary ("" if unknown)."""
        path = find_binary(name)
        return binary_version(path) if path else ""

    @property
    def user_agent(self) -> str:
        """The User-Agent this extractor sends: its ``user_agent`` option, else USER_AGENT."""
        return self.options.get("user_agent") or settings.USER_AGENT

    @property
    def arguments(self) -> list[str]:
        """Extra command-line arguments from the ``arguments`` option, passed to the tool
        before the URL (``[]`` when none are set)."""
        return list(self.options.get("arguments", ()))

    def curl_options(self) -> dict:
        """Keyword arguments for ``fetch``: this extractor's timeout, user agent and arguments."""
        return {"timeout": self.timeout, "user_agent": self.user_agent, "arguments": self.arguments}

    @property
    def enabled(self) -> bool:
        """False when EXTRACTOR_OPTIONS turns this extractor off (its results are skipped)."""
        return self.options.get("enabled", True)

    def should_run(self, snapshot: HasURL) -> tuple[bool, str]:
        """Return (True, "") if this extractor applies, else (False, reason for skipping)."""
        if not self.enabled:
            return False, "disabled in EXTRACTOR_OPTIONS"
        for binary in self.binaries:
            if find_binary(binary) is None:
                return False, f"{binary} not found"
        return True, ""

    def run_tool(
        self,
        binary: str,
        cmd: list[str],
        out_dir: Path,
        *,
        log_name: str,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
    ) -> tuple[CommandResult, ExtractorOutput]:
        """Run ``cmd``, ``binary``'s command line, in ``out_dir`` with its log in ``log_name``.

        It is bounded by ``timeout`` seconds (default: this extractor's) and by
        ``download_limit`` (MAX_DOWNLOAD_BYTES a file). Return the finished command and an
        ExtractorOutput recording it: TEMPORARY when it timed out (reported against this
        extractor's timeout), FATAL when it wrote too much, else SUCCEEDED for the caller to
        judge by its exit code and log. Raises OSError if the binary cannot be started.
        """
        done = run_command(
            cmd,
            cwd=out_dir,
            timeout=self.timeout if timeout is None else timeout,
            log_path=out_dir / log_name,
            limit=download_limit(out_dir),
            env=env,
        )
        output = ExtractorOutput(
            outcome=Outcome.SUCCEEDED,
            cmd=cmd,
            cmd_version=self.version(binary),
            exit_code=done.exit_code,
            refusals=done.refusals,
        )
        if done.timed_out:
            output.outcome, output.error = timeout_reason(binary, self.timeout)
        elif done.too_large:
            output.outcome, output.error = too_large_reason(settings.MAX_DOWNLOAD_BYTES)
        return done, output

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Archive ``snapshot.url`` into ``out_dir`` (empty, exists) and say how it went."""
        raise NotImplementedError(f"extractor {self.name!r} does not implement run()")
