"""Save a page as one self-contained HTML file with SingleFile, in the page the shared Chromium
loaded.

SingleFile inlines every stylesheet, image, font and same-origin frame of the rendered page as
data: URIs and adds a Content-Security-Policy that forbids any request, so the file shows the
page offline and never calls out. Its browser-side code comes from ``single-file-cli`` (pinned
in package.json, installed into node_modules by bash .ci/install): the page is loaded as for the
other rendering extractors (core/extractors/rendering.py, over Playwright's DevTools pipe, so no
DevTools port is ever open), then SingleFile's bundle runs in an isolated world of the page (the
page's own scripts cannot see or change it) and its ``getPageData`` is called with the options
single-file-cli itself derives from the command line below, as its lib/cdp-client.js does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import tempfile
import time
from contextlib import suppress
from functools import lru_cache
from pathlib import Path

from django.conf import settings

from core.extractors.base import ExtractorOutput, Format, HasURL, Output
from core.extractors.browser import devtools_session
from core.extractors.errors import Outcome, timeout_reason
from core.extractors.fetch import fetch, header
from core.extractors.html_page import remove, unavailable
from core.extractors.process import find_binary
from core.extractors.rendering import RENDERED_TYPES, ChromiumExtractor

logger = logging.getLogger(__name__)

OUTPUT_HTML = "singlefile.html"
# The moment SingleFile saved the page, in the comment at its top ("<!--\n Page saved with
# SingleFile \n url: ...\n saved date: Thu Nov 26 2026 19:47:42 GMT+0000 (...)\n-->").
SAVED_AT = re.compile(
    rb"\A.{0,1024}?<!--\n Page saved with SingleFile.{0,4096}?\n saved date: ([^\n]{1,200})\n",
    re.DOTALL,
)
# The world SingleFile runs in, as single-file-cli names it.
WORLD_NAME = "singlefile"
# single-file-cli's options for one page: the CLI parses them (with its defaults) into the
# options object its getPageData takes. The page is already loaded: its load settings do not
# apply. Nor does its own pass over deferred (lazy) images, which zooms the page out and waits
# up to 1.5 s for it to go idle: the behaviours (core/extractors/behaviours.py) already brought
# them in, and the pass took as long as loading the page (bench/capture.py).
# Nor are parts of the page pruned to make the file smaller: SingleFile by default drops the
# elements hidden at load, the style rules and fonts nothing uses at load, and the markup's
# whitespace. What is hidden at load (a menu opened by hovering, a tab, a collapsed section, the
# style and font a click would bring in) is part of the page, the markup stays diffable against
# dom.html, and the pruning cost more Chromium CPU than the rest of the capture (on python3-doc
# pages 0.4 s a page of 1.4 with the load; the files grew from 99 to 127 KiB).
CLI_OPTIONS = (
    "--errors-traces-disabled",
    "--load-deferred-images=false",
    "--remove-hidden-elements=false",
    "--remove-unused-styles=false",
    "--remove-unused-fonts=false",
    "--compress-HTML=false",
)
# Seconds the content-type probe may take: it must end well inside the result's lease, which
# is the extractor's timeout plus LEASE_MARGIN.
PROBE_TIMEOUT = 10
# Seconds node may take to hand over SingleFile's bundle and options.
EXPORT_TIMEOUT = 30
# In DATA_DIR: single-file-cli's options and bundle as node exported them, rebuilt at will.
BUNDLE_CACHE_DIR = "cache/singlefile"
# Partial files in that folder start with this; one older than STALE_PARTIAL_SECONDS was left
# by a process killed while writing it.
TEMP_PREFIX = ".tmp-"
STALE_PARTIAL_SECONDS = 3600
# Runs in node: print single-file-cli's parsed options and its browser-side bundle as JSON.
# argv: the package folder, then CLI arguments (a URL and an output name last, as the CLI
# requires them).
EXPORT_SCRIPT = """
const [dir, ...args] = process.argv.slice(1);
process.argv = [process.argv[0], "single-file", ...args];
const { options } = await import(dir + "/options.js");
const { script } = await import(dir + "/lib/single-file-bundle.js");
process.stdout.write(JSON.stringify({ options, script }));
"""
# EXPORT_SCRIPT's arguments after the package folder.
EXPORT_ARGUMENTS = (*CLI_OPTIONS, "about:blank", OUTPUT_HTML)
# Runs in SingleFile's world: its result as {content, title}, content a string.
CAPTURE_SCRIPT = (
    "singlefile.getPageData(%s).then(data => ({content: String(data.content || ''),"
    " title: data.title || ''}))"
)


class SingleFileError(Exception):
    """SingleFile's code failed in the page (the message is its own)."""


class SingleFileExtractor(ChromiumExtractor):
    """Render the page in the shared browser and save it as singlefile.html (self-contained)."""

    name = "singlefile"
    binaries = ("single-file", "chromium")
    outputs = (Output(OUTPUT_HTML, Format.UTF8, stamp=SAVED_AT),)

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Write singlefile.html into ``out_dir``.

        Outcomes as for the other rendering extractors (an HTTP error status classified as for
        curl), in single-file's words: a page that did not load (any network error) TEMPORARY
        "single-file: unreachable <url>"; past the timeout TEMPORARY; a URL Chromium does not
        render SKIPPED, naming its content type; SingleFile failing in the page or saving an
        empty page FATAL. Raises nothing for a page's fault.
        """
        try:
            self._bundle = singlefile_bundle(self.binary_path("single-file"))
            output = super().run(snapshot, out_dir)
        except LookupError as error:
            return unavailable(error)
        except SingleFileError as error:
            remove(out_dir / OUTPUT_HTML)
            return ExtractorOutput(outcome=Outcome.FATAL, error=str(error))
        output.cmd_version = self.version("single-file")
        self._in_its_words(output, snapshot.url, out_dir)
        return output

    def capture(self, page, out_dir: Path) -> str:
        """Run SingleFile in ``page`` (in the browser's thread) and write OUTPUT_HTML.

        Raises SingleFileError when SingleFile fails or saves an empty page.
        """
        options = {**self._bundle["options"], "url": page.url}
        with devtools_session(page) as session:
            frame_id = session.send("Page.getFrameTree")["frameTree"]["frame"]["id"]
            # Universal access lets SingleFile fetch the page's cross-origin resources (as the
            # extension does), through Chromium's own network stack.
            world = session.send(
                "Page.createIsolatedWorld",
                {"frameId": frame_id, "worldName": WORLD_NAME, "grantUniveralAccess": True},
            )["executionContextId"]
            _evaluate(session, world, self._bundle["script"] + ";singlefile.init({})")
            result = _evaluate(session, world, CAPTURE_SCRIPT % json.dumps(options))
        if not result["content"].strip():
            raise SingleFileError("single-file saved an empty page")
        (out_dir / OUTPUT_HTML).write_text(result["content"], encoding="utf-8")
        return OUTPUT_HTML

    def _in_its_words(self, output: ExtractorOutput, url: str, out_dir: Path) -> None:
        """Reword the rendering extractors' failures as single-file's (see ``run``)."""
        error = output.error
        if error.startswith("chromium timed out"):
            output.outcome, output.error = timeout_reason("single-file", self.timeout)
        elif error.startswith("chromium: ERR_"):
            output.outcome, output.error = Outcome.TEMPORARY, f"single-file: unreachable {url}"
        elif error.startswith("not a page Chromium renders (the URL is a download)"):
            output.outcome, output.error = self._no_document(url, out_dir)

    def _no_document(self, url: str, out_dir: Path) -> tuple[Outcome, str]:
        """Say why there was no document: SKIPPED when the URL is a download (its content type
        is one Chromium does not render, or it is sent as an attachment), else TEMPORARY (the
        document went away while it was captured; another attempt captures it)."""
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
        # RFC 6266: an attachment is saved, not shown, whatever its type.
        disposition = header(probe.headers, "Content-Disposition") if probe else ""
        if disposition.split(";")[0].strip().lower() == "attachment":
            return Outcome.SKIPPED, "not a page Chromium renders (Content-Disposition: attachment)"
        return Outcome.TEMPORARY, "single-file found no document to capture (the page changed)"


@lru_cache(maxsize=4)
def singlefile_bundle(single_file: str) -> dict:
    """Return {"options": dict, "script": str}: single-file-cli's options for CLI_OPTIONS and
    its browser-side bundle, from the package that the ``single-file`` binary belongs to.

    Asked of node once per installed package, not once per actor (node took 0.6 s of CPU each
    time): the answer is kept in DATA_DIR/cache/singlefile/ (``_kept_bundle_path`` names it)
    and read from there by every later process. A kept answer that cannot be read is asked
    again. Raises LookupError when node is missing, SingleFileError when the package cannot be
    read.
    """
    node = find_binary("node")
    if node is None:
        raise LookupError("node not found")
    package = Path(os.path.realpath(single_file)).parent
    kept = _kept_bundle_path(package)
    with suppress(OSError, ValueError):
        bundle = json.loads(kept.read_text(encoding="utf-8"))
        if _is_bundle(bundle):
            return bundle
    bundle = _export_bundle(node, package)
    _keep(kept, json.dumps(bundle))
    return bundle


def _export_bundle(node: str, package: Path) -> dict:
    """Ask node for single-file-cli's options and bundle (see ``singlefile_bundle``)."""
    command = [node, "--input-type=module", "-e", EXPORT_SCRIPT, "--", package.as_uri()]
    try:
        done = subprocess.run(
            [*command, *EXPORT_ARGUMENTS],
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT,
            check=True,
        )
        bundle = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        raise SingleFileError(f"cannot read single-file-cli in {package}: {error}") from None
    if not _is_bundle(bundle):
        raise SingleFileError(f"cannot read single-file-cli in {package}: no options or script")
    return bundle


def _is_bundle(value) -> bool:
    """Tell whether ``value`` has the shape ``singlefile_bundle`` returns."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("options"), dict)
        and isinstance(value.get("script"), str)
    )


def _kept_bundle_path(package: Path) -> Path:
    """Return where the export of ``package`` is kept: named by a digest of the export's
    command and of the files it reads (their contents), so that another version, changed
    files or other options make another name and a reinstall of the same files does not."""
    digest = hashlib.sha256()
    for part in (str(package), EXPORT_SCRIPT, *EXPORT_ARGUMENTS):
        digest.update(part.encode() + b"\0")
    sources = [package / "package.json", package / "options.js", *(package / "lib").glob("*.js")]
    for source in sorted(sources):
        with suppress(OSError):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return Path(settings.DATA_DIR) / BUNDLE_CACHE_DIR / f"{digest.hexdigest()[:32]}.json"


def _keep(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a reader never sees half a file, and no
    partial file stays behind), then remove what earlier exports left there. A cache that
    cannot be written only makes the next start slower: the error is logged, not raised."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(partial, path)
        finally:
            Path(partial).unlink(missing_ok=True)  # gone already once it was renamed
    except OSError as error:
        logger.warning("cannot keep single-file-cli's bundle in %s: %s", path.parent, error)
        return
    _remove_stale(path)


def _remove_stale(kept: Path) -> None:
    """Remove the other exports beside ``kept`` (of packages no longer installed) and partial
    files left by a process killed while writing (older than STALE_PARTIAL_SECONDS: a younger
    one may be another process's, still being written). One that cannot be removed stays: it
    only takes room, and the next export tries again."""
    for other in kept.parent.iterdir():
        with suppress(OSError):
            if other.name.startswith(TEMP_PREFIX):
                stale = time.time() - other.stat().st_mtime > STALE_PARTIAL_SECONDS
            else:
                stale = other.suffix == ".json" and other != kept
            if stale:
                other.unlink()


def _evaluate(session, context_id: int, expression: str):
    """Return the value of ``expression`` (awaited) in execution context ``context_id``.

    Raises SingleFileError with the page's exception message when it throws.
    """
    reply = session.send(
        "Runtime.evaluate",
        {
            "expression": expression,
            "contextId": context_id,
            "awaitPromise": True,
            "returnByValue": True,
        },
    )
    if "exceptionDetails" in reply:
        details = reply["exceptionDetails"]
        message = (details.get("exception") or {}).get("description") or details.get("text")
        first = (message or "unknown error").strip().splitlines()[0]
        raise SingleFileError(f"single-file failed in the page: {first}")
    return reply["result"].get("value")
