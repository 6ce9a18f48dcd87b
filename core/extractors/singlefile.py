"""Save a page as one self-contained HTML file with SingleFile, rendered by the shared Chromium.

``single-file-cli`` (pinned in package.json, installed into node_modules by bash .ci/install)
inlines every stylesheet, image, font and frame of the rendered page as data: URIs and adds a
Content-Security-Policy that forbids any request, so the file shows the page offline and never
calls out. It connects to the actor's shared browser (``--browser-server``) instead of
launching a Chromium of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.browser import BrowserUnavailable, shared_browser
from core.extractors.errors import (
    Outcome,
    classify_http_status,
    timeout_reason,
    too_large_reason,
)
from core.extractors.fetch import download_limit
from core.extractors.process import run_command

OUTPUT_HTML = "singlefile.html"
# SingleFile's JSON output (--output-json): the page's content plus its main response's status.
RESULT_JSON = ".singlefile.json"
# Milliseconds to wait once the page's network is idle before capturing, for late scripts.
SETTLE_MS = 500
# What SingleFile prints when the browser could not load the page at all (DNS, refused, reset).
UNREACHABLE = "Unreachable URL"


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
            f"--browser-load-max-time={load_ms}",
            f"--browser-capture-max-time={load_ms}",
            f"--browser-wait-until-delay={SETTLE_MS}",
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
        except (LookupError, BrowserUnavailable) as error:
            outcome = Outcome.SKIPPED if "not found" in str(error) else Outcome.TEMPORARY
            return ExtractorOutput(outcome=outcome, error=str(error))
        cmd = self.command(single_file, browser.cdp_url, snapshot.url, out_dir)
        # Node and SingleFile's own deadlines come first; the group is killed a little later.
        done = run_command(
            cmd,
            cwd=out_dir,
            timeout=2 * self.timeout + 10,
            log_path=out_dir / "single-file.log",
            limit=download_limit(out_dir),
        )
        output = ExtractorOutput(
            outcome=Outcome.SUCCEEDED,
            cmd=cmd,
            cmd_version=self.version("single-file"),
            exit_code=done.exit_code,
        )
        if done.timed_out:
            output.outcome, output.error = timeout_reason("single-file", self.timeout)
        elif done.too_large:
            output.outcome, output.error = too_large_reason(settings.MAX_DOWNLOAD_BYTES)
        else:
            self._read_result(output, out_dir, snapshot.url)
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
