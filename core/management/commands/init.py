"""``manage.py init``: create DATA_DIR (mode 0700), migrate, collect static files, create the
manifest signing key, and optionally an admin user. Run again, it tightens the modes of a
DATA_DIR made by an older version (archive/privacy.py)."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from archive.env import write_private
from archive.privacy import make_private_dir, tighten_data_dir
from core.folder import signing


class Command(BaseCommand):
    help = (
        "Create DATA_DIR (mode 0700: only this user may read it) and its database, collect "
        "static files, and create the key pair that signs snapshot manifests (DATA_DIR/keys). "
        "Run on an existing DATA_DIR, take group and others' access off it and what lies "
        "directly in it. With "
        "DJANGO_SUPERUSER_USERNAME and DJANGO_SUPERUSER_PASSWORD set, also create that admin "
        "user if it does not exist."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--create-admin",
            action="store_true",
            help="If there is no admin user yet, create 'admin' with a random password, printed "
            "once and kept in DATA_DIR/admin-password (mode 0600).",
        )

    def handle(self, *args, create_admin: bool, **options):
        self._make_private_folders()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write(f"Data folder ready: {settings.DATA_DIR}")
        self._ensure_signing_key()
        if os.environ.get("DJANGO_SUPERUSER_USERNAME"):
            self._create_admin_from_environment(os.environ["DJANGO_SUPERUSER_USERNAME"])
        elif create_admin:
            self._create_first_admin()

    def _make_private_folders(self) -> None:
        """Create DATA_DIR and its top folders 0700; tighten what an older version left open."""
        for folder in (settings.DATA_DIR, settings.ARCHIVE_DIR, settings.SOURCES_DIR,
                       settings.LOGS_DIR):  # fmt: skip
            try:
                make_private_dir(folder)
            except OSError as error:
                raise CommandError(f"cannot create {folder}: {error.strerror}") from None
        try:
            tightened = tighten_data_dir(settings.DATA_DIR)
        except OSError as error:
            raise CommandError(f"cannot restrict {error.filename}: {error.strerror}") from None
        if tightened:
            names = ", ".join(path.name for path in tightened)
            self.stdout.write(f"Closed to other users: {names}")

    def _ensure_signing_key(self) -> None:
        try:
            created = signing.ensure_signing_key()
            fingerprint = signing.key_fingerprint(signing.public_key_pem())
        except signing.SigningKeyError as error:
            raise CommandError(str(error)) from None
        label = "Signing key created" if created else "Signing key"
        self.stdout.write(f"{label}: {settings.KEYS_DIR / signing.PUBLIC_KEY_NAME} ({fingerprint})")

    def _create_first_admin(self) -> None:
        users = get_user_model().objects
        if users.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.create_superuser(username="admin", email="", password=password)
        password_file = settings.DATA_DIR / "admin-password"
        write_private(password_file, password + "\n")
        self.stdout.write(
            self.style.WARNING(
                f"Admin user 'admin' created; password: {password} (also in "
                f"{password_file}; change it in the admin)"
            )
        )

    def _create_admin_from_environment(self, username: str) -> None:
        if not os.environ.get("DJANGO_SUPERUSER_PASSWORD"):
            raise CommandError(
                "DJANGO_SUPERUSER_USERNAME is set but DJANGO_SUPERUSER_PASSWORD is not"
            )
        if get_user_model().objects.filter(username=username).exists():
            self.stdout.write(f"Admin user {username!r} already exists")
            return
        # createsuperuser reads the password (and email) from DJANGO_SUPERUSER_* variables.
        call_command(
            "createsuperuser",
            interactive=False,
            username=username,
            email=os.environ.get("DJANGO_SUPERUSER_EMAIL", ""),
            verbosity=0,
        )
        self.stdout.write(f"Admin user {username!r} created")
