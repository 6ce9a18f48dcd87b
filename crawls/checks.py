"""System checks on the crawls app's settings (run by every command): where notifications go."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ValidationError

from core.checks import SETTINGS_TAG
from crawls.notifications import check_email_addresses, check_webhook_url
from crawls.seeds import InvalidURL


@register(SETTINGS_TAG)
def check_notifications(app_configs, **kwargs) -> list[Error]:
    """Report a NOTIFY_WEBHOOK_URL that is not an http(s) URL and NOTIFY_EMAIL addresses that
    are not email addresses."""
    errors = []
    if settings.NOTIFY_WEBHOOK_URL:
        try:
            check_webhook_url(settings.NOTIFY_WEBHOOK_URL)
        except InvalidURL as error:
            errors.append(Error(f"NOTIFY_WEBHOOK_URL: {error}", id="crawls.E001"))
    try:
        check_email_addresses(settings.NOTIFY_EMAIL)
    except ValidationError as error:
        errors.append(Error(f"NOTIFY_EMAIL: {error.messages[0]}", id="crawls.E002"))
    return errors
