from django.urls import path, re_path

from core.web import files, pages, replay

app_name = "core"

urlpatterns = [
    path("", pages.archive_index, name="index"),
    path("snapshot/<uuid:snapshot_id>/", pages.snapshot_page, name="snapshot"),
    path("archive/<uuid:snapshot_id>/<path:path>", files.snapshot_file, name="snapshot_file"),
    # The replay host's routes (core/web/origins.py); core/web/middleware.py keeps them off the
    # app's host.
    path("replay/", replay.replay_app, name="replay_app"),
    re_path(r"^replay/lib/(?P<name>ui\.js|rwp-sw\.js)$", replay.replay_asset, name="replay_asset"),
    path("replay/sw.js", replay.replay_worker, name="replay_worker"),
    path("replay/<str:token>/", replay.replay_page, name="replay_page"),
    path("replay/<str:token>/snapshot.wacz", replay.replay_wacz, name="replay_wacz"),
    path("keys/signing-key.pub.pem", files.public_key, name="public_key"),
    path("keys.json", files.public_keys, name="public_keys"),
]
