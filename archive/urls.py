"""URL routes: the admin, the REST API, the archive's pages and snapshot files."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.views.defaults import page_not_found

from archive.api import api

# The admin modules are found here, when the site is served, not at every start-up: the admin
# app is SimpleAdminConfig (archive/settings.py), so ``add`` and the orchestrator, which never
# serve a page, skip importing them (some 50 ms of each start, issue 19).
admin.autodiscover()

admin.site.site_header = "Vellum"
admin.site.site_title = "Vellum"
admin.site.index_title = "Web archive"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("", include("crawls.urls")),
    path("", include("core.urls")),
]


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Answer a path no route matches (a URL holding a line break in ``/api/v1/urls/<url>/...``,
    say): under ``/api/`` as the API answers its own 404s, ``{"detail": ...}`` in JSON
    (archive/api.py), elsewhere with Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "no such API path"}, status=404)
    return page_not_found(request, exception)


handler404 = not_found
