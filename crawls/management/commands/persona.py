"""``manage.py persona list|add|remove|login``: who a crawl may sign in as (issue 21)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from playwright.sync_api import Error as PlaywrightError

from core.extractors.signin import can_open_window, profile_state, sign_in
from core.management.database import require_migrated_database
from core.services.personas import persona_remove, persona_save
from crawls.models import Persona
from crawls.seeds import InputError

LOGIN_HELP = """\
To sign in once elsewhere and keep the session as persona {name} (with a display here,
DISPLAY set, e.g. Xvfb and a VNC viewer, persona login opens the window itself):
  1. On a desktop, open {url} in Chromium or Firefox and sign in.
  2. Export the site's cookies as a Netscape cookies.txt (an extension such as "Get cookies.txt
     LOCALLY"), or save a Playwright storage state:
       npx playwright open --save-storage=state.json {url}
  3. Import it here:  manage.py persona add {name} --cookies state.json
Then archive with:    manage.py add --persona {name} URL
"""


class Command(BaseCommand):
    help = (
        "List, add (import cookies.txt or a Playwright storage state, headers, user agent) or "
        "remove personas; a crawl names one with add --persona NAME. Secrets are never shown."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="Every persona, with how many cookies and headers.")
        add = actions.add_parser("add", help="Create a persona, or update what is given.")
        add.add_argument("name")
        source = add.add_mutually_exclusive_group()
        source.add_argument(
            "--cookies",
            type=Path,
            help="A Netscape cookies.txt or a Playwright storage state (JSON); - reads stdin.",
        )
        source.add_argument(
            "--profile-dir",
            type=Path,
            help="Take the cookies of this Chromium user-data folder (signed in once there); "
            "the folder itself is not copied.",
        )
        add.add_argument(
            "--header",
            action="append",
            default=[],
            help="'Name: value', sent with each request to the persona's domains (repeat for "
            "more).",
        )
        add.add_argument(
            "--domain",
            action="append",
            default=[],
            help="A host or domain (its subdomains too) the headers are for, besides the "
            "cookies' domains (repeat for more; given, replaces the stored ones).",
        )
        add.add_argument("--user-agent", help="Sent instead of USER_AGENT.")
        add.add_argument("--description")
        add.add_argument(
            "--keep-in-warcs",
            action=argparse.BooleanOptionalAction,
            help="Keep the Cookie and Authorization headers sent in the WARCs' request records "
            "(default: no, they are replaced).",
        )
        remove = actions.add_parser("remove", help="Delete a persona; snapshots stay.")
        remove.add_argument("name")
        login = actions.add_parser(
            "login",
            help="Sign in once in a Chromium window and keep its cookies (with a display), "
            "else say how to do it on a desktop.",
        )
        login.add_argument("name")
        login.add_argument("url")
        login.add_argument(
            "--print", action="store_true", help="Only say how, even with a display."
        )

    def handle(self, *args, action, **options):
        require_migrated_database()
        try:
            if action == "list":
                self._list()
            elif action == "add":
                persona = persona_save(
                    name=options["name"],
                    cookies=self._read(options["cookies"])
                    if options["profile_dir"] is None
                    else self._profile(options["profile_dir"]),
                    headers=options["header"],
                    user_agent=options["user_agent"],
                    description=options["description"],
                    keep_in_warcs=options["keep_in_warcs"],
                    domains=options["domain"],
                )
                self.stdout.write(f"persona {persona.name}: {persona.summary()}")
            elif action == "remove":
                persona_remove(name=options["name"])
                self.stdout.write(f"persona {options['name']} removed")
            elif options["print"] or not can_open_window():
                self.stdout.write(LOGIN_HELP.format(name=options["name"], url=options["url"]))
            else:
                self._login(options["name"], options["url"])
        except InputError as error:
            raise CommandError(str(error)) from None

    def _login(self, name: str, url: str) -> None:
        self.stdout.write(f"Sign in at {url} in the window that opens, then close the window.")
        try:
            state = sign_in(url)
        except LookupError as error:
            raise CommandError(str(error)) from None
        except PlaywrightError as error:
            raise CommandError(f"the browser could not open {url}: {error.message}") from None
        persona = persona_save(name=name, cookies=state)
        self.stdout.write(f"persona {persona.name}: {persona.summary()}")

    @staticmethod
    def _profile(folder: Path) -> str:
        try:
            return profile_state(folder)
        except LookupError as error:
            raise CommandError(str(error)) from None
        except PlaywrightError as error:
            raise CommandError(f"cannot open the profile {folder}: {error.message}") from None

    def _list(self) -> None:
        for persona in Persona.objects.all():
            agent = f", user agent {persona.user_agent!r}" if persona.user_agent else ""
            kept = ", kept in WARCs" if persona.keep_in_warcs else ""
            self.stdout.write(f"{persona.name}: {persona.summary()}{agent}{kept}")

    @staticmethod
    def _read(path: Path | None) -> str | None:
        if path is None:
            return None
        if str(path) == "-":
            return sys.stdin.read()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None
