"""The archive's own pages: the index of snapshots with full-text search, and one snapshot with
every output it has (core/web/access.py says who may read them)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from core.admin.display import file_url, index_image_url, main_file_url
from core.choices import ResultStatus
from core.extractors import registry
from core.extractors.base import ShownAs
from core.folder import signing
from core.folder.manifest import MANIFEST_NAME, SIGNATURE_NAME, sha256_file
from core.folder.wacz import WACZ_NAME
from core.models import ArchiveResult, Snapshot
from core.services import search
from core.web.access import reader_required
from core.web.origins import replay_url

PER_PAGE = 50


@require_safe
@reader_required
def archive_index(request: HttpRequest) -> HttpResponse:
    """The snapshots, newest first, 50 a page; with ``?q=`` those matching every word, best
    match first (core/services/search.py)."""
    query = request.GET.get("q", "").strip()
    if query:
        limit = search.MAX_RESULTS
        ids = search.search_snapshot_ids(query, limit=limit)
        capped = len(ids) >= limit  # there may be more: the page says so
        page = Paginator(ids, PER_PAGE).get_page(request.GET.get("page"))
        found = _with_results(Snapshot.objects.filter(pk__in=list(page.object_list)))
        by_id = {snapshot.pk: snapshot for snapshot in found}
        snapshots = [by_id[pk] for pk in page.object_list if pk in by_id]
    else:
        capped = False
        page = Paginator(_with_results(Snapshot.objects.order_by("-created_at")), PER_PAGE)
        page = page.get_page(request.GET.get("page"))
        snapshots = list(page.object_list)
    rows = [_row(snapshot) for snapshot in snapshots]
    context = {"rows": rows, "page": page, "query": query, "capped": capped}
    return render(request, "vellum/index.html", context)


@require_safe
@reader_required
def snapshot_page(request: HttpRequest, snapshot_id) -> HttpResponse:
    """One snapshot: its state, every result with its files, and its proofs."""
    try:
        snapshot = Snapshot.objects.select_related("crawl").get(pk=snapshot_id)
    except Snapshot.DoesNotExist:
        raise Http404("no such snapshot") from None
    results = list(snapshot.results.order_by("pk"))
    folder = snapshot.output_dir
    has_wacz = (folder / WACZ_NAME).is_file()
    proofs = [
        (label, file_url(snapshot, name))
        for label, name in [
            ("WACZ", WACZ_NAME),
            ("checksum manifest", MANIFEST_NAME),
            ("signature", SIGNATURE_NAME),
        ]
        if (folder / name).is_file()
    ]
    context = {
        "snapshot": snapshot,
        "tags": list(snapshot.tags.values_list("name", flat=True)),
        "outputs": [_output(snapshot, result) for result in results],
        "proofs": proofs,
        "proof": _proof_status(snapshot) if snapshot.manifest_sha256 else None,
        "last_check": snapshot.fixity_checks.order_by("-checked_at").first(),
        "has_wacz": has_wacz,
        "replay": replay_url(request, snapshot.pk) if has_wacz else None,
    }
    return render(request, "vellum/snapshot.html", context)


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
