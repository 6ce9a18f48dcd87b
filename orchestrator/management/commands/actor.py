"""``manage.py actor <kind>``: claim and tick due records of one kind."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand

from core.checks import PIPELINE_CHECKS
from orchestrator.actor import Actor
from orchestrator.logs import log_to_file
from orchestrator.work import work_types


class Command(BaseCommand):
    help = (
        "Claim and tick due records of one kind until idle (normally spawned by the orchestrator)."
    )
    requires_system_checks = PIPELINE_CHECKS  # not the web side's (core/checks.py)

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=list(work_types()))
        parser.add_argument(
            "--idle-exit",
            type=float,
            default=None,
            help=f"Seconds without work before exiting (default ACTOR_IDLE_EXIT, "
            f"{settings.ACTOR_IDLE_EXIT:g}).",
        )
        parser.add_argument("--max-records", type=int, default=None, help="Exit after N records.")

    def handle(self, *args, kind, idle_exit, max_records, **options):
        log_to_file("actors.log")
        actor = Actor(
            work_types()[kind],
            idle_exit=settings.ACTOR_IDLE_EXIT if idle_exit is None else idle_exit,
            max_records=max_records,
        )
        actor.run()
