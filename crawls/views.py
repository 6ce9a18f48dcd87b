"""The add page and a crawl's live progress (htmx polls the progress fragment every 2 s until
the crawl is sealed). Adding needs ``crawls.add_crawl``, the crawl pages ``crawls.view_crawl``,
both as an active staff user (core/web/permissions.py, the admin's rule)."""

from __future__ import annotations

from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_safe

from core.models import ArchiveResult
from core.services.crawls import CrawlOptions, crawl_create
from core.web.permissions import model_perm, staff_permission_required
from crawls.choices import CrawlStatus
from crawls.forms import AddForm
from crawls.models import Crawl
from crawls.seeds import InputError

SHOWN_SNAPSHOTS = 200  # on the progress page; the admin lists them all


@require_http_methods(["GET", "POST"])
@staff_permission_required(model_perm(Crawl, "add"))
def add_page(request: HttpRequest) -> HttpResponse:
    """Paste URLs or upload a file; on success, go to the new crawl's progress, else show the
    form again with the reason (400)."""
    form = AddForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data, source_name = form.input_data()
        profile = form.cleaned_data["profile"]
        try:
            crawl = crawl_create(
                data=data,
                source_name=source_name,
                parser=form.cleaned_data["parser"],
                options=CrawlOptions(
                    depth=form.cleaned_data["depth"],
                    tags=[form.cleaned_data["tags"]],
                    profile=profile.name if profile else "",
                    behaviour_seconds=form.cleaned_data["behaviour_seconds"],
                    scroll_page_limit=form.cleaned_data["scroll_page_limit"],
                    only_changes=form.cleaned_data["only_changes"],
                    **form.politeness(),
                ),
                created_by=request.user,
            )
        except InputError as error:
            form.add_error(None, str(error))
        else:
            return redirect("crawls:progress", crawl_id=crawl.pk)
    # A refused POST shows the form again with the reason, as a 400 (scripts see it failed).
    status = 400 if request.method == "POST" else 200
    return render(request, "vellum/add.html", {"form": form}, status=status)


@require_safe
@staff_permission_required(model_perm(Crawl, "view"))
def crawl_page(request: HttpRequest, crawl_id: int) -> HttpResponse:
    """A crawl's page: what was read from the input, and its live progress."""
    return render(request, "vellum/crawl.html", _progress_context(crawl_id))


@require_safe
@staff_permission_required(model_perm(Crawl, "view"))
def crawl_progress(request: HttpRequest, crawl_id: int) -> HttpResponse:
    """The progress fragment alone, for htmx to swap in."""
    return render(request, "vellum/_progress.html", _progress_context(crawl_id))


def _progress_context(crawl_id: int) -> dict:
    crawl = Crawl.objects.filter(pk=crawl_id).first()
    if crawl is None:
        raise Http404("no such crawl")
    lean = ArchiveResult.objects.only("snapshot_id", "extractor", "status").order_by("pk")
    snapshots = crawl.snapshots.order_by("created_at").prefetch_related(
        Prefetch("results", queryset=lean)
    )[:SHOWN_SNAPSHOTS]
    results = ArchiveResult.objects.filter(snapshot__crawl=crawl)
    return {
        "crawl": crawl,
        "snapshots": snapshots,
        "snapshot_counts": dict(sorted(crawl.snapshots.count_by_status().items())),
        "result_counts": dict(sorted(results.count_by_status().items())),
        "live": crawl.status != CrawlStatus.SEALED,
    }
