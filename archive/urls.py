"""URL routes: the admin, and snapshot files."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

admin.site.site_header = "Vellum"
admin.site.site_title = "Vellum"
admin.site.index_title = "Web archive"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
    path("", include("core.urls")),
]
