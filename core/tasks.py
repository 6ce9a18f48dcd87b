"""Side work on huey (DESIGN.md §5): the scheduled fixity audit.

The huey consumer (supervisord's ``huey`` program, ``manage.py djangohuey``) finds this module
by name and runs the audit on FIXITY_AUDIT_CRON (five cron fields, checked at start-up).
"""

from __future__ import annotations

import logging
from datetime import datetime

from croniter import croniter
from django.conf import settings
from django_huey import db_periodic_task

from core.services.fixity import fixity_audit_due

logger = logging.getLogger(__name__)


def audit_due(moment: datetime) -> bool:
    """Huey's periodic test: whether the minute of ``moment`` (huey's clock, UTC) is one that
    FIXITY_AUDIT_CRON names (croniter's rules, like crawl schedules; settings has checked it)."""
    return croniter.match(settings.FIXITY_AUDIT_CRON, moment)


@db_periodic_task(audit_due)
def fixity_audit() -> int:
    """Re-hash the snapshots not checked in FIXITY_AUDIT_INTERVAL_DAYS; return how many."""
    audited = fixity_audit_due()
    logger.info("fixity audit: %d snapshots checked", audited)
    return audited
