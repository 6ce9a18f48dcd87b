"""Who may do what outside the admin: one rule, the admin's own (DESIGN.md §8, trust boundaries).

An active staff user (the admin's sign-in rule, django.contrib.admin.sites.AdminSite
.has_permission) who holds the model permission the matching admin action needs
(core/admin/permissions.py): reading a list or a record needs ``view_<model>``, adding a crawl
``crawls.add_crawl``, a state change (hold, release, retry, re-archive, the queue's hold)
``change_<model>``, a removal ``delete_<model>``. Superusers hold every permission. API tokens
act as their user. The API (archive/api.py), the add page and the crawl pages
(crawls/views.py) all ask ``permission_problem``.

One exception, for reading and adding with ``own=True``: an active user who is not staff but
holds ``crawls.add_crawl`` may add, and read back what they added; the views and endpoints that
let them in read through ``visible_to(user)`` (crawls.models.visible_filter), so that they see
nobody else's crawls, snapshots, files or search results. Staff are unchanged.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth import get_permission_codename
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from ninja import security
from ninja.errors import AuthorizationError

from core.services.tokens import token_user
from crawls.models import ADD_PERMISSION


def model_perm(model: type[Model], action: str) -> str:
    """Return the permission ``"<app>.<action>_<model>"`` (action: view, add, change or delete),
    named as the admin names it (django.contrib.auth.get_permission_codename)."""
    opts = model._meta
    return f"{opts.app_label}.{get_permission_codename(action, opts)}"


def permission_problem(user, perm: str | None, *, own: bool = False) -> str | None:
    """Return why ``user`` may not do what ``perm`` (``"<app>.<codename>"``; None: what any
    staff user may) allows, in one line, or None when it may. With ``own``, a user holding
    ADD_PERMISSION may too, staff or not (the caller then reads through ``visible_to``)."""
    if not user.is_authenticated or not user.is_active:
        return "not signed in"
    if own and user.has_perm(ADD_PERMISSION):
        return None
    if not user.is_staff and own:
        return (
            f"this account may neither read the archive (that needs a staff account) nor add "
            f"to it and read back its own captures (that needs the permission {ADD_PERMISSION})"
        )
    if not user.is_staff:
        return "only staff users may use this (an administrator can mark the account as staff)"
    if perm is not None and not user.has_perm(perm):
        return f"permission {perm} is needed"
    return None


def staff_permission_required(perm: str, *, own: bool = False):
    """Decorate a view: visitors not signed in go to the sign-in page (settings.LOGIN_URL) and
    back; a signed-in user that permission_problem (with ``own``) refuses gets a 403 page
    saying why."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            problem = permission_problem(request.user, perm, own=own)
            if problem:
                raise PermissionDenied(problem)
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


class _StaffCheck:
    """Mixed into a ninja auth class: the user it authenticates must pass permission_problem
    for ``perm`` (None: staff is enough) and ``own``, else ninja answers 403 with the
    reason."""

    def __init__(self, perm: str | None = None, *, own: bool = False) -> None:
        super().__init__()
        self.perm = perm
        self.own = own

    def _checked(self, user):
        if user is None or not user.is_authenticated:
            return None  # ninja tries the next way in, then answers 401
        problem = permission_problem(user, self.perm, own=self.own)
        if problem:
            raise AuthorizationError(message=problem)
        return user


class BearerToken(_StaffCheck, security.HttpBearer):
    """``Authorization: Bearer <token>``: the token's user (core/services/tokens.py), who must be
    staff with ``perm``."""

    def authenticate(self, request, token: str):
        user = token_user(token)
        if user is not None:
            request.user = user
        return self._checked(user)


class SessionAuth(_StaffCheck, security.SessionAuth):
    """The admin's session (ninja checks its CSRF token on changes); staff with ``perm``."""

    def authenticate(self, request, key: str | None):
        return self._checked(super().authenticate(request, key))


def staff(model: type[Model], action: str, *, own: bool = False) -> list:
    """Return the ``auth=`` of an API operation that the admin's ``action`` on ``model``
    matches (view, add, change, delete; see model_perm): a token or a session of an active
    staff user holding that permission, or with ``own`` of any active user holding
    ADD_PERMISSION (the operation then reads through ``visible_to``). No credentials: 401; a
    user refused: 403."""
    perm = model_perm(model, action)
    return [BearerToken(perm, own=own), SessionAuth(perm, own=own)]


# The API's default: any active staff user. Every operation narrows it with staff(...).
ANY_STAFF = [BearerToken(), SessionAuth()]
