"""``manage.py profile list|show|add|remove``: the profiles (steps to run) crawls can name."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db.models import ProtectedError

from core.management.database import require_migrated_database
from core.services.profiles import describe_steps, profile_remove, profile_save
from crawls.models import Profile
from crawls.profiles import default_steps


class Command(BaseCommand):
    help = (
        "List, show, add or remove profiles: ordered steps (extractor, blocking / nonblocking / "
        "finally, depends_on) that a crawl runs (add --profile NAME)."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="Every profile, the default marked with *.")
        show = actions.add_parser("show", help="One profile's steps as JSON.")
        show.add_argument("name")
        add = actions.add_parser("add", help="Create a profile, or replace its steps.")
        add.add_argument("name")
        source = add.add_mutually_exclusive_group(required=True)
        source.add_argument(
            "--steps",
            help='JSON: e.g. \'[{"extractor": "wget", "behaviour": "blocking"}, "title"]\'',
        )
        source.add_argument("--file", type=Path, help="A JSON file holding the steps.")
        add.add_argument("--description", default="")
        add.add_argument("--default", action="store_true", help="Make it the default profile.")
        remove = actions.add_parser("remove", help="Delete a profile no crawl names.")
        remove.add_argument("name")

    def handle(self, *args, action: str, **options):
        require_migrated_database()
        getattr(self, f"_{action}")(**options)

    def _list(self, **options) -> None:
        profiles = list(Profile.objects.all())
        if not any(profile.is_default for profile in profiles):
            self.stdout.write(f"* (built-in): {describe_steps(default_steps())}")
        for profile in profiles:
            mark = "*" if profile.is_default else " "
            try:
                steps = describe_steps(profile.planned_steps())
            except ValidationError as error:
                steps = f"INVALID: {'; '.join(error.messages)}"
            self.stdout.write(f"{mark} {profile.name}: {steps}")

    def _show(self, *, name: str, **options) -> None:
        profile = self._get(name)
        self.stdout.write(json.dumps(profile.steps, indent=2))

    def _add(self, *, name: str, steps: str | None, file: Path | None, **options) -> None:
        text = steps if steps is not None else self._read(file)
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            raise CommandError(f"steps are not JSON: {error}") from None
        try:
            profile = profile_save(
                name=name,
                steps=parsed,
                description=options["description"],
                is_default=options["default"],
            )
        except ValidationError as error:
            raise CommandError("; ".join(_messages(error))) from None
        mark = " (the default)" if profile.is_default else ""
        steps = describe_steps(profile.planned_steps())
        self.stdout.write(f"Profile {profile.name}{mark}: {steps}")

    def _remove(self, *, name: str, **options) -> None:
        self._get(name)
        try:
            profile_remove(name=name)
        except ProtectedError as error:
            count = len(error.protected_objects)
            raise CommandError(f"profile {name} is named by {count} crawl(s): kept") from None
        self.stdout.write(f"Profile {name} removed.")

    @staticmethod
    def _get(name: str) -> Profile:
        try:
            return Profile.objects.get(name=name)
        except Profile.DoesNotExist:
            raise CommandError(f"no profile {name!r} (manage.py profile list)") from None

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None


def _messages(error: ValidationError) -> list[str]:
    """Field errors as ``field: message``; others as they are."""
    if hasattr(error, "error_dict"):
        return [
            f"{field}: {message}" if field != "__all__" else message
            for field, messages in error.message_dict.items()
            for message in messages
        ]
    return error.messages
