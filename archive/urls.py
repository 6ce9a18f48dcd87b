"""URL routes: the admin, the REST API, the archive's pages and snapshot files."""

from django.contrib import admin
from django.urls import include, path

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
