from django.urls import path

from core import pages, views

app_name = "core"

urlpatterns = [
    path("", pages.archive_index, name="index"),
    path("snapshot/<uuid:snapshot_id>/", pages.snapshot_page, name="snapshot"),
    path("archive/<uuid:snapshot_id>/<path:path>", views.snapshot_file, name="snapshot_file"),
    path("keys/signing-key.pub.pem", views.public_key, name="public_key"),
    path("keys.json", views.public_keys, name="public_keys"),
]
