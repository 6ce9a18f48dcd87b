"""Side work on huey (DESIGN.md §5): the scheduled fixity audit.

The huey consumer (supervisord's ``huey`` program, ``manage.py djangohuey``) finds this module
by name and runs the audit on FIXITY_AUDIT_CRON (five cron fields, checked at start-up).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django_huey import db_periodic_task
from huey import crontab

from core.services.fixity import fixity_audit_due

logger = logging.getLogger(__name__)


def audit_schedule():
    """Return huey's test for FIXITY_AUDIT_CRON (``minute hour day month weekday``; settings
    has checked it)."""
    return crontab(*settings.FIXITY_AUDIT_CRON.split(), strict=True)


@db_periodic_task(audit_schedule())
def fixity_audit() -> int:
    """Re-hash the snapshots not checked in FIXITY_AUDIT_INTERVAL_DAYS; return how many."""
    audited = fixity_audit_due()
    logger.info("fixity audit: %d snapshots checked", audited)
    return audited
