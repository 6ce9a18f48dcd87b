"""Who may read the archive in the browser: anyone when PUBLIC_ARCHIVE is on, else active staff
users holding ``core.view_snapshot``, the permission the admin's snapshot list asks for
(core/web/permissions.py). The pages and the snapshot files share this rule."""

from __future__ import annotations

from functools import wraps

from django.conf import settings

from core.web.permissions import staff_permission_required

READ_PERMISSION = "core.view_snapshot"


def reader_required(view):
    """Let anyone through when settings.PUBLIC_ARCHIVE is on; otherwise send visitors who are
    not signed in to the admin's sign-in page (and back), and answer 403 to a signed-in user
    who is not staff or lacks READ_PERMISSION."""
    guarded = staff_permission_required(READ_PERMISSION)(view)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if settings.PUBLIC_ARCHIVE:
            return view(request, *args, **kwargs)
        return guarded(request, *args, **kwargs)

    return wrapper
