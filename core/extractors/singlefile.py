"""Save a page as one self-contained HTML file with SingleFile, rendered by the shared Chromium.

``single-file-cli`` (pinned in package.json, installed into node_modules by bash .ci/install)
inlines every stylesheet, image, font and frame of the rendered page as data: URIs and adds a
Content-Security-Policy that forbids any request, so the file shows the page offline and never
calls out. It connects to the actor's shared browser (``--browser-server``) instead of
launching a Chromium of its own.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from pathlib import Path

from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.browser import BrowserUnavailable, shared_browser
from core.extractors.errors import (
    Outcome,
    classify_http_status,
    timeout_reason,
)
from core.extractors.fetch import fetch, header
from core.extractors.page import remove, unavailable
from core.extractors.rendering import RENDERED_TYPES

OUTPUT_HTML = "singlefile.html"
# SingleFile's JSON output (--output-json): the page's content plus its main response's status.
RESULT_JSON = ".singlefile.json"
# Milliseconds to wait once the page's network is idle before capturing, for late scripts.
SETTLE_MS = 500
ACCEPT_LANGUAGE = "en-US,en;q=0.9"  # what Chromium itself sends by default
# What SingleFile prints when the browser could not load the page at all (DNS, refused, reset).
UNREACHABLE = "Unreachable URL"
# What it prints when its own deadlines (--browser-load-max-time, --browser-capture-max-time)
# passed.
OWN_TIMEOUTS = ("Load timeout", "Capture timeout")
# What it prints when it found no document to capture: the URL is one Chromium downloads
# instead of rendering, or (seen under load) the page's document went away while SingleFile
# injected its script. A probe of the content type tells the two apart.
NO_DOCUMENT = "Execution context not found for SingleFile world"
# Seconds the content-type probe may take: it must end well inside the result's lease, which
# is the extractor's timeout plus LEASE_MARGIN, most of it used up by single-file itself.
PROBE_TIMEOUT = 10
# Seconds past the extractor's timeout before single-file's group is killed: SingleFile's own
# load deadline fires first, and is reported as it says.
KILL_GRACE = 3
# The DevTools HTTP endpoint is on 127.0.0.1: never through a proxy from the environment.
LOCAL_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class SingleFileExtractor(Extractor):
    """Render the page in the shared browser and save it as singlefile.html (self-contained)."""

    name = "singlefile"
    binaries = ("single-file", "chromium")

    def command(self, single_file: str, cdp_url: str, url: str, out_dir: Path) -> list[str]:
        """Return the single-file command line for ``url``, writing RESULT_JSON in ``out_dir``."""
        load_ms = self.timeout * 1000
        return [
            single_file,
            f"--browser-server={cdp_url}",
            f"--user-agent={self.user_agent}",
            # With --browser-server, SingleFile sets the user agent (CDP's setUserAgentOverride)
            # only when a platform or language is asked for too (lib/cdp-client.js).
            f"--accept-language={ACCEPT_LANGUAGE}",
            f"--browser-load-max-time={load_ms}",
            f"--browser-capture-max-time={load_ms}",
            f"--browser-wait-until-delay={SETTLE_MS}",
            # Each fallback loads the page again with a fresh load deadline, which the run's
            # own deadline (timeout plus KILL_GRACE) leaves no time for.
            "--browser-wait-until-fallback=false",
            "--output-json",  # to learn the main response's HTTP status
            "--errors-traces-disabled",
            *self.arguments,
            url,
            str(out_dir / RESULT_JSON.removesuffix(".json")),
        ]

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Write singlefile.html into ``out_dir``; the HTTP status is classified as for curl."""
        try:
            single_file = self.binary_path("single-file")
            browser = shared_browser()
        except LookupError as error:
            return unavailable(error)
        except BrowserUnavailable as error:
            return ExtractorOutput(outcome=Outcome.TEMPORARY, error=str(error))
        cmd = self.command(single_file, browser.cdp_url, snapshot.url, out_dir)
        tabs_before = _page_targets(browser.cdp_url)
        try:
            # SingleFile's own load deadline comes first; the group is killed a little later.
            _, output = self.run_tool(
                "single-file",
                cmd,
                out_dir,
                log_name="single-file.log",
                timeout=self.timeout + KILL_GRACE,
            )
        finally:
            # A killed single-file leaves its tab open in the shared browser, still loading.
            _close_targets(browser.cdp_url, _page_targets(browser.cdp_url) - tabs_before)
        if output.outcome is Outcome.SUCCEEDED:
            self._read_result(output, out_dir, snapshot.url)
        (out_dir / RESULT_JSON).unlink(missing_ok=True)  # half-written when single-file was killed
        return output

    def _read_result(self, output: ExtractorOutput, out_dir: Path, url: str) -> None:
        """Turn RESULT_JSON into singlefile.html, or say why there is none."""
        result_path = out_dir / RESULT_JSON
        log = (out_dir / "single-file.log").read_text(encoding="utf-8", errors="replace")
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            if UNREACHABLE in log:
                output.outcome, output.error = Outcome.TEMPORARY, f"single-file: unreachable {url}"
            elif any(message in log for message in OWN_TIMEOUTS):
                output.outcome, output.error = timeout_reason("single-file", self.timeout)
            elif NO_DOCUMENT in log:
                output.outcome, output.error = self._no_document(url, out_dir)
            else:
                last = log.strip().splitlines()[-1] if log.strip() else "no output"
                output.outcome, output.error = Outcome.FATAL, f"single-file saved nothing: {last}"
            return
        finally:
            result_path.unlink(missing_ok=True)
        status = (result.get("response") or {}).get("status")
        if status is not None and classify_http_status(status) is not Outcome.SUCCEEDED:
            output.outcome = classify_http_status(status)
            output.error = f"HTTP {status} from {url}"
            return
        content = result.get("content") or ""
        if not content.strip():
            output.outcome, output.error = Outcome.FATAL, "single-file saved an empty page"
            return
        (out_dir / OUTPUT_HTML).write_text(content, encoding="utf-8")
        output.output = OUTPUT_HTML

    def _no_document(self, url: str, out_dir: Path) -> tuple[Outcome, str]:
        """Say why SingleFile found no document: SKIPPED when the URL's content type is one
        Chromium does not render (a download), else TEMPORARY (the document went away while it
        was captured; another attempt captures it)."""
        body = out_dir / ".probe-body"
        log = out_dir / ".probe.log"
        try:
            probe = fetch(
                url,
                body_path=body,
                headers_path=None,
                log_path=log,
                timeout=PROBE_TIMEOUT,
                user_agent=self.user_agent,
            )
        except LookupError:  # no curl: nothing to tell the two apart with
            probe = None
        finally:
            remove(body)
            remove(log)
        content_type = header(probe.headers, "Content-Type") if probe else ""
        media_type = content_type.split(";")[0].strip().lower()
        if media_type and not media_type.startswith(RENDERED_TYPES):
            return Outcome.SKIPPED, f"not a page Chromium renders ({media_type})"
        return Outcome.TEMPORARY, "single-file found no document to capture (the page changed)"


def _page_targets(cdp_url: str) -> set[str]:
    """Return the ids of the browser's tabs ("page" targets), from its DevTools HTTP endpoint
    (empty if the browser does not answer)."""
    try:
        with LOCAL_HTTP.open(f"{cdp_url}/json/list", timeout=5) as reply:
            return {target["id"] for target in json.load(reply) if target.get("type") == "page"}
    except (OSError, ValueError, KeyError):
        return set()


def _close_targets(cdp_url: str, target_ids: set[str]) -> None:
    """Close the browser's tabs ``target_ids`` (DevTools' /json/close)."""
    for target_id in target_ids:
        with contextlib.suppress(OSError):
            LOCAL_HTTP.open(f"{cdp_url}/json/close/{target_id}", timeout=5).close()
