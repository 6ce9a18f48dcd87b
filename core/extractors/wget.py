"""Archive a page with GNU wget: the page and its requisites, links converted, and a WARC."""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from core.extractors.base import Extractor, ExtractorOutput, Format, HasURL, Output
from core.extractors.credentials import (
    PersonaFiles,
    persona_arguments,
    persona_files,
    wget_config,
)
from core.extractors.errors import Outcome, classify_wget_exit, egress_failure
from core.extractors.fetch import parse_retry_after
from core.extractors.html_page import unavailable
from core.extractors.process import CommandResult
from core.extractors.requisites import Missing, missing_requisites

WARC_DIR = "warc"  # core/folder/wacz.py packages <extractor>/warc/*.warc[.gz]
# wget writes its WARC uncompressed, and finalizing packs it (core/services/dedup.py): wget
# compresses at zlib's level 9, which cost more CPU than all else it does on a page (48 of 67
# ms a page of the Python docs), and most of a page's records (its requisites, stored once
# already) become revisits whose payload is never compressed at all.
WARC_PATH = f"{WARC_DIR}/archive.warc"
NETWORK_TIMEOUT_MARGIN = 5  # seconds
# wget --no-verbose logs a saved file as: <date> <time> URL:<url> [<size>] -> "<path>" [1]
SAVED_LINE = re.compile(r' URL:\S+ \[[^\]]*\] -> "(?P<path>[^"]+)" \[\d+\]$')
# ... and a failed one as "<url>:" then: <date> <time> ERROR 404: Not Found.
ERROR_LINE = re.compile(r" ERROR (?P<status>\d{3}): ")
# ... and a redirect loop (more than --max-redirect hops) as: 10 redirections exceeded.
REDIRECTS_LINE = re.compile(r"^\d+ redirections exceeded\.$")
# Exit codes that, once the page itself is saved, can only come from its requisites (an image
# 404s, a CDN does not resolve, a third-party certificate fails): the capture still stands.
REQUISITE_EXITS = frozenset({4, 5, 6, 7, 8})
LOG_NAME = "wget.log"
# A requisite that failed for a passing reason (a network error, 429, 5xx) is fetched again in
# the same attempt: the whole capture once more, in RETRY_DIR (inside the output folder while it
# runs), with its log kept as RETRY_LOG. Only the whole capture keeps wget's converted links
# right: a run of the missing URLs alone would leave the page pointing at the live web.
RETRY_DIR = ".retry"  # no host's folder starts with a dot
RETRY_LOG = "wget.retry.log"
MIN_RETRY_SECONDS = 1  # of the extractor's timeout left, below which no retry round starts


@dataclass
class MainPage:
    """What wget's log says of the URL it was given: the file saved, the HTTP error status, or
    that its redirects never ended."""

    path: str | None = None
    http_status: int | None = None
    too_many_redirects: bool = False


def read_log(text: str) -> MainPage:
    """Find the main page in a ``--no-verbose`` log: the first file saved or the first error.

    wget fetches the given URL (after redirects) before any requisite and stops there if it
    fails, so whichever comes first belongs to the main page.
    """
    for line in text.splitlines():
        if saved := SAVED_LINE.search(line):
            return MainPage(path=saved["path"])
        if error := ERROR_LINE.search(line):
            return MainPage(http_status=int(error["status"]))
        if REDIRECTS_LINE.match(line):
            return MainPage(too_many_redirects=True)
    return MainPage()


def retry_after_from_warc(warc: Path) -> float | None:
    """Return the Retry-After (seconds) of the first final response in ``warc``, if it has one.

    Redirects (3xx) are passed over: the first other response is the main page's. Retry-After
    is seconds or an HTTP-date (RFC 9110 §10.2.3).
    """
    try:
        with open(warc, "rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                if record.http_headers.get_statuscode().startswith("3"):
                    continue
                return parse_retry_after(record.http_headers.get_header("Retry-After"))
    except (OSError, ArchiveLoadFailed):
        pass  # no WARC, or a broken one: no hint, the caller's backoff applies
    return None


class WgetExtractor(Extractor):
    """Mirror the page and its requisites with wget, converting links, and record a WARC."""

    name = "wget"
    binaries = ("wget",)
    outputs = (
        Output(f"{WARC_DIR}/*.warc.gz", Format.WARC),
        Output(f"{WARC_DIR}/*.warc", Format.WARC),
    )

    def command(self, wget: str, url: str, files: PersonaFiles | None = None) -> list[str]:
        """Return the wget command line for ``url``, to run in the output folder, sending the
        persona's cookies (``--load-cookies``) and headers (its wgetrc) from ``files``."""
        return [
            wget,
            # No /etc/wgetrc nor ~/.wgetrc: none may turn the egress proxy off (use_proxy).
            wget_config(files),
            "--no-verbose",
            "--adjust-extension",
            "--convert-links",
            "--force-directories",
            "--page-requisites",
            "--span-hosts",  # requisites often live on another host (a CDN)
            "--no-parent",
            "-e", "robots=off",  # one page and what it needs to render, as a browser would
            # Safe on every file system, and ASCII: a URL's non-UTF-8 bytes stay %-escaped in
            # the file name instead of becoming names that index.json cannot hold.
            "--restrict-file-names=windows,ascii",
            # wget's own network timeout outlives the run, so a stalled server always ends the
            # same way: the run's deadline kills the group ("wget timed out after N s").
            f"--timeout={self.timeout + NETWORK_TIMEOUT_MARGIN}",
            # ... but a server that does not accept the connection fails at once (after --timeout,
            # which sets all three, this sets the connect timeout alone).
            f"--connect-timeout={settings.CONNECT_TIMEOUT_SECONDS:g}",
            "--tries=1",  # retries belong to the ArchiveResult's backoff, not to wget
            "--max-redirect=10",
            f"--user-agent={self.user_agent}",
            f"--warc-file={WARC_PATH.removesuffix('.warc')}",
            "--no-warc-compression",
            *persona_arguments(files, "wget"),
            *self.arguments,
            url,
        ]  # fmt: skip

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Save the page under ``out_dir/<host>/...`` and the WARC in ``out_dir/warc/``.

        Output: the main page's path relative to ``out_dir``, and in ``missing`` the requisites
        it lacks. When one failed for a passing reason, the capture is made once more within
        the timeout, and the one that lacks fewer files is kept (``_retry_round``). What wget
        writes is bounded by ``download_limit``: no file (the WARC included) over
        MAX_DOWNLOAD_BYTES.
        """
        try:
            wget = self.binary_path("wget")
        except LookupError as error:
            return unavailable(error)
        started = time.monotonic()
        done, output, saved = self._capture(wget, snapshot.url, out_dir, LOG_NAME)
        if saved is None:  # the capture does not stand: ``output`` says why
            return output
        output.output = saved
        missing = _missing(out_dir, LOG_NAME, done)
        if any(item.temporary for item in missing):
            left = self.timeout - (time.monotonic() - started)
            missing = self._retry_round(wget, snapshot.url, out_dir, output, missing, left)
        output.missing = [item.as_json() for item in missing]
        return output

    def _capture(
        self, wget: str, url: str, out_dir: Path, log_name: str, timeout: float | None = None
    ) -> tuple[CommandResult, ExtractorOutput, str | None]:
        """Run wget once into ``out_dir``; return the command, its output (classified when it
        failed) and the saved page's path, None unless the capture stands."""
        (out_dir / WARC_PATH).parent.mkdir(parents=True, exist_ok=True)
        with persona_files(self.credentials) as files:
            done, output = self.run_tool(
                "wget",
                self.command(wget, url, files),
                out_dir,
                log_name=log_name,
                timeout=timeout,
            )
        if done.timed_out or done.too_large:
            return done, output, None
        main = read_log((out_dir / log_name).read_text(encoding="utf-8", errors="replace"))
        saved = _saved_file(out_dir, main.path)
        if saved is None or done.exit_code not in (0, *REQUISITE_EXITS):
            # wget fetches requisites only once the page is saved: what the egress proxy met
            # was on the way to the page itself.
            failure = egress_failure(done.refusals, done.unreachable)
            if failure:
                output.outcome, output.error = failure
                return done, output, None
            return done, self._failed(output, main, out_dir, url), None
        warc = out_dir / WARC_PATH
        if not warc.is_file() or warc.stat().st_size == 0:
            output.outcome, output.error = Outcome.FATAL, "wget wrote no WARC"
            return done, output, None
        return done, output, saved

    def _retry_round(
        self,
        wget: str,
        url: str,
        out_dir: Path,
        output: ExtractorOutput,
        missing: list[Missing],
        left: float,
    ) -> list[Missing]:
        """Capture ``url`` once more in ``out_dir/RETRY_DIR`` within ``left`` seconds; return
        what the capture kept lacks.

        The new capture replaces the first (its files, WARC and main output in ``output``)
        only if it stands and lacks fewer files; otherwise it is dropped, its log aside. One
        round, whatever it brings: the result's backoff is for a page that did not arrive.
        """
        if left < MIN_RETRY_SECONDS:
            return missing
        retry_dir = out_dir / RETRY_DIR
        retry_dir.mkdir()
        done, again, saved = self._capture(wget, url, retry_dir, RETRY_LOG, timeout=left)
        if (retry_dir / RETRY_LOG).is_file():
            (retry_dir / RETRY_LOG).rename(out_dir / RETRY_LOG)
        output.refusals = _union(output.refusals, done.refusals)
        still = _missing(retry_dir, RETRY_LOG, done, log_dir=out_dir) if saved else missing
        if saved is None or len(still) >= len(missing):
            shutil.rmtree(retry_dir)
            return missing
        for path in list(out_dir.iterdir()):
            if path != retry_dir and path.name not in (LOG_NAME, RETRY_LOG):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        for path in list(retry_dir.iterdir()):
            path.rename(out_dir / path.name)
        retry_dir.rmdir()
        output.output, output.exit_code = saved, again.exit_code
        return still

    def _failed(
        self, output: ExtractorOutput, main: MainPage, out_dir: Path, url: str
    ) -> ExtractorOutput:
        """Classify a run that did not save the page (or ended in a real error)."""
        output.outcome, output.error = classify_wget_exit(
            output.exit_code, main.http_status, too_many_redirects=main.too_many_redirects
        )
        if output.outcome is Outcome.SUCCEEDED:
            output.outcome, output.error = Outcome.FATAL, "wget saved no page (see wget.log)"
        elif main.http_status is not None:
            output.error = f"{output.error} from {url}"
            output.http_status = main.http_status
            output.retry_after = retry_after_from_warc(out_dir / WARC_PATH)
        return output


def _saved_file(out_dir: Path, path: str | None) -> str | None:
    """Return ``path`` (relative to ``out_dir``) if it is a non-empty file inside it."""
    if path is None:
        return None
    root = out_dir.resolve()
    file = (out_dir / path).resolve()
    if not file.is_relative_to(root) or not file.is_file() or file.stat().st_size == 0:
        return None
    return file.relative_to(root).as_posix()


def _missing(
    folder: Path, log_name: str, done: CommandResult, *, log_dir: Path | None = None
) -> list[Missing]:
    """Return what the capture in ``folder`` lacks, from its WARC and its log (in ``log_dir``,
    ``folder`` unless given)."""
    log = (log_dir or folder) / log_name
    return missing_requisites(
        folder / WARC_PATH,
        log.read_text(encoding="utf-8", errors="replace"),
        refusals=done.refusals,
        unreachable=done.unreachable,
    )


def _union(first: list, second: list) -> list:
    """Return ``first`` and what ``second`` adds to it, in order, each once."""
    return [*first, *(item for item in second if item not in first)]
