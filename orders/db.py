"""Running ORM calls from the executor's event loop.

Channels' `database_sync_to_async` runs every call on one shared thread, which makes
the trade path of all accounts one queue. On PostgreSQL the orders hot path runs in
the default thread pool instead (each thread with its own connection, closed when
stale around every call), so entries of different accounts overlap; SQLite keeps the
single thread, since it has one writer anyway.
"""
from __future__ import annotations

from typing import Any, Callable

from channels.db import DatabaseSyncToAsync, database_sync_to_async
from django.db import connection


def in_db_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Return an awaitable version of the ORM function `fn`."""
    if connection.vendor == "postgresql":
        return DatabaseSyncToAsync(fn, thread_sensitive=False)
    return database_sync_to_async(fn)
