"""A check the commands that read or write the index run first, so that a fresh DATA_DIR gets
a clear instruction instead of a "no such table" traceback."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor


def require_migrated_database() -> None:
    """Raise CommandError unless the index database can be opened and is fully migrated."""
    try:
        executor = MigrationExecutor(connection)
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as error:
        raise CommandError(f"Cannot open the index database: {error}") from None
    if unapplied:
        raise CommandError(
            "The index database is not set up for this version of Vellum "
            f"({len(unapplied)} migrations to apply): run `python manage.py init` first."
        )
