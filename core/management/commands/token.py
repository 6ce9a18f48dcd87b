"""``manage.py token create|list|revoke``: bearer tokens for the REST API (/api/v1/)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.management.database import require_migrated_database
from core.models import ApiToken
from core.services.tokens import token_create, token_revoke


class Command(BaseCommand):
    help = "Make, list or revoke API tokens (Authorization: Bearer <token> on /api/v1/)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="Make a token for a user; shown once.")
        create.add_argument("username")
        create.add_argument("--name", default="", help="What it is for.")
        actions.add_parser("list", help="Every token: id, user, name, last use (never the key).")
        revoke = actions.add_parser("revoke", help="Revoke tokens by id.")
        revoke.add_argument("ids", nargs="+", type=int, metavar="ID")

    def handle(self, *args, action: str, **options):
        require_migrated_database()
        getattr(self, f"_{action}")(**options)

    def _create(self, *, username: str, name: str, **options) -> None:
        try:
            token, key = token_create(username=username, name=name)
        except get_user_model().DoesNotExist:
            raise CommandError(
                f"no user {username!r} (manage.py createsuperuser makes one)"
            ) from None
        self.stderr.write(f"Token {token.pk} for {token.user}; it is shown once, keep it now:")
        self.stdout.write(key)

    def _list(self, **options) -> None:
        tokens = ApiToken.objects.select_related("user")
        if not tokens:
            self.stdout.write("No tokens (manage.py token create USERNAME).")
        for token in tokens:
            used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
            state = " REVOKED" if token.revoked_at else ""
            self.stdout.write(
                f"{token.pk:>4}  {token.prefix}…  {token.user}  last used {used}{state}"
                f"  {token.name}"
            )

    def _revoke(self, *, ids: list[int], **options) -> None:
        missing = 0
        for token_id in ids:
            try:
                token_revoke(token_id=token_id)
                self.stdout.write(f"Token {token_id} revoked.")
            except ApiToken.DoesNotExist:
                missing += 1
                self.stderr.write(f"token {token_id}: no such token")
        if missing:
            raise CommandError(f"{missing} of {len(ids)} tokens not found")
