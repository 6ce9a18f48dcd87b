"""URL routes: the admin, the REST API, the archive's pages and snapshot files."""

from django.contrib import admin
from django.urls import include, path

from archive.api import api

admin.site.site_header = "Vellum"
admin.site.site_title = "Vellum"
admin.site.index_title = "Web archive"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("", include("crawls.urls")),
    path("", include("core.urls")),
]
