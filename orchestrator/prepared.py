"""Querysets compiled to SQL once per process, their arguments put into the compiled SQL.

Django builds and compiles a queryset into SQL every time it is evaluated. For the claim of
an archive result (orchestrator/claims.py) that is some 5 ms of Python (the due filter, the
queue's hold and the three host subqueries of ``held_back_hosts``) for a statement SQLite then
runs in well under a millisecond; actors claim hundreds of times a minute, and this was a
fifth of a crawl's Python time (py-spy, bench/throughput.py, issue 19). Building queries was,
all told, four tenths of an actor's Python time, running them one fortieth.

``PreparedQuery`` compiles ``build(*args)``, a function returning a queryset, once for each of
two sets of marker arguments (values of the arguments' types that no real record carries) and
keeps the SQL with the positions of the parameters that were those markers; a later run puts its
own arguments there, adapted for the database as the markers were (a time as the driver takes
it, a UUID as SQLite stores it). It is used only when the two compilations show that this is all
that varies: they differ in exactly those parameters, and each is a marker as the database takes
it; a query that derives other values from an argument, say ``now - 1 hour``, is simply compiled
afresh every time (a ``__contains`` pattern is known: the argument made a LIKE pattern as Django
makes it). ``build`` must not branch on its arguments: what it does with the markers is what the
SQL does for every argument. Nor on the database's or the process's state: a count read while
building, or the disk guard, would hold for as long as the process lives (such state goes into
the SQL, or into the key: SnapshotQuerySet.claimable). Compiled SQL depends on settings (a
per-host limit of 0 drops a subquery), so every cached query is forgotten when a setting
changes (Django's ``setting_changed`` signal, sent by ``override_settings`` in tests).

Rows are made into instances as Django's own ``ModelIterable`` makes them, from the compiler's
``select`` and ``klass_info``, related records of ``select_related`` and annotations included,
rather than through ``raw()``, which works out the same layout again for every query:
internals of Django (pinned in requirements.txt), checked by the tests against what the ORM
loads. ``record_by_pk``, the load of a record just claimed (``select_related(...).get(pk=...)``,
80 columns for an archive result with its snapshot and crawl), takes 0.27 ms compiled once
against 0.75 ms compiled each time, for a statement SQLite runs in 0.1 ms.

An UPDATE is compiled the same way (``prepared_update``, ``UpdateStatement``): its build gives
the rows and the values to set, as ``QuerySet.update()`` takes them, and the SQL is the one that
method would send (a values' marker found where the markers of a filter are). An UPDATE of a
child model (more than one table), of ordered, sliced or combined rows, or of another database
is left to Django. It sends no wake-up of its own: callers tell the model what their update
made due (``WorkItem.announce_update``, orchestrator/models.py). Some seventeen ORM
updates a page cost the actors 0.4 to 0.8 ms of Python each, for a statement SQLite runs in
0.05 ms.

The orchestrator compiles what an actor will run before it forks the first actor of its kind
(``compile_ahead``; a ``Statement`` names the kinds of actor that run it), and every actor
forked afterwards inherits it compiled.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import cache, cached_property, partial

from django.core.exceptions import ValidationError
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connection, models, transaction
from django.db.models import sql
from django.db.models.query import get_related_populators
from django.dispatch import receiver

logger = logging.getLogger(__name__)

# Two times no real record carries, compiled in turn to find where a time goes (a time that is
# a query's argument number i gets them i days later).
MARKERS = (
    datetime(2001, 2, 3, 4, 5, 6, 123457, tzinfo=UTC),
    datetime(2002, 3, 4, 5, 6, 7, 234568, tzinfo=UTC),
)

Build = Callable[..., models.QuerySet]
# An UPDATE's build: the rows and the values to set, as QuerySet.update(**values) takes them.
UpdateBuild = Callable[..., tuple[models.QuerySet, dict[str, object]]]
CompiledAt = Callable[[Callable, tuple], tuple]  # a build's compiler, and its (sql, params)
# The Python type of a primary key's value, by its field's class (str for the others); the
# auto fields are integer fields.
PK_TYPES = ((models.IntegerField, int), (models.UUIDField, uuid.UUID))
Adapter = Callable[[object], object]

# (database vendor, key, argument types, how compiled: None for a SELECT) -> the compiled query,
# or None where it cannot be.
_compiled: dict[tuple, PreparedQuery | None] = {}
# Every Statement and UpdateStatement made, in the order their modules made them.
_declared: list[_Declared] = []


class PreparedQuery:
    """The SQL of ``build(*args)`` with the slots where its arguments go (see the module's
    docstring): ``slots`` pairs each such parameter's position with the argument's index and
    the adapter that makes the argument the parameter."""

    def __init__(self, compiler, sql: str, params: list, slots: list):
        self.compiler = compiler
        self.sql = sql
        self.params = params
        self.slots = slots
        self.model = compiler.query.model

    @classmethod
    def compile(
        cls, build: Build, arg_types: tuple[type, ...], compiled_at: CompiledAt | None = None
    ) -> PreparedQuery | None:
        """Compile ``build`` at two sets of markers of ``arg_types`` (by ``compiled_at``: a
        SELECT unless told otherwise); return the query, or None when an argument has a type
        without markers, a field refuses a marker, more than the markers vary between the two,
        or a parameter that varies is no marker as the database takes it."""
        markers = _markers(arg_types)
        if markers is None:
            return None
        try:
            (compiler, (sql, params)), (_, (other_sql, other_params)) = (
                (compiled_at or _compiled_at)(build, args) for args in markers
            )
        except (ValidationError, ValueError, TypeError):
            return None  # a field refuses a marker (a str that is no UUID): the ORM says why
        if sql != other_sql or len(params) != len(other_params):
            return None
        slots = []
        for position, (value, other) in enumerate(zip(params, other_params, strict=True)):
            if value == other:
                continue
            found = _marker_slot(value, other, markers)
            if found is None:
                return None
            slots.append((position, *found))
        return cls(compiler, sql, list(params), slots)

    def records(self, *args) -> list[models.Model]:
        """Run the query with ``args``; return its rows as instances of its model, made as
        Django's ``ModelIterable`` makes them: the fields it selected loaded (the others
        deferred, as ``only()`` leaves them), its ``select_related`` records and annotations
        set."""
        compiler, (start, end, init_list, populators) = self.compiler, self._row_layout
        with connection.cursor() as cursor:
            cursor.execute(self.sql, self._params(args))
            rows = cursor.fetchall()
        converters, composite = self._conversion
        if converters:
            rows = compiler.apply_converters(rows, converters)
        if composite:
            rows = compiler.composite_fields_to_tuples(rows, self._selected)
        records = []
        for row in rows:
            record = self.model.from_db(compiler.using, init_list, row[start:end])
            for populator in populators:
                populator.populate(row, record)
            for name, position in compiler.annotation_col_map.items():
                setattr(record, name, row[position])
            records.append(record)
        return records

    @cached_property
    def _selected(self) -> list:
        return [column[0] for column in self.compiler.select[: self.compiler.col_count]]

    @cached_property
    def _conversion(self) -> tuple[dict, bool]:
        """What turns each selected column's value into its field's, and whether composite
        fields are selected: as ``results_iter`` works them out, once rather than for every
        query (a tenth of a claim's Python)."""
        return (
            self.compiler.get_converters(self._selected),
            self.compiler.has_composite_fields(self._selected),
        )

    @cached_property
    def _row_layout(self) -> tuple[int, int, list[str], list]:
        """Where a row holds the model's fields, their names, and the ``select_related``
        populators (Django's ``ModelIterable``)."""
        klass_info, select = self.compiler.klass_info, self.compiler.select
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        init_list = [column[0].target.attname for column in select[start:end]]
        return (
            start,
            end,
            init_list,
            get_related_populators(klass_info, select, self.compiler.using),
        )

    def count(self, *args) -> int:
        """How many rows the query has with ``args`` (as ``QuerySet.count()``)."""
        return self._scalar(f"SELECT COUNT(*) FROM ({self.sql}) counted", args)

    def exists(self, *args) -> bool:
        """Whether the query has any row with ``args`` (as ``QuerySet.exists()``)."""
        return bool(self._scalar(f"SELECT EXISTS ({self.sql})", args))

    def update(self, *args) -> int:
        """Run the UPDATE with ``args``; return how many rows it changed (as
        ``QuerySet.update()``, whose failure marks the transaction for rollback too)."""
        with transaction.mark_for_rollback_on_error(), connection.cursor() as cursor:
            cursor.execute(self.sql, self._params(args))
            return cursor.rowcount

    def _scalar(self, sql: str, args: tuple):
        with connection.cursor() as cursor:
            cursor.execute(sql, self._params(args))
            return cursor.fetchone()[0]

    def _params(self, args: tuple) -> list:
        params = list(self.params)
        for position, index, adapt in self.slots:
            params[position] = adapt(args[index])
        return params


def prepared_records(key: str, build: Build, *args) -> list[models.Model]:
    """Return the records of ``build(*args)``, from SQL compiled once per process under
    ``key`` (a name for what ``build`` selects), or compiled afresh when that cannot be done."""
    query = _prepared(key, build, _types(args))
    return list(build(*args)) if query is None else query.records(*args)


def prepared_count(key: str, build: Build, *args) -> int:
    """Return ``build(*args).count()``, from SQL compiled once per process under ``key``."""
    query = _prepared(key, build, _types(args))
    return build(*args).count() if query is None else query.count(*args)


def prepared_exists(key: str, build: Build, *args) -> bool:
    """Return ``build(*args).exists()``, from SQL compiled once per process under ``key``."""
    query = _prepared(key, build, _types(args))
    return build(*args).exists() if query is None else query.exists(*args)


def prepared_update(key: str, build: UpdateBuild, *args) -> int:
    """Run ``rows.update(**values)`` where ``(rows, values) = build(*args)``, from SQL compiled
    once per process under ``key`` (through Django's own ``QuerySet.update`` when it cannot
    be); return how many rows changed. Either way no wake-up is sent: a caller whose update
    makes work due or final says so (``WorkItem.announce_update``, orchestrator/models.py)."""
    query = _prepared(key, build, _types(args), update_compiled_at)
    if query is None:
        rows, values = build(*args)
        # Django's own update, not a subclass's: WorkQuerySet.update would send a wake-up.
        return models.QuerySet.update(rows, **values)
    return query.update(*args)


def compile_ahead(
    key: str, build: Build, arg_types: tuple[type, ...], compiled_at: CompiledAt | None = None
) -> None:
    """Compile ``build`` under ``key`` for arguments of ``arg_types`` now, as a later
    ``prepared_*`` call with such arguments would, without running it.

    The orchestrator compiles what an actor runs before it forks the actor (orchestrator/
    work.py): each actor forked afterwards starts with it compiled rather than compiling it
    on its first claim, some 30 ms for an archive result's statements, part of them under
    SQLite's write lock, where every other actor's claim waited for it.
    """
    # Django compiles FOR UPDATE only in a transaction, where the database has it: on
    # PostgreSQL, whose transaction sends nothing until a statement runs. SQLite has none, and
    # its transaction would take the write lock (IMMEDIATE, archive/settings.py).
    in_transaction = connection.features.has_select_for_update
    with transaction.atomic() if in_transaction else contextlib.nullcontext():
        _prepared(key, build, arg_types, compiled_at)


class _Declared:
    """A statement declared once, where it is used: its key, ``build``, the types of its
    arguments and the kinds of actor that run it (``declared_compilations``)."""

    def __init__(
        self, key: str, build: Callable, arg_types: tuple[type, ...], *, actors: tuple[str, ...]
    ):
        self.key = key
        self.build = build
        self.arg_types = arg_types
        self.actors: tuple[str, ...] = actors
        _declared.append(self)

    def compilation(self) -> Callable[[], None]:
        """The step that compiles it ahead (``compile_ahead``)."""
        return partial(compile_ahead, self.key, self.build, self.arg_types)


class Statement(_Declared):
    """A query (``build`` returns a queryset) declared once, where it is used."""

    def records(self, *args) -> list[models.Model]:
        """The records of ``build(*args)`` (``prepared_records``)."""
        return prepared_records(self.key, self.build, *args)

    def count(self, *args) -> int:
        """``build(*args).count()`` (``prepared_count``)."""
        return prepared_count(self.key, self.build, *args)

    def exists(self, *args) -> bool:
        """``build(*args).exists()`` (``prepared_exists``)."""
        return prepared_exists(self.key, self.build, *args)


class UpdateStatement(_Declared):
    """An UPDATE declared once, where it is used: ``build(*args)`` gives the rows (a queryset)
    and the values to set (as ``QuerySet.update()`` takes them)."""

    def __init__(
        self, key: str, build: UpdateBuild, arg_types: tuple[type, ...], *, actors: tuple[str, ...]
    ):
        super().__init__(f"update: {key}", build, arg_types, actors=actors)

    def run(self, *args) -> int:
        """How many rows ``build(*args)``'s update changed (``prepared_update``)."""
        return prepared_update(self.key, self.build, *args)

    def compilation(self) -> Callable[[], None]:
        """The step that compiles it ahead (``compile_ahead``)."""
        return partial(compile_ahead, self.key, self.build, self.arg_types, update_compiled_at)


def declared_compilations(actor_kind: str) -> list[Callable[[], None]]:
    """The steps that compile, one each, every ``Statement`` and ``UpdateStatement`` that actors
    of ``actor_kind`` run (``compile_ahead``)."""
    return [statement.compilation() for statement in _declared if actor_kind in statement.actors]


def _types(args: tuple) -> tuple[type, ...]:
    return tuple(type(arg) for arg in args)


def _prepared(
    key: str, build: Build, arg_types: tuple[type, ...], compiled_at: CompiledAt | None = None
) -> PreparedQuery | None:
    """``build`` compiled for arguments of ``arg_types`` (by ``compiled_at``, a SELECT unless
    told otherwise), once per process and database vendor under ``key``."""
    cache_key = (connection.vendor, key, arg_types, compiled_at)
    if cache_key not in _compiled:
        _compiled[cache_key] = PreparedQuery.compile(build, arg_types, compiled_at)
        if _compiled[cache_key] is None:
            logger.debug("query %r is compiled afresh each time (see PreparedQuery.compile)", key)
    return _compiled[cache_key]


def _markers(arg_types: tuple[type, ...]) -> tuple[tuple, tuple] | None:
    """Two sets of arguments of ``arg_types``, every value distinct from every other; None
    when a type has no markers (only times, integers, strings and UUIDs have)."""
    pairs = []
    for index, arg_type in enumerate(arg_types):
        if issubclass(arg_type, datetime):
            later = timedelta(days=index)
            pairs.append((MARKERS[0] + later, MARKERS[1] + later))
        elif issubclass(arg_type, int) and not issubclass(arg_type, bool):
            pairs.append((-1001 - 2 * index, -1002 - 2 * index))
        elif issubclass(arg_type, str):
            pairs.append((f"\x1evellum-marker-{index}-a", f"\x1dvellum-marker-{index}-b"))
        elif issubclass(arg_type, uuid.UUID):
            pairs.append((uuid.UUID(int=2 * index + 1), uuid.UUID(int=2 * index + 2)))
        else:
            return None
    return tuple(pair[0] for pair in pairs), tuple(pair[1] for pair in pairs)


def _marker_slot(value, other, markers: tuple[tuple, tuple]) -> tuple[int, Adapter] | None:
    """``(argument index, adapter)`` when ``value`` and ``other``, a parameter of the two
    compilations, are that argument's two markers as the database takes them; else None."""
    for index, (first, second) in enumerate(zip(*markers, strict=True)):
        for adapt in _adapters(first):
            if adapt(first) == value and adapt(second) == other:
                return index, adapt
    return None


def _adapters(marker) -> tuple[Adapter, ...]:
    """The ways Django may hand an argument like ``marker`` to the database driver."""
    if isinstance(marker, datetime):
        return (_database_time,)
    if isinstance(marker, uuid.UUID):
        return (_same, _uuid_hex)
    if isinstance(marker, str):
        return (_same, _like_contains)
    return (_same,)


def _same(value):
    return value


def _like_contains(value: str) -> str:
    """A string as a ``__contains`` lookup hands it over: a LIKE pattern with its wildcards
    escaped, between two ``%``."""
    return f"%{connection.ops.prep_for_like_query(value)}%"


def _uuid_hex(value: uuid.UUID) -> str:
    """A UUID as a database without a UUID type stores it (32 hex digits, Django's UUIDField)."""
    return value.hex


def record_by_pk(model: type[models.Model], pk, related: tuple[str, ...] = ()) -> models.Model:
    """Return ``model``'s record of ``pk`` with ``related`` joined in (``with_related``: the
    fields a related model loads on demand left out), from SQL compiled once per process (or
    afresh when that cannot be done). Raises ``model.DoesNotExist``."""
    found = prepared_records(_by_pk_key(model, related), by_pk(model, related), pk)
    if not found:
        raise model.DoesNotExist(f"{model._meta.object_name} {pk} does not exist")
    return found[0]


def compile_by_pk(model: type[models.Model], related: tuple[str, ...] = ()) -> None:
    """Compile ``record_by_pk(model, pk, related)`` ahead (``compile_ahead``), for the type
    of ``model``'s primary key values (that of the field it refers to, for a relation)."""
    compile_ahead(_by_pk_key(model, related), by_pk(model, related), (pk_type(model),))


def pk_type(model: type[models.Model]) -> type:
    """The Python type of ``model``'s primary key values (that of the field it refers to, for
    a relation): the argument type under which a query by key is compiled."""
    pk = model._meta.pk
    field = pk.target_field if pk.is_relation else pk
    return next((kind for base, kind in PK_TYPES if isinstance(field, base)), str)


def _by_pk_key(model: type[models.Model], related: tuple[str, ...]) -> str:
    return f"{model._meta.label} by pk with {related}"


def by_pk(model: type[models.Model], related: tuple[str, ...]) -> Build:
    """The query ``record_by_pk`` compiles: ``model``'s record of a key, with ``related``."""
    return lambda key: with_related(model.objects.all(), related).filter(pk=key)


def with_related(queryset: models.QuerySet, related: tuple[str, ...]) -> models.QuerySet:
    """``queryset.select_related(*related)``, leaving out the fields that a related model loads
    only on demand (its ``LOADED_ON_DEMAND``, such as a crawl's seed list and what its input
    said of each seed: their size grows with the crawl, and every claim of its snapshots and
    results joins the crawl in). Django reads such a field when it is first used."""
    deferred = _on_demand(queryset.model, related)
    queryset = queryset.select_related(*related)
    return queryset.defer(*deferred) if deferred else queryset


@cache  # on every claim of a companion: the model's fields are walked once per process
def _on_demand(model: type[models.Model], related: tuple[str, ...]) -> tuple[str, ...]:
    """The fields ``with_related`` leaves out, as ``defer()`` names them."""
    return tuple(
        f"{path}__{name}"
        for path in _paths(related)
        for name in getattr(_model_at(model, path), "LOADED_ON_DEMAND", ())
    )


def _paths(related: tuple[str, ...]) -> dict[str, None]:
    """Every relation ``related`` joins in, in order: "snapshot__crawl" joins "snapshot" too."""
    parts = (path.split("__") for path in related)
    return {"__".join(names[:end]): None for names in parts for end in range(1, len(names) + 1)}


def _model_at(model: type[models.Model], path: str) -> type[models.Model]:
    """The model that the relation ``path`` (e.g. "snapshot__crawl") leads to from ``model``."""
    for name in path.split("__"):
        model = model._meta.get_field(name).related_model
    return model


def _compiled_at(build: Build, args: tuple):
    """The compiler of ``build(*args)`` and the SQL with parameters it made."""
    queryset = build(*args)
    compiler = queryset.query.get_compiler(using=queryset.db)
    return compiler, compiler.as_sql()


def update_compiled_at(build: UpdateBuild, args: tuple) -> tuple[object, tuple[str, tuple]]:
    """The compiler of the UPDATE ``build(*args)`` gives, and the SQL with parameters it made,
    as ``QuerySet.update()`` makes them. Raises ValueError (the update is then left to Django)
    for rows of a child model, whose update changes its parents' tables too (more than one
    statement), for ordered, sliced or combined rows, and for rows of a database other than
    the default one, which the compiled statement runs on."""
    rows, values = build(*args)
    if rows.query.is_sliced or rows.query.combinator or rows.db != DEFAULT_DB_ALIAS:
        # QuerySet.update() refuses the first two; the third would run on another database.
        raise ValueError("a sliced or combined queryset, or another database's, is not compiled")
    query = rows.query.chain(sql.UpdateQuery)
    query.add_update_values(values)
    if query.related_updates or query.order_by:
        raise ValueError("an update of several tables, or of ordered rows, is not compiled once")
    query.annotations = {}
    compiler = query.get_compiler(using=rows.db)
    return compiler, compiler.as_sql()


def _database_time(value: datetime):
    """``value`` as the database driver is handed it (on SQLite, text in UTC)."""
    return connection.ops.adapt_datetimefield_value(value)


@receiver(setting_changed)
def _forget_compiled(**_kwargs) -> None:
    _compiled.clear()
