"""What ``manage.py hold`` and ``release`` share: choosing crawls and reporting each change."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django_fsm import ConcurrentTransition, TransitionNotAllowed

from core.management.database import require_migrated_database
from crawls.models import Crawl
from orchestrator.models import QueueState


class HoldCommand(BaseCommand):
    """``manage.py hold|release [CRAWL ...] [--all] [--queue]``: one transition per crawl, or
    the queue's own; a crawl that cannot change is reported and the command exits 1."""

    verb = ""  # "hold" or "release"
    all_help = ""

    def add_arguments(self, parser):
        parser.add_argument("crawls", nargs="*", type=int, metavar="CRAWL", help="Crawl ids.")
        parser.add_argument("--all", action="store_true", help=self.all_help)
        parser.add_argument(
            "--queue", action="store_true", help=f"{self.verb.title()} the whole queue."
        )

    def handle(self, *args, crawls: list[int], all: bool, queue: bool, **options):
        require_migrated_database()
        if (bool(crawls) + all + queue) != 1:
            raise CommandError("Say what: crawl ids, --all or --queue (exactly one).")
        if queue:
            self._change_queue(options)
            return
        ids = list(self.all_crawls().order_by("pk").values_list("pk", flat=True)) if all else crawls
        if not ids:
            self.stdout.write(f"Nothing to {self.verb}.")
            return
        refused = 0
        for crawl_id in ids:
            try:
                crawl = self.change_crawl(crawl_id, options)
            except Crawl.DoesNotExist:
                refused += 1
                self.stderr.write(f"crawl {crawl_id}: no such crawl")
            except (TransitionNotAllowed, ConcurrentTransition) as error:
                refused += 1
                self.stderr.write(f"crawl {crawl_id}: {self.refusal(crawl_id, error)}")
            else:
                self.stdout.write(f"crawl {crawl.pk}: {crawl.status}")
        if refused:
            raise CommandError(f"{refused} of {len(ids)} crawls not changed")

    def _change_queue(self, options) -> None:
        try:
            state = self.change_queue(options)
        except TransitionNotAllowed:
            raise CommandError(f"Nothing to do: {QueueState.current()}.") from None
        self.stdout.write(f"The {state}.")

    def refusal(self, crawl_id: int, error: Exception) -> str:
        if isinstance(error, ConcurrentTransition):
            return str(error)
        status = Crawl.objects.filter(pk=crawl_id).values_list("status", flat=True).first()
        return f"cannot {self.verb} a crawl that is {status}"

    def all_crawls(self):
        """The crawls ``--all`` names (a queryset)."""
        raise NotImplementedError(f"{type(self).__name__} must say what --all selects")

    def change_crawl(self, crawl_id: int, options) -> Crawl:
        """Run this command's transition on one crawl; return it as saved."""
        raise NotImplementedError(f"{type(self).__name__} must change a crawl")

    def change_queue(self, options: dict) -> QueueState:
        """Run this command's transition on the queue; return its state as saved."""
        raise NotImplementedError(f"{type(self).__name__} must change the queue")
