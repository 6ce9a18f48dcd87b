"""Admin for API tokens: listed and revoked here, made with ``manage.py token create``."""

from __future__ import annotations

from django.contrib import admin

from core.admin.permissions import ActionPermissionsMixin
from core.models import ApiToken
from core.services.tokens import token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(ActionPermissionsMixin, admin.ModelAdmin):
    """Tokens are made with ``manage.py token create`` (the key is shown once, there); here
    they are listed and revoked."""

    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    readonly_fields = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    fields = readonly_fields
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Revoke selected tokens", permissions=["transition"])
    def revoke(self, request, queryset):
        for token_id in queryset.values_list("pk", flat=True):
            token_revoke(token_id=token_id)
        self.message_user(request, f"{queryset.count()} token(s) revoked.")
