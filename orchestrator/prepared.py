"""Querysets compiled to SQL once per process, with the current time as their only parameter.

Django builds and compiles a queryset into SQL every time it is evaluated. For the claim of
an archive result (orchestrator/claims.py) that is some 5 ms of Python (the due filter, the
queue's hold and the three host subqueries of ``held_back_hosts``) for a statement SQLite then
runs in well under a millisecond; actors claim hundreds of times a minute, and this was a
fifth of a crawl's Python time (py-spy, bench/throughput.py, issue 19).

``TimedQuery`` compiles a queryset once for each of two marker times and keeps the SQL with
the positions of the parameters that were those markers; a later run puts ``now`` there. It
is used only when that is provably all that varies (the two compilations differ in exactly
those parameters, and nowhere else): a query that derives other values from the time, say
``now - 1 hour``, is simply compiled afresh every time. Compiled SQL depends on settings (a
per-host limit of 0 drops a subquery), so every cached query is forgotten when a setting
changes (Django's ``setting_changed`` signal, sent by ``override_settings`` in tests).

``record_by_pk`` does the same for the load of a record just claimed,
``select_related(...).get(pk=...)``, which every claim makes: compiling it (80 columns for an
archive result with its snapshot and crawl) took most of a load's 0.75 ms, for a statement
SQLite runs in 0.1 ms; compiled once, a load takes 0.27 ms. Its rows are made into
instances as Django's own ``ModelIterable`` makes them, from the compiler's ``select`` and
``klass_info``: internals of Django (pinned in requirements.txt), checked by the tests against
what ``get()`` loads.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

from django.core.signals import setting_changed
from django.db import connection, models
from django.db.models.query import get_related_populators
from django.dispatch import receiver

# Two times no real record carries, compiled in turn to find where ``now`` goes.
MARKERS = (
    datetime(2001, 2, 3, 4, 5, 6, 123457, tzinfo=UTC),
    datetime(2002, 3, 4, 5, 6, 7, 234568, tzinfo=UTC),
)

Build = Callable[[datetime], models.QuerySet]

# (database vendor, what is compiled) -> the compiled query, or None where it cannot be.
_compiled: dict[tuple, TimedQuery | PkLoad | None] = {}


class TimedQuery:
    """The SQL of ``build(now)`` with the slots where ``now`` goes (see the module's docstring)."""

    def __init__(self, model: type[models.Model], sql: str, params: list, slots: list[int]):
        self.model = model
        self.sql = sql
        self.params = params
        self.slots = slots

    @classmethod
    def compile(cls, build: Build) -> TimedQuery | None:
        """Compile ``build`` (a function of the time returning a queryset) at both markers;
        return the query, or None when more than ``now`` varies between the two."""
        (sql, params), (other_sql, other_params) = (
            build(marker).query.sql_with_params() for marker in MARKERS
        )
        if sql != other_sql or len(params) != len(other_params):
            return None
        first, second = (_database_time(marker) for marker in MARKERS)
        slots = [i for i, (a, b) in enumerate(zip(params, other_params, strict=True)) if a != b]
        if any(params[i] != first or other_params[i] != second for i in slots):
            return None
        return cls(build(MARKERS[0]).model, sql, list(params), slots)

    def records(self, now: datetime) -> list[models.Model]:
        """Run the query at ``now``; return its rows as instances of its model, with the
        fields it selected loaded (as ``only()`` would) and the others deferred."""
        return list(self.model.objects.raw(self.sql, self._params(now)))

    def count(self, now: datetime) -> int:
        """How many rows the query has at ``now`` (as ``QuerySet.count()``)."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM ({self.sql}) counted", self._params(now))
            return cursor.fetchone()[0]

    def _params(self, now: datetime) -> list:
        params = list(self.params)
        value = _database_time(now)
        for slot in self.slots:
            params[slot] = value
        return params


def timed_records(key: str, build: Build, now: datetime) -> list[models.Model]:
    """Return the records of ``build(now)``, from SQL compiled once per process under ``key``
    (a name for what ``build`` selects), or compiled afresh when that cannot be done."""
    query = _compiled_once(key, partial(TimedQuery.compile, build))
    return list(build(now)) if query is None else query.records(now)


def timed_count(key: str, build: Build, now: datetime) -> int:
    """Return ``build(now).count()``, from SQL compiled once per process under ``key``."""
    query = _compiled_once(key, partial(TimedQuery.compile, build))
    return build(now).count() if query is None else query.count(now)


def _compiled_once(key, make: Callable[[], TimedQuery | PkLoad | None]):
    """What ``make()`` compiles, made once per process and database vendor under ``key``."""
    cache_key = (connection.vendor, key)
    if cache_key not in _compiled:
        _compiled[cache_key] = make()
    return _compiled[cache_key]


class PkLoad:
    """``model.objects.select_related(*related).get(pk=...)`` compiled once (see the module's
    docstring): the SQL, whose one parameter is the pk, and what turns a row into the record
    with its related records."""

    def __init__(self, compiler, sql: str):
        self.compiler = compiler
        self.sql = sql
        klass_info, select = compiler.klass_info, compiler.select
        self.model = klass_info["model"]
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [column[0].target.attname for column in select[self.start : self.end]]
        self.populators = get_related_populators(klass_info, select, compiler.using)

    @classmethod
    def compile(cls, model: type[models.Model], related: tuple[str, ...]) -> PkLoad | None:
        """Compile the load for a marker key; None when the statement has any parameter but
        that key, or ``model``'s key is neither an integer nor a UUID."""
        marker = _pk_marker(model._meta.pk)
        if marker is None:
            return None
        queryset = model.objects.select_related(*related).filter(pk=marker)
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        if list(params) != [model._meta.pk.get_db_prep_value(marker, connection)]:
            return None
        return cls(compiler, sql)

    def record(self, pk) -> models.Model:
        """Load the record ``pk`` with its related records. Raises ``model.DoesNotExist``."""
        with connection.cursor() as cursor:
            cursor.execute(self.sql, [self.model._meta.pk.get_db_prep_value(pk, connection)])
            rows = cursor.fetchall()
        for row in self.compiler.results_iter([rows]):
            record = self.model.from_db(
                self.compiler.using, self.init_list, row[self.start : self.end]
            )
            for populator in self.populators:
                populator.populate(row, record)
            return record
        raise self.model.DoesNotExist(f"{self.model._meta.object_name} {pk} does not exist")


def record_by_pk(model: type[models.Model], pk, related: tuple[str, ...] = ()) -> models.Model:
    """Return ``model.objects.select_related(*related).get(pk=pk)``, from SQL compiled once per
    process (or afresh when that cannot be done). Raises ``model.DoesNotExist``."""
    load = _compiled_once((model, related), partial(PkLoad.compile, model, related))
    if load is None:
        return model.objects.select_related(*related).get(pk=pk)
    return load.record(pk)


def _pk_marker(field: models.Field):
    """A key no real record has, of ``field``'s type; None for a type not foreseen."""
    if isinstance(field, models.UUIDField):
        return uuid.UUID(int=1)
    if isinstance(field, models.IntegerField):  # AutoField, BigAutoField
        return -1
    return None


def _database_time(value: datetime):
    """``value`` as the database driver is handed it (on SQLite, text in UTC)."""
    return connection.ops.adapt_datetimefield_value(value)


@receiver(setting_changed)
def _forget_compiled(**_kwargs) -> None:
    _compiled.clear()
