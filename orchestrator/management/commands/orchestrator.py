"""``manage.py orchestrator``: run the orchestrator loop (under supervisord, or by hand)."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from core.checks import PIPELINE_CHECKS
from core.management.database import require_migrated_database
from orchestrator.logs import log_to_file
from orchestrator.orchestrator import Orchestrator


class Command(BaseCommand):
    help = "Spawn actors for due crawls, snapshots and archive results; runs until stopped."
    requires_system_checks = PIPELINE_CHECKS  # not the web side's (core/checks.py)

    def add_arguments(self, parser):
        parser.add_argument(
            "--exit-on-idle",
            action="store_true",
            help="Return once no crawl, snapshot or result is left to do.",
        )

    def handle(self, *args, exit_on_idle, **options):
        require_migrated_database()
        log_to_file("orchestrator.log", also_stderr=True)
        try:
            Orchestrator(exit_on_idle=exit_on_idle).run()
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from None
