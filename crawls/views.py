"""The add page, saving in one click (``/save/<url>``) and a crawl's live progress (htmx polls
the progress fragment every 2 s until the crawl is sealed). Adding and saving need
``crawls.add_crawl``, staff or not; the crawl pages ``crawls.view_crawl`` as an active staff
user, or ``crawls.add_crawl`` for one's own crawls (core/web/permissions.py, the admin's rule,
and CrawlQuerySet.visible_to)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Case, F, Prefetch, Q, TextField, Value, When
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_safe

from core.models import ArchiveResult
from core.services.crawls import CrawlOptions, crawl_create
from core.services.saves import url_save
from core.services.tokens import token_user
from core.web.permissions import model_perm, permission_problem, staff_permission_required
from core.web.timeline import unknown_url
from crawls.choices import CrawlStatus
from crawls.forms import AddForm
from crawls.models import ADD_PERMISSION, Crawl, CrawlQuerySet
from crawls.seeds import InputError, InvalidURL

SHOWN_SNAPSHOTS = 200  # on the progress page; the admin lists them all


# The scheme a browser hands to /save/ once the add page registered it (HTML, "custom scheme
# handlers": the handler gets the whole web+vellum:... URL, percent-encoded, in place of %s).
SHARE_SCHEME = "web+vellum:"
# Sec-Fetch-Dest (W3C Fetch Metadata) of a request that opens a page: /save/ queues nothing for
# an image, a script or a fetch() another site embeds.
SAVE_DESTINATIONS = {"document", "iframe"}


@require_http_methods(["GET", "POST"])
@staff_permission_required(model_perm(Crawl, "add"), own=True)
def add_page(request: HttpRequest) -> HttpResponse:
    """Paste URLs or upload a file; on success, go to the new crawl's progress, else show the
    form again with the reason (400)."""
    form = AddForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data, source_name = form.input_data()
        profile = form.cleaned_data["profile"]
        persona = form.cleaned_data["persona"]
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
                    public=form.cleaned_data["public"],
                    persona=persona.name if persona else "",
                ),
                created_by=request.user,
            )
        except InputError as error:
            form.add_error(None, str(error))
        else:
            return redirect("crawls:progress", crawl_id=crawl.pk)
    # A refused POST shows the form again with the reason, as a 400 (scripts see it failed).
    status = 400 if request.method == "POST" else 200
    save_base = request.build_absolute_uri("/save/")
    context = {
        "form": form,
        "save_base": save_base,
        "save_dedup_minutes": settings.SAVE_DEDUP_MINUTES,
    }
    return render(request, "vellum/add.html", context, status=status)


@require_safe
def save_url(request: HttpRequest, url: str) -> HttpResponse:
    """Save ``url`` (the rest of the path, with the query string but ``token``; a
    ``web+vellum:`` prefix is dropped) in one click, and open its crawl's live page, or the
    earlier crawl or capture a repeat lands on (core/services/saves.py).

    The user is the signed-in one, or the owner of the API token ``?token=`` (a token in a
    URL ends up in histories and logs: a token of its own, revocable, is best); either must
    hold ``crawls.add_crawl``. Not signed in: the sign-in page, and back. A bad token or a
    user without the permission: 403 saying why. A URL that cannot be archived: 400 saying
    why. A request for an embedded resource (Sec-Fetch-Dest other than a document): 403.
    """
    destination = request.headers.get("Sec-Fetch-Dest")
    if destination and destination not in SAVE_DESTINATIONS:
        raise PermissionDenied("/save/ opens as a page, not as an embedded resource")
    key = request.GET.get("token")
    user = token_user(key) if key else request.user
    if user is None:
        raise PermissionDenied("this token is not valid (revoked, or never made)")
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    problem = permission_problem(user, ADD_PERMISSION, own=True)
    if problem:
        raise PermissionDenied(problem)
    raw = _saved_url(request, url)
    try:
        saved = url_save(url=raw, created_by=user)
    except (InvalidURL, InputError) as error:
        return unknown_url(request, raw, str(error), status=400)
    if saved.snapshot is not None:
        return redirect("core:snapshot", snapshot_id=saved.snapshot.pk)
    return redirect("crawls:progress", crawl_id=saved.crawl.pk)


def _saved_url(request: HttpRequest, url: str) -> str:
    """The URL a /save/ request names: the rest of its path and its query string (which
    belongs to the URL, as on the timeline), without this page's own ``token`` parameter."""
    query = request.META.get("QUERY_STRING", "")
    kept = [part for part in query.split("&") if part and not part.startswith("token=")]
    raw = f"{url}?{'&'.join(kept)}" if kept else url
    if raw[: len(SHARE_SCHEME)].lower() == SHARE_SCHEME:
        raw = raw[len(SHARE_SCHEME) :]
    return raw


@require_safe
@staff_permission_required(model_perm(Crawl, "view"), own=True)
def crawl_page(request: HttpRequest, crawl_id: int) -> HttpResponse:
    """A crawl's page: what was read from the input, and its live progress (404 for a crawl
    the user may not read)."""
    # A crawl of one seed names it; the seed list of a large one is not read for that.
    one_seed = Case(
        When(~Q(seeds__contains="\n"), then=F("seeds")), default=Value(""), output_field=TextField()
    )
    crawls = Crawl.objects.lean().annotate(single_seed=one_seed)
    return render(request, "vellum/crawl.html", _progress_context(request, crawl_id, crawls))


@require_safe
@staff_permission_required(model_perm(Crawl, "view"), own=True)
def crawl_progress(request: HttpRequest, crawl_id: int) -> HttpResponse:
    """The progress fragment alone, for htmx to swap in (every 2 s while the crawl runs:
    without the fields that grow with the crawl, which it does not show)."""
    crawls = Crawl.objects.lean()
    return render(request, "vellum/_progress.html", _progress_context(request, crawl_id, crawls))


def _progress_context(request: HttpRequest, crawl_id: int, crawls: CrawlQuerySet) -> dict:
    crawl = crawls.visible_to(request.user).filter(pk=crawl_id).first()
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
