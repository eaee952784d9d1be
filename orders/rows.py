"""Multi-row statements for the trade path: one round trip for the rows of many accounts.

The ORM's `create()` builds and compiles one INSERT per row, which on the entry path
costs more CPU than the database spends on the statement. These helpers write many
rows of one model in one statement that works on PostgreSQL and SQLite (both support
multi-row VALUES, ON CONFLICT and RETURNING), and still run each value through its
field's own database preparation where that matters (fixed-point range checks,
datetimes, JSON), so a value the ORM would refuse is refused here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import DateTimeField, Field, JSONField, Model

from core.fixed_point_field import FixedPointField, max_abs_for
from orders.round_trips import execute_later


def _fixed_point(field: FixedPointField, vendor: str) -> Callable[[Any], Any]:
    limit = max_abs_for(connection)

    def prepare(value: Any) -> Any:
        # The common case (an int in range) without the field's generic preparation chain.
        if type(value) is int and -limit <= value <= limit:
            return value
        return field.get_db_prep_save(value, connection)

    return prepare


def _datetime(value: Any) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


def _generic(field: Any) -> Callable[[Any], Any]:
    return lambda value: field.get_db_prep_save(value, connection)


@dataclass(frozen=True)
class _Plan:
    columns: str  # quoted column list
    preps: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column index, preparation); the others pass as they are
    from_json: str  # PostgreSQL: SELECT the columns out of one JSON array of rows


@cache
def _column_plan(model: type[Model], columns: tuple[str, ...], vendor: str) -> _Plan:
    ops = connection.ops
    postgres = vendor == "postgresql"
    names = []
    preps: list[Callable[[Any], Any] | None] = []
    selected = []
    for index, name in enumerate(columns):
        field = model._meta.get_field(name)
        assert isinstance(field, Field), f"{model.__name__}.{name} is a relation, not a column"
        column, db_type = field.column, field.db_type(connection)
        assert column is not None and db_type is not None, f"{model.__name__}.{name} has no database column"
        names.append(ops.quote_name(column))
        if isinstance(field, JSONField):
            # Nested in the rows' JSON as it is (PostgreSQL), or through the field (SQLite).
            preps.append(None if postgres else _generic(field))
            selected.append(f"CAST(e->{index} AS jsonb)")
            continue
        if isinstance(field, FixedPointField):
            preps.append(_fixed_point(field, vendor))
        elif isinstance(field, DateTimeField):
            preps.append(_isoformat if postgres else _datetime)
        else:
            preps.append(None)
        selected.append(f"CAST(e->>{index} AS {_cast_type(db_type)})")
    from_json = f"SELECT {', '.join(selected)} FROM json_array_elements(CAST(%s AS json)) AS e"
    prepared = tuple((index, prep) for index, prep in enumerate(preps) if prep is not None)
    return _Plan(", ".join(names), prepared, from_json)


def _cast_type(db_type: str) -> str:
    # An explicit cast to varchar(n) truncates; text keeps the value, so that the
    # column's own length check refuses one that is too long, as an insert of it would.
    return "text" if db_type.startswith("varchar") else db_type


def _isoformat(value: Any) -> Any:
    return None if value is None else value.isoformat()


@cache
def _table(model: type[Model], vendor: str) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def table(model: type[Model]) -> str:
    """The model's table name, quoted for this database."""
    return _table(model, connection.vendor)


def placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


def insert_rows(
    model: type[Model],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    suffix: str = "",
    returning: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """INSERT every row of `rows` (values in `columns` order) in one statement; return the RETURNING rows.

    `suffix` is placed after the rows (an ON CONFLICT clause). RETURNING rows come back
    as the database gives them; match them by a returned key, never by position.
    """
    statement = insert_rows_statement(model, columns, rows, suffix=suffix, returning=returning)
    if statement is None:
        return []
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        return list(cursor.fetchall()) if returning else []


def insert_rows_later(
    model: type[Model], columns: Sequence[str], rows: Iterable[Sequence[Any]], *, suffix: str = ""
) -> None:
    """`insert_rows` for rows nobody reads back: sent with the next round trip (orders.round_trips)."""
    statement = insert_rows_statement(model, columns, rows, suffix=suffix)
    if statement is not None:
        execute_later(*statement)


def insert_rows_statement(
    model: type[Model],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    suffix: str = "",
    returning: Sequence[str] = (),
) -> tuple[str, list[Any]] | None:
    """The (SQL, parameters) of `insert_rows`; None when there is no row."""
    plan = _column_plan(model, tuple(columns), connection.vendor)
    # Only the columns that need it go through a preparation: a call per value of every
    # row costs more than the rest of the statement's building on the fan-out path.
    prepared: list[Sequence[Any]] = []
    for row in rows:
        values = list(row)
        for index, prep in plan.preps:
            values[index] = prep(values[index])
        prepared.append(values)
    if not prepared:
        return None
    head = f"INSERT INTO {_table(model, connection.vendor)} ({plan.columns}) "
    if connection.vendor == "postgresql":
        # The rows as one JSON parameter: a short statement whatever the row count, which
        # psycopg parses once and caches, and one string to quote (a VALUES list of
        # hundreds of placeholders is re-parsed and each value quoted on every execution,
        # which costs more CPU than the database spends on the rows). Integers and
        # timestamps travel as JSON numbers and ISO text and are cast exactly.
        sql = head + plan.from_json
        params: list[Any] = [json.dumps(prepared, separators=(",", ":"))]
    else:
        one = f"({placeholders(len(columns))})"
        sql = head + f"VALUES {', '.join([one] * len(prepared))}"
        params = [value for row in prepared for value in row]
    sql += f" {suffix}" if suffix else ""
    if returning:
        sql += " RETURNING " + ", ".join(connection.ops.quote_name(name) for name in returning)
    return sql, params


def any_of(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """`column` is one of `values`: (SQL, parameters). One array parameter on PostgreSQL (a short, cached statement)."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(values)]
    return f"{column} IN ({placeholders(len(values))})", list(values)


def for_update() -> str:
    """The row-lock clause of a SELECT: FOR UPDATE on PostgreSQL; SQLite serializes writers instead."""
    return " FOR UPDATE" if connection.features.has_select_for_update else ""
