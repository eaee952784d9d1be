"""A migration step that moves stored fixed-point values from one scale to another.

Raising core.fixed_point.SCALE_DIGITS multiplies every stored value by 10**(new - old), in
SQL and in one UPDATE per table (so a CHECK constraint relating two columns of a row,
such as filled_quantity <= quantity, holds at every moment). The step first counts the
rows whose rescaled value the column could not hold (SQLite: a signed 64-bit integer;
SQLite would otherwise turn an overflowing product into a float) and refuses with the
table, column and row count rather than store a rounded number. Reversing divides, and
refuses when a value has digits the old scale cannot hold.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

from core.fixed_point_field import max_abs_for


class RescaleRefused(RuntimeError):
    """Stored values that the rescaled column would not hold exactly."""


def _columns(apps: Any, app_label: str, model_name: str, fields: list[str]) -> tuple[str, list[str]]:
    model = apps.get_model(app_label, model_name)
    return model._meta.db_table, [model._meta.get_field(name).column for name in fields]


def _refuse_rows(cursor: Any, quote: Any, table: str, where: str, params: list[Any], what: str) -> None:
    cursor.execute(f"SELECT COUNT(*) FROM {quote(table)} WHERE {where}", params)
    (count,) = cursor.fetchone()
    if count:
        raise RescaleRefused(f"{table}: {count} row(s) {what}; nothing was rescaled")


def rescale(app_label: str, tables: dict[str, list[str]], *, factor: int) -> migrations.RunPython:
    """Return a RunPython that multiplies `tables` ({model name: [field, ...]}) by `factor`."""

    def forward(apps: Any, schema_editor: Any) -> None:
        connection = schema_editor.connection
        quote = connection.ops.quote_name
        bound = max_abs_for(connection) // factor
        with connection.cursor() as cursor:
            resolved = [_columns(apps, app_label, model, fields) for model, fields in tables.items()]
            for table, columns in resolved:
                where = " OR ".join(f"{quote(c)} > %s OR {quote(c)} < %s" for c in columns)
                _refuse_rows(
                    cursor,
                    quote,
                    table,
                    where,
                    [bound, -bound] * len(columns),
                    f"would leave the column's range once multiplied by {factor}",
                )
            for table, columns in resolved:
                assignments = ", ".join(f"{quote(c)} = {quote(c)} * %s" for c in columns)
                cursor.execute(f"UPDATE {quote(table)} SET {assignments}", [factor] * len(columns))

    def backward(apps: Any, schema_editor: Any) -> None:
        connection = schema_editor.connection
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            resolved = [_columns(apps, app_label, model, fields) for model, fields in tables.items()]
            for table, columns in resolved:
                where = " OR ".join(f"{quote(c)} %% %s <> 0" for c in columns)
                _refuse_rows(
                    cursor,
                    quote,
                    table,
                    where,
                    [factor] * len(columns),
                    f"hold digits the old scale cannot (not multiples of {factor})",
                )
            for table, columns in resolved:
                # Exact: every value is a multiple of factor (checked above).
                assignments = ", ".join(f"{quote(c)} = {quote(c)} / %s" for c in columns)
                cursor.execute(f"UPDATE {quote(table)} SET {assignments}", [factor] * len(columns))

    return migrations.RunPython(forward, backward, elidable=False)
