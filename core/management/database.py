"""A check the commands that read or write the index run first, so that a fresh DATA_DIR gets
a clear instruction instead of a "no such table" traceback."""

from __future__ import annotations

import pkgutil
from importlib import import_module

from django.apps import apps
from django.core.management.base import CommandError
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder


def require_migrated_database() -> None:
    """Raise CommandError unless the index database can be opened and is fully migrated."""
    try:
        if _every_migration_recorded():
            return
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as error:
        raise CommandError(f"Cannot open the index database: {error}") from None
    if unapplied:
        raise CommandError(
            "The index database is not set up for this version of Vellum "
            f"({len(unapplied)} migrations to apply): run `python manage.py init` first."
        )


def _every_migration_recorded() -> bool:
    """True when ``django_migrations`` records every migration file of every installed app:
    nothing is then left to apply, known from one query and the migrations folders' listings,
    without importing each migration and building their graph (MigrationExecutor, some 15 ms
    of every command's start-up). False decides nothing: the executor then does.

    The files are listed as Django's MigrationLoader lists them (``load_disk``): the modules
    of the app's migrations package, packages and names starting with ``_`` or ``~`` aside.
    """
    applied = set(MigrationRecorder(connection).applied_migrations())  # none without its table
    if not applied:
        return False
    for app_config in apps.get_app_configs():
        module_name, _explicit = MigrationLoader.migrations_module(app_config.label)
        try:
            module = import_module(module_name) if module_name else None
        except ModuleNotFoundError as error:
            if error.name == module_name:
                continue  # an app without migrations
            return False  # the executor says what is wrong
        for _finder, name, is_package in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if not is_package and name[0] not in "_~" and (app_config.label, name) not in applied:
                return False
    return True
