"""Save what the browser fetched while it loaded a page, as WARC: what replay plays.

wget runs no JavaScript, so its WARC holds a scripted page's empty shell. This extractor writes
the shared Chromium's own traffic instead (core/extractors/recorder.py): every request and
response of the page's visit, from its first request through its behaviours (scrolling, lazy
images, infinite scroll: core/extractors/behaviours.py) and the captures that ran before it in
the same visit (screenshot, pdf, dom, singlefile). The snapshot's WACZ then replays from this
WARC first, and from wget's only for what the browser did not fetch (core/folder/wacz.py).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from core.extractors.base import ExtractorOutput, Format, HasURL, Output
from core.extractors.recorder import recorder_of
from core.extractors.rendering import ChromiumExtractor, on_the_way

WARC_DIR = "warc"  # core/folder/wacz.py packages <extractor>/warc/*.warc[.gz]
WARC_NAME = "browser.warc.gz"


class RecordingExtractor(ChromiumExtractor):
    """Write the browser's requests and responses for the page to warc/browser.warc.gz."""

    name = "recording"
    outputs = (Output(f"{WARC_DIR}/*.warc.gz", Format.WARC),)
    # Replay prefers this WARC to wget's (core/folder/wacz.py).
    replay_priority = 1

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Write the WARC into ``out_dir``; outcomes as for the other rendering extractors.

        What the record lacks (a request that failed or was still loading, a body the browser
        no longer held or one past MAX_DOWNLOAD_BYTES) is listed in ``missing``, except what
        the address policy refused, which is in ``refusals``.
        """
        self._missing: list[dict[str, str]] = []
        output = super().run(snapshot, out_dir)
        output.missing = [
            entry for entry in self._missing if not on_the_way(output.refusals, [entry["url"]])
        ]
        return output

    def capture(self, page, out_dir: Path) -> str:
        """Write warc/browser.warc.gz from the recorder of ``page``'s context (in the
        browser's thread); return its path relative to ``out_dir``.

        Raises RuntimeError when the page was loaded without a recorder (not by
        core/extractors/browser.py), OSError when the file cannot be written.
        """
        recorder = recorder_of(page)
        if recorder is None:
            raise RuntimeError("the page was loaded without a recorder")
        (out_dir / WARC_DIR).mkdir(exist_ok=True)
        path = out_dir / WARC_DIR / WARC_NAME
        browser = page.context.browser
        software = f"Vellum, Chromium {browser.version if browser else ''}".strip()
        recording = recorder.write_warc(
            path, software=software, max_bytes=settings.MAX_DOWNLOAD_BYTES
        )
        self._missing = recording.missing
        return f"{WARC_DIR}/{WARC_NAME}"
