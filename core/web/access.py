"""Who may read the archive in the browser, and what: with PUBLIC_ARCHIVE on anyone, else active
staff users holding ``core.view_snapshot`` (the permission the admin's snapshot list asks for,
core/web/permissions.py) and users holding ``crawls.add_crawl``; and each of them reads only the
snapshots ``readable_snapshots`` gives (all for such staff, else their own and, with
PUBLIC_ARCHIVE on, the public ones). The pages, the snapshot files, search and the timeline
share this rule; replay and view links are handed out only by pages that applied it."""

from __future__ import annotations

from functools import wraps

from django.conf import settings

from core.models import Snapshot
from core.web.permissions import staff_permission_required

READ_PERMISSION = "core.view_snapshot"


def reader_required(view):
    """Let anyone through when settings.PUBLIC_ARCHIVE is on; otherwise send visitors who are
    not signed in to the sign-in page (and back), and answer 403 to a signed-in user who is
    neither staff holding READ_PERMISSION nor holds ``crawls.add_crawl``. The view must read
    through ``readable_snapshots``."""
    guarded = staff_permission_required(READ_PERMISSION, own=True)(view)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if settings.PUBLIC_ARCHIVE:
            return view(request, *args, **kwargs)
        return guarded(request, *args, **kwargs)

    return wrapper


def readable_snapshots(request):
    """The snapshots the request's user may read (SnapshotQuerySet.visible_to, with the public
    ones while settings.PUBLIC_ARCHIVE is on)."""
    return Snapshot.objects.visible_to(request.user, with_public=settings.PUBLIC_ARCHIVE)
