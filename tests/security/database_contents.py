"""Every row of the database, read in one query: the bad-input walks' "nothing changed" proof.

Each table comes back as its row count and its rows as the database renders them, joined
in primary-key order (PostgreSQL's row text, SQLite's quote() of each column), so two
readings compare row by row and column by column. One UNION ALL statement is a few
milliseconds where a queryset per model, each value converted and repr'd in Python,
took a quarter of a second on every case of the walks.
"""

from __future__ import annotations

from django.apps import apps
from django.db import connection
from django.db.models import Model

# Sessions change on login; login throttling (axes) counts attempts by design.
UNWATCHED_MODELS = {"sessions.Session"}
UNWATCHED_APPS = frozenset({"axes"})
# A login stamps last_login; that is the login, not the input under test.
UNWATCHED_COLUMNS = frozenset({"last_login"})

Contents = dict[str, tuple[int, str]]


def _watched_models(unwatched_apps: frozenset[str]) -> list[type[Model]]:
    # Auto-created many-to-many tables too: a group or permission set is data a form writes.
    return [
        model
        for model in apps.get_models(include_auto_created=True)
        if not model._meta.proxy
        and model._meta.managed
        and model._meta.label not in UNWATCHED_MODELS
        and model._meta.app_label not in unwatched_apps
    ]


def _table_select(model: type[Model], unwatched_columns: frozenset[str]) -> str:
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    pk = quote(model._meta.pk.column)  # type: ignore[union-attr]
    columns = [quote(f.column) for f in model._meta.concrete_fields if f.column not in unwatched_columns]
    label = model._meta.label.replace("'", "''")
    if connection.vendor == "postgresql":
        row = f"ROW({', '.join(columns)})::text"
        return f"SELECT '{label}'::text, COUNT(*), string_agg({row}, E'\\n' ORDER BY {pk}) FROM {table}"
    row = " || ',' || ".join(f"quote({column})" for column in columns)
    return f"SELECT '{label}', COUNT(*), group_concat(r, char(10)) FROM (SELECT {row} AS r FROM {table} ORDER BY {pk})"


_STATEMENT: dict[tuple[str, frozenset[str], frozenset[str]], str] = {}


def database_contents(
    *, unwatched_apps: frozenset[str] = UNWATCHED_APPS, unwatched_columns: frozenset[str] = UNWATCHED_COLUMNS
) -> Contents:
    """Every watched table's row count and rows, read in one statement."""
    key = (connection.vendor, unwatched_apps, unwatched_columns)
    statement = _STATEMENT.get(key)
    if statement is None:
        selects = (_table_select(model, unwatched_columns) for model in _watched_models(unwatched_apps))
        statement = _STATEMENT[key] = " UNION ALL ".join(selects)
    with connection.cursor() as cursor:
        cursor.execute(statement)
        return {label: (count, rows or "") for label, count, rows in cursor.fetchall()}


def changed_tables(before: Contents, after: Contents) -> list[str]:
    """The labels whose rows differ between two readings, for the failure message."""
    return sorted(label for label in before.keys() | after.keys() if before.get(label) != after.get(label))
