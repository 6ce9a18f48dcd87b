"""The tabs of a snapshot's page: one per way of seeing the archived page (issue 20).

The page opens on the archived page itself: SingleFile's page, else wget's, else the replay's
tab, else the screenshot. Each tab is a plain link (``?view=NAME``), so the page works without
JavaScript. Archived documents are shown in sandboxed frames whose files come from a signed
view link (core/web/viewing.py): their scripts never run on the app's origin and nothing they
name is fetched from the live web.

Replay (ReplayWeb.page, on the replay host: core/web/origins.py) is not framed: it needs a
service worker, which browsers refuse to a frame from another site than the page's (Chromium:
"The user denied permission to use Service Worker"; ReplayWeb.page then says that it "can not
be used in cross-origin iframes"), and the replay host is another site by design. Its tab shows
the screenshot and opens the replay in a tab of its own.
"""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass, field
from typing import Any

from django.http import Http404

from core.admin.display import file_url, main_output_path
from core.choices import ResultStatus, SnapshotStatus
from core.models import ArchiveResult, Snapshot
from core.web.files import resolve_snapshot_file
from core.web.viewing import view_url

# What a tab shows: an archived document in a sandboxed frame, the link to the replay (with the
# screenshot), a PDF (whose viewer refuses a sandbox), an image, audio and video players, a table
# of the response headers, or the list of every result and its files.
FRAME, REPLAY, PDF, IMAGE, MEDIA, HEADERS, FILES = (
    "frame", "replay", "pdf", "image", "media", "headers", "files",
)  # fmt: skip
# headers.json is a few kilobytes; anything much larger is not what the headers extractor wrote.
HEADERS_MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class TabKind:
    """One tab the page may have: ``name`` (its ``?view=``), ``label``, the extractor whose
    result it shows (None: replay and files), and how (FRAME ... FILES)."""

    name: str
    label: str
    extractor: str | None
    shows: str


TABS = (
    TabKind("replay", "Replay", None, REPLAY),
    TabKind("singlefile", "SingleFile", "singlefile", FRAME),
    TabKind("wget", "wget", "wget", FRAME),
    TabKind("screenshot", "Screenshot", "screenshot", IMAGE),
    TabKind("pdf", "PDF", "pdf", PDF),
    TabKind("article", "Article", "readability", FRAME),
    TabKind("text", "Text", "htmltotext", FRAME),
    TabKind("media", "Media", "media", MEDIA),
    TabKind("headers", "Headers", "headers", HEADERS),
    TabKind("files", "Files", None, FILES),
)
# The tab the page opens on: the first of these that can show the page, else the first tab that
# can show anything, else the files.
FIRST_CHOICES = ("singlefile", "wget", "replay", "screenshot")
TAB_NAMES = tuple(kind.name for kind in TABS)


@dataclass
class Tab:
    """One tab of one snapshot's page: ``reason`` says why it has nothing to show ("" when it
    has); ``src`` is what its frame or image loads, ``open_url`` the lasting link to its file
    (``/archive/<id>/...``), ``media`` ``[(url, "video"|"audio", name)]``, ``headers`` the
    parsed headers.json (its fields as ``header_rows``, ``[(name, value)]``) or
    ``headers_error``."""

    kind: TabKind
    reason: str = ""
    result: ArchiveResult | None = None
    path: str | None = None
    src: str | None = None
    open_url: str | None = None
    media: list[tuple[str, str, str]] = field(default_factory=list)
    headers: dict[str, Any] | None = None
    header_rows: list[tuple[str, str]] = field(default_factory=list)
    headers_error: str = ""

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def label(self) -> str:
        return self.kind.label

    @property
    def shows(self) -> str:
        return self.kind.shows

    @property
    def available(self) -> bool:
        return not self.reason


def snapshot_tabs(
    snapshot: Snapshot, results: list[ArchiveResult], *, has_wacz: bool, replay: str | None
) -> list[Tab]:
    """Return the tabs of ``snapshot``'s page, in TABS order: replay and files always, every
    other one when the snapshot has a result of its extractor (in any state).

    ``replay`` is the replay page's URL (core.web.origins.replay_url), None when there is no
    replay host for this request; ``has_wacz`` whether the snapshot has its WACZ.
    """
    by_extractor = {result.extractor: result for result in results}
    tabs = []
    for kind in TABS:
        if kind.shows == REPLAY:
            tabs.append(Tab(kind, reason=_replay_problem(snapshot, has_wacz, replay), src=replay))
        elif kind.shows == FILES:
            tabs.append(Tab(kind))
        elif kind.extractor in by_extractor:
            tabs.append(_result_tab(kind, by_extractor[kind.extractor]))
    return tabs


def choose_tab(tabs: list[Tab], wanted: str | None) -> Tab:
    """Return the tab named ``wanted`` or, when None or empty, the one the page opens on.

    Raises LookupError for a name that is not one of TAB_NAMES, or the tab of an extractor
    this snapshot never ran, saying which views it has.
    """
    by_name = {tab.name: tab for tab in tabs}
    if wanted:
        if wanted not in by_name:
            views = ", ".join(by_name)
            raise LookupError(f"This snapshot has no view called {wanted!r} (it has: {views}).")
        return by_name[wanted]
    for name in FIRST_CHOICES:
        if name in by_name and by_name[name].available:
            return by_name[name]
    return next((tab for tab in tabs if tab.available), by_name["files"])


def fill_tab(tab: Tab, snapshot: Snapshot, token: str) -> Tab:
    """Fill in what the chosen ``tab`` shows, its files served under the view link ``token``
    (core/web/viewing.py); return it. Reads headers.json for the headers tab."""
    if not tab.available or tab.path is None:
        return tab
    tab.src = view_url(token, tab.path)
    tab.open_url = file_url(snapshot, tab.path)
    if tab.shows == MEDIA and tab.result is not None:
        tab.media = [
            (view_url(token, path), kind, path.rsplit("/", 1)[-1])
            for path in tab.result.output_files
            if (kind := _media_kind(path))
        ]
    elif tab.shows == HEADERS:
        tab.headers, tab.headers_error = _read_headers(snapshot, tab.path)
        if tab.headers is not None:
            tab.header_rows = [(str(k), str(v)) for k, v in tab.headers["headers"].items()]
    return tab


def _replay_problem(snapshot: Snapshot, has_wacz: bool, replay: str | None) -> str:
    if not has_wacz:
        if snapshot.status == SnapshotStatus.SEALED:
            return "This snapshot has no WACZ: none of its extractors recorded a WARC."
        return "Replay starts from the WACZ, which is made when the snapshot is sealed."
    if replay is None:
        return (
            "Replay needs a host of its own, apart from the archive's (set REPLAY_HOST); "
            "its WACZ (manage.py export --format wacz) opens in any WACZ viewer."
        )
    return ""


def _result_tab(kind: TabKind, result: ArchiveResult) -> Tab:
    if result.status != ResultStatus.SUCCEEDED:
        reason = f"{kind.label}: {result.status}" + (f", {result.error}" if result.error else "")
        return Tab(kind, reason=reason + ".", result=result)
    path = main_output_path(result)
    if path is None:
        return Tab(kind, reason=f"{kind.label}: no file was saved.", result=result)
    return Tab(kind, result=result, path=path)


def _media_kind(path: str) -> str:
    """Return "video" or "audio" for a media file's path, "" for anything else."""
    content_type, _encoding = mimetypes.guess_type(path)
    major = (content_type or "").split("/")[0]
    return major if major in ("video", "audio") else ""


def _read_headers(snapshot: Snapshot, path: str) -> tuple[dict[str, Any] | None, str]:
    """Return (headers.json as the headers extractor wrote it, "") or (None, why not)."""
    try:
        file = resolve_snapshot_file(snapshot, path)
    except Http404:
        return None, f"{path} is not in the snapshot's folder."
    try:
        if file.stat().st_size > HEADERS_MAX_BYTES:
            return None, f"{path} is larger than the headers extractor writes."
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return None, f"{path} cannot be read: {error}"
    if not isinstance(document, dict) or not isinstance(document.get("headers"), dict):
        return None, f"{path} does not hold the headers extractor's fields."
    return document, ""
