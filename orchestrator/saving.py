"""Saving a work item with one UPDATE statement written once per process (issue 19).

Actors save a snapshot or an archive result after every transition, some ten times a page.
Django's ``Model.save()`` builds a queryset for each (the primary key and, for django-fsm's
``ConcurrentTransitionMixin``, the state read last), then compiles it and every column's
assignment into SQL: 0.33 ms of CPU a save in a warm process, for a statement SQLite runs in
0.04 ms. Yet the SQL of that UPDATE is the same every time for a model:

    UPDATE <table> SET <each column but the key> = %s, ... WHERE <key> = %s AND <state> = %s

``save_row`` writes it once per model and set of loaded fields (0.15 ms a save, all told), and
runs it with the values Django's save would have sent: each field's ``pre_save`` (``auto_now``
sets ``modified_at``) then ``get_db_prep_save``, the key and the state as their fields adapt a
lookup's value. As Django's, it leaves out generated columns, and the fields of a record loaded
without them. What it does not replicate it leaves to Django, by answering False before it
writes anything: a record not saved before, a save with arguments (a crawl's: ``Crawl.save``
names the fields it writes), a model with a ``pre_save``/``post_save`` receiver or a parent
model, a composite key, a field with a placeholder of its own (binary), a value that is an
expression (``F()``) or a model instance, a state that is NULL. The tests hold it to what
``Model.save()`` writes, column by column (orchestrator/tests/test_saving.py).
"""

from __future__ import annotations

from functools import cache

from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connections, models, router, transaction
from django.db.models import signals
from django.dispatch import receiver
from django_fsm import ConcurrentTransition, FSMFieldMixin


class _Statement:
    """The UPDATE of one model's row by key and state: its SQL, the fields whose values it
    sets in order, its key field and its state fields (django-fsm's)."""

    def __init__(self, model: type[models.Model], loaded: frozenset[str], quote):
        meta = model._meta
        self.fields = [
            field
            for field in meta.local_concrete_fields
            if not field.primary_key and not field.generated and field.attname in loaded
        ]
        self.key = meta.pk
        self.states = [field for field in meta.concrete_fields if isinstance(field, FSMFieldMixin)]
        assignments = ", ".join(f"{quote(field.column)} = %s" for field in self.fields)
        conditions = " AND ".join(
            f"{quote(field.column)} = %s" for field in [self.key, *self.states]
        )
        self.sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {conditions}"


# (database vendor, model, attnames loaded) -> its statement, or None: Django's save runs.
_statements: dict[tuple, _Statement | None] = {}


def _statement(connection, model: type[models.Model], loaded: frozenset[str]) -> _Statement | None:
    """The statement of ``model`` for the fields ``loaded`` (attnames) on ``connection``'s
    database, or None where Django's own save must run (see the module's docstring). Written
    once per vendor: each thread has a connection of its own, which quotes names alike."""
    key = (connection.vendor, model, loaded)
    try:
        return _statements[key]
    except KeyError:
        statement = _statements[key] = _written(model, loaded, connection.ops.quote_name)
        return statement


def _written(model: type[models.Model], loaded: frozenset[str], quote) -> _Statement | None:
    meta = model._meta
    if meta.parents or meta.select_on_save or meta.pk.column is None:  # no composite keys
        return None
    statement = _Statement(model, loaded, quote)
    if not statement.fields:  # the key alone: Django saves every field then
        return None
    if any(hasattr(field, "get_placeholder") for field in statement.fields):
        return None
    return statement


def save_row(record: models.Model) -> bool:
    """Save ``record``, a row loaded from the database (or saved once), as ``Model.save()``
    with no arguments would; return True, or False having written nothing when Django's own
    save must do it (see the module's docstring). For a model's ``save()`` to call in place of
    ``super().save()`` (WorkItem.save): a ``save()`` of the model's own is not run, nor what
    ConcurrentTransitionMixin does after saving.

    Raises django_fsm.ConcurrentTransition when the row's state is no longer the one
    ``record`` read (another process moved it on), as ConcurrentTransitionMixin does, and
    what the database raises.
    """
    model = type(record)
    if record._state.adding or record.pk is None or _has_receivers(model):
        return False
    using = router.db_for_write(model, instance=record)
    if using != DEFAULT_DB_ALIAS:
        return False
    connection = connections[using]  # once: each use of django.db.connection looks it up
    # As Model.save(): a record loaded without some fields saves the others only.
    saved = _saved_attnames(model)
    loaded = frozenset(name for name in saved if name in record.__dict__)
    if len(loaded) < len(saved) and record._state.db != using:
        return False
    statement = _statement(connection, model, loaded)
    states = _initial_states(record, statement)
    if statement is None or states is None:
        return False
    record._prepare_related_fields_for_save(operation_name="save")
    # As Django's save: an error from here on (a value the database cannot take, say) marks
    # the caller's transaction for rollback.
    with transaction.mark_for_rollback_on_error(using):
        params = _parameters(record, statement, states, connection)
        if params is None:
            return False
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, params)
            updated = cursor.rowcount
        if not updated and statement.states and _exists(model, record.pk, using):
            raise ConcurrentTransition(
                "Cannot save object! The state has been changed since fetched from the database!"
            )
    if not updated:
        return False  # gone meanwhile: Django's save inserts it again, as it would have
    record._state.adding = False
    record._state.db = using
    return True


@cache
def _saved_attnames(model: type[models.Model]) -> tuple[str, ...]:
    """The attnames of the columns ``model``'s save writes (generated ones it never does);
    worked out once, not at every save."""
    return tuple(field.attname for field in model._meta.concrete_fields if not field.generated)


def _parameters(
    record: models.Model, statement: _Statement, states: list, connection
) -> list | None:
    """The statement's parameters for ``record``, as Django's save and its UPDATE compiler
    make them, or None for a value they would take otherwise: an expression (``F()``), or a
    model instance (turned into its key, or refused)."""
    values = [field.pre_save(record, False) for field in statement.fields]
    if any(_made_otherwise(value) for value in values):
        return None
    params = [
        field.get_db_prep_save(value, connection=connection)
        for field, value in zip(statement.fields, values, strict=True)
    ]
    params.append(statement.key.get_db_prep_value(record.pk, connection, prepared=False))
    params += [
        field.get_db_prep_value(state, connection, prepared=False)
        for field, state in zip(statement.states, states, strict=True)
    ]
    return params


def _made_otherwise(value) -> bool:
    return hasattr(value, "resolve_expression") or hasattr(value, "prepare_database_save")


def _exists(model: type[models.Model], pk, using: str) -> bool:
    """Whether ``model``'s row ``pk`` is there (on database ``using``, as the mixin asks)."""
    return model._base_manager.using(using).filter(pk=pk).exists()


def _initial_states(record: models.Model, statement: _Statement | None) -> list | None:
    """The state of each of the statement's state fields as ``record`` last read or saved it
    (what ConcurrentTransitionMixin filters on), or None when one is NULL (no ``= %s``)."""
    if statement is None:
        return None
    initial = getattr(record, "_ConcurrentTransitionMixin__initial_states", None)
    if statement.states and initial is None:
        return None
    states = [initial[field.attname] for field in statement.states]
    return None if any(state is None for state in states) else states


def _has_receivers(model: type[models.Model]) -> bool:
    return signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model)


@receiver(setting_changed)
def _forget_statements(**kwargs) -> None:
    """A test that changes the database settings gets statements written for its own."""
    _statements.clear()
