#!/usr/bin/env python
"""Vellum's command-line entry point: every user-facing command is a management command."""

import gc
import os
import signal
import sys


def main() -> None:
    # Setting Django and Vellum up makes some 100,000 objects that live as long as the process
    # and almost no garbage: collections during it walked them all again and again, a quarter
    # of a command's start-up CPU time (issue 19). Collection resumes once Django is set up,
    # with those objects frozen (core/apps.py).
    gc.disable()
    if sys.argv[1:2] == ["actor"]:
        # The orchestrator may ask an actor that is still starting up to drain (SIGINT): it has
        # no work yet, so it ends quietly, by the signal, instead of with a KeyboardInterrupt
        # traceback from whatever it was importing. The actor sets its own handlers once ready.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "archive.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as error:
        # Settings are validated at start-up (archive/settings.py): say what is wrong, in one line.
        sys.exit(f"Configuration error: {error}")


if __name__ == "__main__":
    main()
