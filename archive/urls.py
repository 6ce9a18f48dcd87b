"""URL routes: the admin, the REST API, and snapshot files."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from archive.api import api

admin.site.site_header = "Vellum"
admin.site.site_title = "Vellum"
admin.site.index_title = "Web archive"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("", include("core.urls")),
]
