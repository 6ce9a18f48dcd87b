"""Save a page's audio and video with yt-dlp: the media files and their metadata (.info.json).

yt-dlp runs as a subprocess through ``run_command``, never in-process: its timeout kills the
whole process group, and whatever it does wrong cannot take the actor down with it. It knows the
media of many sites by their URL, and its generic extractor finds HTML5 ``<video>``/``<audio>``
(with their ``<source>``) on any other page; a page without media ends SKIPPED.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.errors import Outcome, classify_http_status, timeout_reason, too_large_reason
from core.extractors.fetch import download_limit
from core.extractors.page import remove, unavailable
from core.extractors.process import run_command

LOG_NAME = "media.log"
# yt-dlp appends the path of each media file it finished (after_move) here; read, then deleted.
FILES_LIST = ".media-files"
# --restrict-filenames makes the title and id ASCII without spaces, but not the template's own
# characters, so those are URL-safe too. At most 100 bytes of title and 80 of id (the generic
# extractor's id is the URL's last segment) keep a name within a file system's 255 bytes.
OUTPUT_TEMPLATE = "%(title).100B-%(id).80B.%(ext)s"
NETWORK_TIMEOUT_MARGIN = 5  # seconds
NO_MEDIA = "no audio or video found"

# yt-dlp's own audio and video extensions (yt_dlp.utils.MEDIA_EXTENSIONS, video and audio).
MEDIA_EXTENSIONS = (
    "avi", "flv", "mkv", "mov", "mp4", "webm", "3g2", "3gp", "f4v", "mk3d", "divx", "mpg", "ogv",
    "m4v", "wmv", "aiff", "alac", "flac", "m4a", "mka", "mp3", "ogg", "opus", "wav", "aac", "ape",
    "asf", "f4a", "f4b", "m4b", "m4r", "oga", "ogx", "spx", "vorbis", "wma", "weba",
)  # fmt: skip
# For a URL that is neither HTML nor served as audio or video (a PDF, an image, JSON), yt-dlp's
# generic extractor guesses "URL could be a direct video link" and would download it whole. It
# counts as media only if its name says so (a video served as application/octet-stream):
# --match-filters are alternatives, so an entry passes if it is not such a direct link, or if
# its extension is a media one. A rejected entry is skipped before it is downloaded.
MATCH_FILTERS = ("!direct", f"ext~='^(?:{'|'.join(MEDIA_EXTENSIONS)})$'")

# What yt-dlp writes when it finds nothing to download: its generic extractor's "Unsupported
# URL: <url>", "No video formats found!", and "no suitable InfoExtractor for URL" (generic off).
NO_MEDIA_ERROR = re.compile(r"Unsupported URL: |No video formats found|no suitable InfoExtractor")
# Its HTTP downloader refuses a file whose Content-Length is over --max-filesize, and says so:
#   [download] File is larger than max-filesize (300000 bytes > 100000 bytes). Aborting.
# It then skips the file and still exits 0, so the log is the only sign. A body without
# Content-Length is not checked by yt-dlp at all: run_command's OutputLimit stops that one.
TOO_LARGE_LINE = re.compile(r"File is larger than max-filesize")
HTTP_ERROR = re.compile(r"HTTP Error (?P<status>\d{3})")
# Network failures, whichever of yt-dlp's HTTP backends reports them: its TransportError, and
# the operating system's words for the common cases (refused, reset, DNS, a stalled read).
NETWORK_ERROR = re.compile(
    r"TransportError|IncompleteRead|Connection (?:refused|reset|aborted)|timed out|"
    r"Failed to resolve|Name or service not known|Temporary failure in name resolution"
)
ERROR_LINE = re.compile(r"^ERROR: (?P<message>.+)$", re.MULTILINE)
# yt-dlp repeats the underlying exception after the message: "... (caused by TransportError(...))".
CAUSED_BY = re.compile(r" \(caused by .*$")
MAX_ERROR_CHARS = 300


def classify_log(text: str, exit_code: int) -> tuple[Outcome, str]:
    """Classify a yt-dlp run that exited non-zero by the first ``ERROR:`` line of its log.

    No media on the page: SKIPPED. An HTTP error: by its status (404 fatal, 5xx temporary). A
    network failure: TEMPORARY. Anything else: FATAL, quoting yt-dlp.
    """
    first = ERROR_LINE.search(text)
    if first is None:
        return Outcome.FATAL, f"yt-dlp failed (exit {exit_code}); see {LOG_NAME}"
    message = first["message"].strip()
    if NO_MEDIA_ERROR.search(message):
        return Outcome.SKIPPED, NO_MEDIA
    short = CAUSED_BY.sub("", message)[:MAX_ERROR_CHARS]
    if status := HTTP_ERROR.search(message):
        code = int(status["status"])
        return classify_http_status(code), f"HTTP {code}: yt-dlp: {short}"
    if NETWORK_ERROR.search(message):
        return Outcome.TEMPORARY, f"yt-dlp: {short}"
    return Outcome.FATAL, f"yt-dlp: {short}"


class MediaExtractor(Extractor):
    """Download the page's audio and video with yt-dlp, with each one's .info.json."""

    name = "media"
    binaries = ("yt-dlp",)

    def command(self, ytdlp: str, url: str) -> list[str]:
        """Return the yt-dlp command line for ``url``, to run in the output folder."""
        filters = [arg for expr in MATCH_FILTERS for arg in ("--match-filters", expr)]
        return [
            ytdlp,
            # Only what is on this command line counts: no user or system configuration, no
            # plugins, no cache of earlier runs, no update check.
            "--ignore-config",
            "--no-plugin-dirs",
            "--no-cache-dir",
            "--no-update",
            "--no-playlist",  # a video in a playlist's URL: that video, not the whole list
            *filters,
            "--max-filesize", str(settings.MAX_DOWNLOAD_BYTES),
            # As for wget: yt-dlp's own network timeout outlives the run, so a stalled server
            # always ends the same way (the run's deadline kills the group).
            "--socket-timeout", str(self.timeout + NETWORK_TIMEOUT_MARGIN),
            # Retries belong to the ArchiveResult's backoff. Fragments (HLS, DASH) keep yt-dlp's
            # retries, since one lost among hundreds should not restart the whole download, but
            # a fragment that stays missing fails the run instead of leaving a hole in the file.
            "--retries", "0",
            "--extractor-retries", "0",
            "--abort-on-unavailable-fragments",
            "--no-progress",
            "--no-mtime",  # the file's time is when it was archived
            "--write-info-json",
            "--restrict-filenames",
            "--output", OUTPUT_TEMPLATE,
            "--print-to-file", "after_move:filepath", FILES_LIST,
            "--add-headers", f"User-Agent:{self.user_agent}",
            *self.arguments,
            url,
        ]  # fmt: skip

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Save the media of ``snapshot.url`` into ``out_dir``, each with its ``.info.json``.

        Output: the first media file yt-dlp finished (in page order), relative to ``out_dir``;
        a page with several keeps them all. yt-dlp's stdout and stderr go to ``media.log``.
        Any one file is bounded by MAX_DOWNLOAD_BYTES, everything together by
        ``download_limit``; a file over the limit fails the run (the page will not shrink).
        Partial files (``.part``) are left only by a run that failed, whose folder the caller
        discards.
        """
        try:
            ytdlp = self.binary_path("yt-dlp")
        except LookupError as error:
            return unavailable(error)
        log_path = out_dir / LOG_NAME
        files_list = out_dir / FILES_LIST
        cmd = self.command(ytdlp, snapshot.url)
        try:
            done = run_command(
                cmd,
                cwd=out_dir,
                timeout=self.timeout,
                log_path=log_path,
                limit=download_limit(out_dir),
            )
            saved = _read_files_list(files_list, out_dir)
        finally:
            remove(files_list)
        output = ExtractorOutput(
            outcome=Outcome.SUCCEEDED,
            cmd=cmd,
            cmd_version=self.version("yt-dlp"),
            exit_code=done.exit_code,
        )
        log = log_path.read_text(encoding="utf-8", errors="replace")
        if done.timed_out:
            output.outcome, output.error = timeout_reason("yt-dlp", self.timeout)
        elif done.too_large or TOO_LARGE_LINE.search(log):
            output.outcome, output.error = too_large_reason(settings.MAX_DOWNLOAD_BYTES)
        elif done.exit_code != 0:
            output.outcome, output.error = classify_log(log, done.exit_code)
        elif not saved:  # no media entry, or only ones the filters rejected before download
            output.outcome, output.error = Outcome.SKIPPED, NO_MEDIA
        else:
            output.output = saved[0]
        return output


def _read_files_list(files_list: Path, out_dir: Path) -> list[str]:
    """Return the media files yt-dlp listed, relative to ``out_dir``, in the order it wrote them.

    Only non-empty files inside ``out_dir`` with a media extension count.
    """
    try:
        lines = files_list.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    root = out_dir.resolve()
    saved: list[str] = []
    for line in filter(None, map(str.strip, lines)):
        file = (out_dir / line).resolve()
        if not file.is_relative_to(root) or not file.is_file() or file.stat().st_size == 0:
            continue
        name = file.relative_to(root).as_posix()
        if file.suffix.lstrip(".").lower() in MEDIA_EXTENSIONS and name not in saved:
            saved.append(name)
    return saved
