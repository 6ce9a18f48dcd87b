"""Save a page's audio and video with yt-dlp: the media files and their metadata (.info.json).

yt-dlp runs as a subprocess through ``run_command``, never in-process: its timeout kills the
whole process group, and whatever it does wrong cannot take the actor down with it. It knows the
media of many sites by their URL, and its generic extractor finds HTML5 ``<video>``/``<audio>``
(with their ``<source>``) on any other page; a page without media ends SKIPPED.

Starting yt-dlp costs about a second even when a page has nothing for it, so ``run`` looks
first (``outcome_without_ytdlp``): a URL that one of yt-dlp's site extractors claims, or whose
name is a media file's, goes to yt-dlp at once; any other page is fetched with curl, and yt-dlp
only starts for audio or video, or HTML with signs of media (``has_media_markers``).
"""

from __future__ import annotations

import re
import time
from functools import cache
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from django.conf import settings

from core.extractors.base import Extractor, ExtractorOutput, HasURL
from core.extractors.credentials import PersonaFiles, persona_arguments, persona_files
from core.extractors.errors import (
    Outcome,
    classify_http_status,
    egress_failure,
    too_large_reason,
)
from core.extractors.html_page import Page, get_page, output_from_fetch, remove, unavailable

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
# Streaming manifests (HLS, DASH, HDS), which yt-dlp downloads as the media they describe.
STREAM_EXTENSIONS = ("m3u8", "mpd", "f4m")
STREAM_TYPES = frozenset(
    {
        "application/vnd.apple.mpegurl",
        "application/x-mpegurl",
        "application/dash+xml",
        "application/f4m+xml",
    }
)
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
# yt-dlp gets what is left of the run's timeout after the pre-check's fetch, but at least this.
MIN_YTDLP_SECONDS = 1

# Signs of media in a page's HTML, besides <video>, <audio> and embeds (has_media_markers):
# the Open Graph and Twitter card properties yt-dlp's generic extractor reads, schema.org
# objects in JSON-LD, and a quoted URL of a media file, as a player's script setup holds
# (JW Player's ``file: "..."``, which the generic extractor also searches for).
MEDIA_META = re.compile(r"(?:og:(?:video|audio)|twitter:player)(?::(?:url|secure_url|stream))?")
JSON_LD_MEDIA = re.compile(r'"@type"\s*:\s*"(?:VideoObject|AudioObject)"')
MEDIA_NAMES = "|".join((*MEDIA_EXTENSIONS, *STREAM_EXTENSIONS))
QUOTED_MEDIA_URL = re.compile(
    rf"""["'][^"'<>\s]+\.(?:{MEDIA_NAMES})(?:[?#][^"'<>\s]*)?["']""", re.IGNORECASE
)


@cache
def site_extractors() -> tuple[type, ...]:
    """Return yt-dlp's extractors for particular sites (all but the generic one), in its order.

    Loaded once per process, on first use: importing yt_dlp.extractor and matching the first
    URL against all ~1750 URL patterns (each compiled on first use) costs about 0.4 s and
    40 MB (measured: import 0.12-0.37 s, first pass 0.25-0.8 s; each later URL 3-10 ms). The
    list is the installed yt_dlp package's; the yt-dlp command found first on PATH is normally
    the same one. Empty if yt_dlp cannot be imported: every URL is then checked by its page.
    """
    try:
        from yt_dlp.extractor import gen_extractor_classes
    except ImportError:
        return ()
    return tuple(ie for ie in gen_extractor_classes() if ie.ie_key() != "Generic")


def claimed_by_site(url: str) -> bool:
    """Tell whether one of yt-dlp's site extractors (YouTube, Vimeo, ...) takes ``url``."""
    return any(ie.suitable(url) for ie in site_extractors())


def url_extension(url: str) -> str:
    """Return the lowercased extension of ``url``'s last path segment ("" if none)."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return ""
    return PurePosixPath(unquote(path)).suffix.lstrip(".").lower()


def is_media_url(url: str) -> bool:
    """Tell whether ``url`` names an audio, video or streaming manifest file by its extension."""
    return url_extension(url) in (*MEDIA_EXTENSIONS, *STREAM_EXTENSIONS)


def is_media_type(content_type: str) -> bool:
    """Tell whether a media type (lowercased, no parameters) is audio, video or a manifest."""
    return content_type.startswith(("audio/", "video/")) or content_type in STREAM_TYPES


def has_media_markers(page: Page) -> bool:
    """Tell whether ``page`` shows signs of audio or video that yt-dlp could find.

    Signs: a ``<video>`` or ``<audio>``; a ``<source src>`` of audio or video (by its type or
    extension); an ``<iframe>``, ``<embed>`` or ``<object>`` (players embedded from another
    site); an ``og:video``/``og:audio``/``twitter:player`` meta property; a JSON-LD
    VideoObject or AudioObject; a quoted URL of a media file anywhere in the page.
    """
    tree = page.tree
    if next(tree.iter("video", "audio", "iframe", "embed", "object"), None) is not None:
        return True
    for source in tree.iter("source"):
        src = source.get("src")
        kind = (source.get("type") or "").split(";")[0].strip().lower()
        if src is not None and (is_media_type(kind) or is_media_url(src.strip())):
            return True
    for meta in tree.iter("meta"):
        name = meta.get("property") or meta.get("name") or ""
        if MEDIA_META.fullmatch(name.strip().lower()):
            return True
    return bool(JSON_LD_MEDIA.search(page.html) or QUOTED_MEDIA_URL.search(page.html))


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
        # A 3xx here is yt-dlp giving up on redirects ("redirect loop detected"): fatal, as
        # curl's too many redirects; only 4xx and 5xx are classified by their status.
        outcome = classify_http_status(code) if code >= 400 else Outcome.FATAL
        return outcome, f"HTTP {code}: yt-dlp: {short}"
    if NETWORK_ERROR.search(message):
        return Outcome.TEMPORARY, f"yt-dlp: {short}"
    return Outcome.FATAL, f"yt-dlp: {short}"


class MediaExtractor(Extractor):
    """Download the page's audio and video with yt-dlp, with each one's .info.json."""

    name = "media"
    binaries = ("yt-dlp", "curl")  # curl: the check for signs of media (outcome_without_ytdlp)
    depends_on = ("wget",)  # when the profile runs wget: the page is read from its WARC

    def command(self, ytdlp: str, url: str, files: PersonaFiles | None = None) -> list[str]:
        """Return the yt-dlp command line for ``url``, to run in the output folder, with the
        persona's cookies (``--cookies``) and headers (``--config-locations``) from ``files``."""
        filters = [arg for expr in MATCH_FILTERS for arg in ("--match-filters", expr)]
        return [
            ytdlp,
            # Only what is on this command line counts: no user or system configuration (only
            # the persona's headers file, if any), no plugins, no cache, no update check.
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
            *persona_arguments(files, "yt-dlp"),
            *self.arguments,
            url,
        ]  # fmt: skip

    def outcome_without_ytdlp(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput | None:
        """Return the run's outcome if yt-dlp need not start for ``snapshot.url``, or None if it
        should.

        A URL that a site extractor of yt-dlp claims, or that names a media file, goes to
        yt-dlp without the network. Any other page is read from wget's WARC when wget saved
        it (core/extractors/html_page.py ``saved_page``), else fetched with curl (its log stays
        as ``curl.log``): a failed fetch keeps curl's outcome (404 FATAL, 503 TEMPORARY, too large
        FATAL, as for the other page extractors); after redirects, a URL a site extractor
        claims, a body of audio or video, or HTML with ``has_media_markers`` goes to yt-dlp;
        anything else is SKIPPED with NO_MEDIA. Raises LookupError if curl is not installed.
        """
        url = snapshot.url
        if claimed_by_site(url) or is_media_url(url):
            return None
        # Not curl_options(): the arguments option holds yt-dlp's arguments, not curl's.
        result, page = get_page(
            snapshot,
            out_dir=out_dir,
            timeout=self.timeout,
            user_agent=self.user_agent,
            credentials=self.credentials,
        )
        if result.outcome is not Outcome.SUCCEEDED:
            return output_from_fetch(result)
        final_url = result.final_url or url
        if page is not None:
            found = has_media_markers(page) or claimed_by_site(final_url)
        else:
            found = is_media_type(result.content_type) or is_media_url(final_url)
        return None if found else output_from_fetch(result, Outcome.SKIPPED, NO_MEDIA)

    def run(self, snapshot: HasURL, out_dir: Path) -> ExtractorOutput:
        """Save the media of ``snapshot.url`` into ``out_dir``, each with its ``.info.json``.

        yt-dlp only starts if ``outcome_without_ytdlp`` returns None; else that is the outcome.
        Output: the first media file yt-dlp finished (in page order), relative to ``out_dir``;
        a page with several keeps them all. yt-dlp's stdout and stderr go to ``media.log``.
        The check's fetch and yt-dlp share the run's timeout. Any one file is bounded by
        MAX_DOWNLOAD_BYTES, everything together by ``download_limit``; a file over the limit
        fails the run (the page will not shrink). Partial files (``.part``) are left only by a
        run that failed, whose folder the caller discards.
        """
        deadline = time.monotonic() + self.timeout
        try:
            ytdlp = self.binary_path("yt-dlp")
            if (checked := self.outcome_without_ytdlp(snapshot, out_dir)) is not None:
                return checked
        except LookupError as error:
            return unavailable(error)
        files_list = out_dir / FILES_LIST
        try:
            with persona_files(self.credentials) as files:
                done, output = self.run_tool(
                    "yt-dlp",
                    self.command(ytdlp, snapshot.url, files),
                    out_dir,
                    log_name=LOG_NAME,
                    timeout=max(deadline - time.monotonic(), MIN_YTDLP_SECONDS),
                )
            saved = _read_files_list(files_list, out_dir)
        finally:
            remove(files_list)
        if output.outcome is not Outcome.SUCCEEDED:  # timed out, or wrote too much
            return output
        log = (out_dir / LOG_NAME).read_text(encoding="utf-8", errors="replace")
        if TOO_LARGE_LINE.search(log):
            output.outcome, output.error = too_large_reason(settings.MAX_DOWNLOAD_BYTES)
        elif done.exit_code != 0:
            # A refusal or an unreachable host met by the egress proxy is why, not its answer.
            failure = egress_failure(done.refusals, done.unreachable)
            output.outcome, output.error = failure or classify_log(log, done.exit_code)
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
