"""Whether this process can serve: the database check behind /readyz and the health reports."""

from __future__ import annotations

from django.db import connection


def database_reachable() -> tuple[bool, str]:
    """Return (reachable, reason) for the default database, from one trivial query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True, "reachable"
    except Exception as exc:  # any driver error means "not reachable"
        return False, f"unreachable: {exc.__class__.__name__}"
