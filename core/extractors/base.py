"""The one base every extractor subclasses, and what a run returns (DESIGN.md §4).

An extractor is a small class: a ``name``, the ``binaries`` it needs, a ``timeout``,
``should_run(snapshot)`` and ``run(snapshot, out_dir)``. Extractors never touch the database:
``run`` writes files into ``out_dir`` (a fresh temporary folder that the caller moves into place
only on success) and returns an ``ExtractorOutput``; the caller records the ArchiveResult.

Each class also declares what it leaves behind, for the modules that read a snapshot folder
(they ask core/extractors/registry.py, never an extractor's module): ``main_output`` (a file,
a folder or a value), ``outputs`` (files whose format the integrity check verifies),
``shown_as`` and ``index_image`` (how the public pages show the main output), ``search_text``
(the file whose text full-text search indexes) and ``gives_title``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, Self

from django.conf import settings

from core.extractors.addresses import Refusal
from core.extractors.credentials import Credentials
from core.extractors.errors import Outcome, timeout_reason, too_large_reason, unreachable
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
    ran. ``error`` explains any outcome but SUCCEEDED; ``http_status`` is the HTTP status of the
    page's final response when the run failed on one (404, 429, 503...), and ``retry_after``
    (seconds) the server's Retry-After, if it sent one. ``facts`` carries what the caller
    applies to the snapshot: ``{"title": str}`` or ``{"outlinks": [url, ...]}``. ``cmd`` is
    kept as ``redact_command`` records it (core/extractors/redaction.py). ``missing`` lists what a
    capture that stands still lacks (a page requisite that never arrived), as
    ``{"url": str, "reason": str}`` objects; what the address policy refused is in
    ``refusals`` instead, never in both.
    """

    outcome: Outcome
    output: str = ""
    cmd: list[str] = field(default_factory=list)
    cmd_version: str = ""
    exit_code: int | None = None
    error: str = ""
    http_status: int | None = None
    retry_after: float | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)  # fetches the address policy refused
    missing: list[dict[str, str]] = field(default_factory=list)  # files the capture lacks

    def __post_init__(self) -> None:
        # The command is recorded and shown to readers: never with the credentials it ran with.
        self.cmd = redact_command(self.cmd)

    @property
    def unreachable(self) -> bool:
        """True when the run failed because the page's server was not reached or did not
        answer: it did not resolve, refused or reset the connection, or the page did not arrive
        in time (core/extractors/errors.py, ``unreachable``)."""
        return unreachable(self.outcome, self.error)


class Format(StrEnum):
    """A file format core/folder/formats.py verifies, named by an ``Output``."""

    WARC = "warc"  # every record parses to its end and its digests match
    PNG = "png"  # every chunk's CRC holds and the file ends with IEND
    PDF = "pdf"  # ends in %%EOF and its pages can be listed
    JSON = "json"  # parses as JSON
    UTF8 = "utf-8"  # text or HTML: decodes as UTF-8


class MainOutput(StrEnum):
    """What a result's ``output`` names: a file or a folder in the extractor's folder, or a
    value that is no file (the title)."""

    FILE = "file"
    DIRECTORY = "directory"
    VALUE = "value"


class ShownAs(StrEnum):
    """How a snapshot's page shows a succeeded result's main output."""

    LINK = "link"  # a link that opens the file
    IMAGE = "image"  # the image itself
    VALUE = "value"  # the output's text (the title)


# A check of one file: its problems, [] when sound. Raises OSError when the file cannot be read.
FileCheck = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Output:
    """A file an extractor writes in a known format, which must not be empty and is verified.

    ``path`` is relative to the extractor's folder; a pattern (fnmatch, where ``*`` spans
    folders: ``warc/*.warc.gz``) stands for every file it matches. ``check`` is a ``Format``,
    or a ``FileCheck`` of the extractor's own for a format core/folder/formats.py does not
    know. Files an extractor writes that are not declared (logs, a site's own bytes) may be
    empty and are checked for existence only. ``stamp``, for a file its tool writes the time
    into, finds that time (each match's first group): two captures whose files differ only
    there keep one file (core/folder/stamps.py).
    """

    path: str
    check: Format | FileCheck
    stamp: re.Pattern[bytes] | None = None


class Extractor:
    """Base class: subclasses set ``name`` and ``binaries``, implement ``run``, and declare
    what they leave behind (``main_output`` to ``gives_title``, where the defaults fit most)."""

    name: ClassVar[str]
    binaries: ClassVar[tuple[str, ...]] = ()
    default_timeout: ClassVar[int | None] = None  # None: settings.EXTRACTOR_TIMEOUT
    # Extractors whose results, on the same snapshot, must be final before this one runs (it
    # reads their output when they succeeded): DESIGN.md §4's depends_on.
    depends_on: ClassVar[tuple[str, ...]] = ()
    # False when the ``arguments`` option cannot apply (core/checks.py rejects it then).
    takes_arguments: ClassVar[bool] = True
    main_output: ClassVar[MainOutput] = MainOutput.FILE
    outputs: ClassVar[tuple[Output, ...]] = ()
    shown_as: ClassVar[ShownAs] = ShownAs.LINK
    # Where the archive's index shows the main output, an image, beside each snapshot.
    index_image: ClassVar[Literal["favicon", "thumbnail"] | None] = None
    # The file (relative to the extractor's folder) whose text search indexes; of several
    # extractors that give one, the existing file of the highest priority is read.
    search_text: ClassVar[str | None] = None
    search_text_priority: ClassVar[int] = 0
    # True when ``output`` is the page's title (the snapshot's, unless its input named one).
    gives_title: ClassVar[bool] = False
    # True when the extractor captures the page that the actor's shared browser loaded: the
    # extractors that share a visit are run one after the other by one actor, so that the page
    # is loaded once for all of them (issue 18).
    shares_visit: ClassVar[bool] = False
    # True when the extractor reads what another extractor of the snapshot saved (wget's WARC,
    # the DOM) instead of asking the page's host: its runs neither count toward nor wait under
    # HOST_CONCURRENCY (a paused host still holds them). Without that saved copy it fetches the
    # page itself, once, outside the limit.
    reads_saved: ClassVar[bool] = False
    # Of the WARCs a snapshot's extractors write, replay plays those of the highest priority
    # first, and the others only for the URLs those lack (core/folder/wacz.py).
    replay_priority: ClassVar[int] = 0
    # Modules ``run`` imports on first use rather than at the top, so that processes that never
    # run it (the idle orchestrator above all) do not load them. A result actor imports them
    # ahead, in a thread of its own from its first command on (core/extractors/preloading.py).
    lazy_imports: ClassVar[tuple[str, ...]] = ()

    def __init__(self, credentials: Credentials | None = None) -> None:
        # The crawl's persona, decrypted, for this instance's runs: None when the crawl signs
        # in as no one. The registry's instances, shared by every run, hold none.
        self.credentials = credentials

    def with_credentials(self, credentials: Credentials | None) -> Self:
        """Return a copy of this extractor that runs with ``credentials`` (a persona's, for one
        snapshot: core/services/results.py), leaving this one as it is."""
        signed_in = copy.copy(self)
        signed_in.credentials = credentials
        return signed_in

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
        """The User-Agent this extractor sends: the persona's, else its ``user_agent`` option,
        else USER_AGENT."""
        if self.credentials is not None and self.credentials.user_agent:
            return self.credentials.user_agent
        return self.options.get("user_agent") or settings.USER_AGENT

    @property
    def arguments(self) -> list[str]:
        """Extra command-line arguments from the ``arguments`` option, passed to the tool
        before the URL (``[]`` when none are set)."""
        return list(self.options.get("arguments", ()))

    def curl_options(self) -> dict:
        """Keyword arguments for ``fetch``: this extractor's timeout, user agent, arguments and
        the persona's credentials."""
        return {
            "timeout": self.timeout,
            "user_agent": self.user_agent,
            "arguments": self.arguments,
            "credentials": self.credentials,
        }

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
