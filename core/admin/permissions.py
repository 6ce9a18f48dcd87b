"""Who may run the admin's actions on records whose admin pages are read-only.

Vellum's admins turn the admin's own change and delete permissions off (state changes only
through services, rows are removed only with their folders), and Django offers an action to
everyone who can see the list unless the action names a permission. So each action that
changes something names one of these, read from the user's model permissions
(``<app>.change_<model>``, ``<app>.delete_<model>``; every superuser has them). Django calls
``has_<name>_permission(request)`` for an action declared with ``permissions=[<name>]``
(django.contrib.admin.options.ModelAdmin._filter_actions_by_permissions).
"""

from __future__ import annotations

from django.contrib.auth import get_permission_codename
from django.http import HttpRequest


class ActionPermissionsMixin:
    """``transition``: the model's change permission; ``remove``: its delete permission."""

    def has_transition_permission(self, request: HttpRequest) -> bool:
        """Return whether the user may change records' state (retry, hold, re-archive, …)."""
        return self._has_model_perm(request, "change")

    def has_remove_permission(self, request: HttpRequest) -> bool:
        """Return whether the user may remove records with their folders."""
        return self._has_model_perm(request, "delete")

    def _has_model_perm(self, request: HttpRequest, action: str) -> bool:
        opts = self.model._meta
        return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")
