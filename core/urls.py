from django.urls import path, re_path

from core import pages, replay_views, views

app_name = "core"

urlpatterns = [
    path("", pages.archive_index, name="index"),
    path("snapshot/<uuid:snapshot_id>/", pages.snapshot_page, name="snapshot"),
    path("archive/<uuid:snapshot_id>/<path:path>", views.snapshot_file, name="snapshot_file"),
    # The replay host's routes (core/replay.py); core/middleware.py keeps them off the app's host.
    path("replay/", replay_views.replay_app, name="replay_app"),
    re_path(
        r"^replay/lib/(?P<name>ui\.js|rwp-sw\.js)$", replay_views.replay_asset, name="replay_asset"
    ),
    path("replay/sw.js", replay_views.replay_worker, name="replay_worker"),
    path("replay/<str:token>/", replay_views.replay_page, name="replay_page"),
    path("replay/<str:token>/snapshot.wacz", replay_views.replay_wacz, name="replay_wacz"),
    path("keys/signing-key.pub.pem", views.public_key, name="public_key"),
    path("keys.json", views.public_keys, name="public_keys"),
]
