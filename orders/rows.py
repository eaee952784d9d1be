"""Multi-row statements for the trade path: one round trip for the rows of many accounts.

The ORM's `create()` builds and compiles one INSERT per row, which on the entry path
costs more CPU than the database spends on the statement. These helpers write many
rows of one model in one statement that works on PostgreSQL and SQLite (both support
multi-row VALUES, ON CONFLICT and RETURNING), and still run each value through its
field's own database preparation where that matters (fixed-point range checks,
datetimes, JSON), so a value the ORM would refuse is refused here too.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

from django.db import connection
from django.db.models import DateTimeField, JSONField, Model

from tradingsite.fixed_point_field import FixedPointField

_PREPARED = (FixedPointField, DateTimeField, JSONField)


@lru_cache(maxsize=None)
def _column_plan(model: type[Model], columns: tuple[str, ...], vendor: str) -> tuple[str, tuple[Callable[[Any], Any] | None, ...]]:
    """(quoted column list, a preparation per column or None for values passed as they are)."""
    ops = connection.ops
    names = []
    preps: list[Callable[[Any], Any] | None] = []
    for name in columns:
        field = model._meta.get_field(name)
        names.append(ops.quote_name(field.column))
        if isinstance(field, _PREPARED):
            preps.append(lambda value, field=field: field.get_db_prep_save(value, connection))
        else:
            preps.append(None)
    return ", ".join(names), tuple(preps)


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


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

    `suffix` is placed after VALUES (an ON CONFLICT clause). RETURNING rows come back
    as the database gives them; match them by a returned key, never by position.
    """
    column_sql, preps = _column_plan(model, tuple(columns), connection.vendor)
    params: list[Any] = []
    count = 0
    for row in rows:
        count += 1
        params.extend(value if prep is None else prep(value) for prep, value in zip(preps, row))
    if not count:
        return []
    one = f"({placeholders(len(columns))})"
    sql = f"INSERT INTO {table(model)} ({column_sql}) VALUES {', '.join([one] * count)} {suffix}"
    if returning:
        sql += " RETURNING " + ", ".join(connection.ops.quote_name(name) for name in returning)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if returning else []


def for_update() -> str:
    """The row-lock clause of a SELECT: FOR UPDATE on PostgreSQL; SQLite serializes writers instead."""
    return " FOR UPDATE" if connection.features.has_select_for_update else ""
