"""Who may read the archive in the browser: anyone when PUBLIC_ARCHIVE is on, else staff users
(the admin's sign-in). The pages and the snapshot files share this rule."""

from __future__ import annotations

from functools import wraps

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required


def reader_required(view):
    """Let anyone through when settings.PUBLIC_ARCHIVE is on; otherwise send visitors who are
    not signed-in staff to the admin's sign-in page (and back)."""
    staff_view = staff_member_required(view)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if settings.PUBLIC_ARCHIVE:
            return view(request, *args, **kwargs)
        return staff_view(request, *args, **kwargs)

    return wrapper
