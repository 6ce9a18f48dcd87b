from django.contrib.auth.views import LoginView, LogoutView
from django.urls import path, re_path

from core.web import files, memento, pages, replay, timeline

app_name = "core"

urlpatterns = [
    path("", pages.archive_index, name="index"),
    # Sign-in for every user, staff or not (the admin's own sign-in takes staff only): a user
    # holding crawls.add_crawl adds and reads back their own captures (core/web/access.py).
    path("login/", LoginView.as_view(template_name="vellum/login.html"), name="login"),
    path("logout/", LogoutView.as_view(next_page="core:login"), name="logout"),  # POST only
    path(
        "snapshot/<uuid:snapshot_id>/",
        memento.memento_headers(pages.snapshot_page),
        name="snapshot",
    ),
    path("archive/<uuid:snapshot_id>/<path:path>", files.snapshot_file, name="snapshot_file"),
    path("snapshot/<uuid:snapshot_id>/wacz/", files.snapshot_wacz, name="snapshot_wacz"),
    # A URL's captures (core/web/timeline.py) and Memento (core/web/memento.py): the archived
    # URL is the rest of the path. The diff comes first: its URL would match the timeline's.
    path("url/<path:url>/diff/<uuid:before>/<uuid:after>/", timeline.url_diff, name="url_diff"),
    path("url/<path:url>", timeline.url_timeline, name="url_timeline"),
    re_path(r"^at/(?P<timestamp>[0-9]{4,14})/(?P<url>.+)$", memento.timegate, name="memento"),
    path("at/<path:url>", memento.timegate, name="timegate"),
    path("timemap/link/<path:url>", memento.timemap, name="timemap"),
    # A snapshot's files for its page's sandboxed frames, by signed link (core/web/viewing.py);
    # core/web/middleware.py keeps cookies off it.
    path("view/<str:token>/<path:path>", files.view_file, name="view_file"),
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
