"""Users for tests of who may do what (core/web/permissions.py): staff with chosen permissions."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

# Every permission the API, the add page and the crawl pages ask for (core/web/permissions.py).
APP_LABELS = ("crawls", "core", "orchestrator")


def permissions(*names: str) -> list[Permission]:
    """The Permission rows named ``"<app>.<codename>"``; raise AssertionError for a missing one
    (a typo would otherwise make a user with fewer permissions than the test says)."""
    found = []
    for name in names:
        app_label, codename = name.split(".")
        found.append(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    assert len(found) == len(names)
    return found


def staff_with(username: str, *perms: str, **fields):
    """Make an active staff user holding exactly ``perms`` (``"<app>.<codename>"``)."""
    user = get_user_model().objects.create_user(username, is_staff=True, **fields)
    user.user_permissions.set(permissions(*perms))
    return user


def keeper(username: str = "keeper", **fields):
    """Make a staff user holding every model permission of Vellum's apps (not a superuser)."""
    user = get_user_model().objects.create_user(username, is_staff=True, **fields)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=APP_LABELS))
    return user
