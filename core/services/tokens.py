"""Making, checking and revoking API tokens (core/models/tokens.py).

A token is 32 random bytes from ``secrets`` (URL-safe text, prefixed ``vlm_`` so a leaked one is
easy to find in logs and code); the database keeps only its SHA-256, so a copy of the database
does not give API access.
"""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.utils import timezone

from core.models import ApiToken

TOKEN_PREFIX = "vlm_"
SHOWN_CHARACTERS = 10  # of the token, kept as its ``prefix``
LAST_USED_PRECISION = 60  # seconds: last_used_at is written at most once a minute per token


def token_create(*, username: str, name: str = "") -> tuple[ApiToken, str]:
    """Make a token for the user ``username``; return the record and the token, which is not
    stored and cannot be shown again. Raises User.DoesNotExist."""
    user = get_user_model().objects.get(username=username)
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name[:100], prefix=key[:SHOWN_CHARACTERS], key_sha256=_digest(key)
    )
    return token, key


def token_user(key: str):
    """The active user whose active token ``key`` is, or None."""
    if not key.startswith(TOKEN_PREFIX):
        return None
    token = ApiToken.objects.active().select_related("user").filter(key_sha256=_digest(key)).first()
    if token is None:
        return None
    now = timezone.now()
    if (
        token.last_used_at is None
        or (now - token.last_used_at).total_seconds() > LAST_USED_PRECISION
    ):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def token_revoke(*, token_id: int) -> ApiToken:
    """Revoke token ``token_id`` (it stays listed, unusable). Raises ApiToken.DoesNotExist."""
    token = ApiToken.objects.get(pk=token_id)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
