"""API tokens: what a script shows the REST API instead of a session (``Authorization: Bearer``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiTokenQuerySet(models.QuerySet):
    def active(self) -> ApiTokenQuerySet:
        """Tokens not revoked, of users still active."""
        return self.filter(revoked_at__isnull=True, user__is_active=True)


class ApiToken(models.Model):
    """One bearer token of one user. Only its SHA-256 is stored: the token itself is shown once,
    when it is made (core/services/tokens.py), and cannot be read back."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text="What it is for.")
    prefix = models.CharField(max_length=12, help_text="Its first characters, to recognize it.")
    key_sha256 = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}{': ' + self.name if self.name else ''})"
