"""The archive's own pages: the index of snapshots with full-text search, and one snapshot with
every output it has, one tab each (core/web/outputs.py; core/web/access.py says who may read
them)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotFound
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe

from core.admin.display import file_url, index_image_url, main_file_url
from core.choices import ResultStatus
from core.extractors import registry
from core.extractors.base import ShownAs
from core.folder import signing
from core.folder.manifest import MANIFEST_NAME, SIGNATURE_NAME, sha256_file
from core.models import ArchiveResult, Snapshot
from core.services import search
from core.services.dedup import has_replay_wacz
from core.web.access import readable_snapshots, reader_required
from core.web.origins import replay_url
from core.web.outputs import REPLAY, choose_tab, fill_tab, snapshot_tabs
from core.web.viewing import sign_view_link

PER_PAGE = 50


@require_safe
@reader_required
def archive_index(request: HttpRequest) -> HttpResponse:
    """The snapshots the reader may read (core/web/access.py), newest first, 50 a page; with
    ``?q=`` those matching every word, best match first (core/services/search.py)."""
    query = request.GET.get("q", "").strip()
    readable = readable_snapshots(request)
    if query:
        limit = search.MAX_RESULTS
        ids = search.search_snapshot_ids(query, limit=limit, within=readable)
        capped = len(ids) >= limit  # there may be more: the page says so
        page = Paginator(ids, PER_PAGE).get_page(request.GET.get("page"))
        found = _with_results(readable.filter(pk__in=list(page.object_list)))
        by_id = {snapshot.pk: snapshot for snapshot in found}
        snapshots = [by_id[pk] for pk in page.object_list if pk in by_id]
    else:
        capped = False
        page = Paginator(_with_results(readable.order_by("-created_at")), PER_PAGE)
        page = page.get_page(request.GET.get("page"))
        snapshots = list(page.object_list)
    rows = [_row(snapshot) for snapshot in snapshots]
    context = {"rows": rows, "page": page, "query": query, "capped": capped}
    return render(request, "vellum/index.html", context)


@require_safe
@reader_required
def snapshot_page(request: HttpRequest, snapshot_id) -> HttpResponse:
    """One snapshot: the archived page in the output ``?view=`` names (core/web/outputs.py; by
    default SingleFile's, else wget's, else the replay's tab, else the screenshot), the tabs of
    the others, and its state, proofs and timeline link in a side panel. The ``files`` view
    lists every result with its state, reason and files.

    404 for an unknown snapshot or one the reader may not read (core/web/access.py), and
    (plain text, naming the views it has) for a view it has not.
    """
    try:
        # The page names its crawl by id only: the crawl is not joined in (its seed list
        # grows with it, and a view of one page would read all of it).
        snapshot = readable_snapshots(request).select_related("unchanged_since").get(pk=snapshot_id)
    except Snapshot.DoesNotExist:
        raise Http404("no such snapshot") from None
    results = list(snapshot.results.order_by("pk"))
    folder = snapshot.output_dir
    has_wacz = has_replay_wacz(snapshot)
    replay = replay_url(request, snapshot.pk) if has_wacz else None
    tabs = snapshot_tabs(snapshot, results, has_wacz=has_wacz, replay=replay)
    try:
        chosen = choose_tab(tabs, request.GET.get("view"))
    except LookupError as error:
        return HttpResponseNotFound(str(error) + "\n", content_type="text/plain; charset=utf-8")
    # One signed link for this page's frames: only a reader who may see the snapshot gets it.
    token = sign_view_link(snapshot.pk)
    fill_tab(chosen, snapshot, token)
    # The screenshot, if there is one, where the chosen output cannot show the page itself.
    fallback = None
    if not chosen.available or chosen.shows == REPLAY:
        fallback = next((tab for tab in tabs if tab.name == "screenshot" and tab.available), None)
        if fallback is not None:
            fill_tab(fallback, snapshot, token)
    # The WACZ: its own, or for a capture sharing records with others, one made whole.
    wacz = [("WACZ", reverse("core:snapshot_wacz", args=[snapshot.pk]))] if has_wacz else []
    proofs = wacz + [
        (label, file_url(snapshot, name))
        for label, name in [("checksum manifest", MANIFEST_NAME), ("signature", SIGNATURE_NAME)]
        if (folder / name).is_file()
    ]
    context = {
        "snapshot": snapshot,
        "tags": list(snapshot.tags.values_list("name", flat=True)),
        "tabs": tabs,
        "chosen": chosen,
        "fallback": fallback,
        "outputs": [_output(snapshot, result) for result in results],
        "proofs": proofs,
        "proof": _proof_status(snapshot) if snapshot.manifest_sha256 else None,
        "last_check": snapshot.fixity_checks.since_seal().order_by("-checked_at").first(),
        "has_wacz": has_wacz,
        "replay": replay,
        "timeline": timeline_url(snapshot.url),
    }
    return render(request, "vellum/snapshot.html", context)


def timeline_url(url: str) -> str:
    """Return the path of ``url``'s timeline page: every capture of it (core/web/timeline.py)."""
    return reverse("core:url_timeline", kwargs={"url": url})


def _proof_status(snapshot: Snapshot) -> list[str]:
    """Return what is wrong with a sealed snapshot's proofs right now ([] when its manifest is
    the one sealed and its signature verifies with a key this archive trusts)."""
    folder = snapshot.output_dir
    try:
        problems = (
            []
            if sha256_file(folder / MANIFEST_NAME) == snapshot.manifest_sha256
            else [f"{MANIFEST_NAME} is not the manifest sealed"]
        )
    except OSError:
        problems = [f"{MANIFEST_NAME} is missing or unreadable"]
    try:
        return problems + signing.verify_signature(folder)
    except signing.SigningKeyError as error:
        return [*problems, str(error)]


def _with_results(snapshots):
    lean = ArchiveResult.objects.only(
        "snapshot_id", "extractor", "status", "output", "output_files", "missing"
    )
    return snapshots.prefetch_related(Prefetch("results", queryset=lean.order_by("pk")), "tags")


def _row(snapshot: Snapshot) -> dict:
    """What the index shows of one snapshot: favicon, thumbnail, and a mark per extractor:
    ``(extractor, status, number of files its capture lacks)``."""
    results = list(snapshot.results.all())
    return {
        "snapshot": snapshot,
        "favicon": index_image_url(snapshot, results, "favicon"),
        "thumbnail": index_image_url(snapshot, results, "thumbnail"),
        "marks": [(r.extractor, r.status, len(r.missing)) for r in results],
        "tags": [tag.name for tag in snapshot.tags.all()],
    }


def _output(snapshot: Snapshot, result: ArchiveResult) -> dict:
    """What the snapshot page shows of one result: its main output as its extractor's
    ``shown_as`` says (archived HTML and PDFs open on their own, sandboxed: core/web/files.py),
    and links to its files."""
    main = main_file_url(snapshot, result) if result.status == ResultStatus.SUCCEEDED else None
    extractor = registry.find_extractor(result.extractor)
    return {
        "result": result,
        "known": extractor is not None,
        "main": main,
        "kind": str(extractor.shown_as if extractor else ShownAs.LINK),
        "files": [(path, file_url(snapshot, path)) for path in result.output_files],
    }
