"""Running ORM calls from the executor's event loop.

Channels' `database_sync_to_async` runs every call on one shared thread, which makes
the trade path of all accounts one queue. On PostgreSQL the orders hot path runs in
the event loop's default thread pool instead (each thread with its own connection),
so entries of different accounts overlap; SQLite keeps the single thread, since it has
one writer anyway. The pool's size is the loop's (the runtime that owns the loop sets
it); its threads and their connections end with the loop.

Around every call a connection is closed when it saw an error, is in a wrong
autocommit state or outlived CONN_MAX_AGE, as Django does between requests. Django
also health-checks a connection (a `SELECT 1` round trip) on its first use after each
such cleanup, which on this path would be one extra round trip per call; here a
connection is health-checked only when it has been idle for HEALTH_CHECK_IDLE_S. A
connection that broke while in use raises in the statement that found it, marks
itself with an error and is checked (and closed) before the next call.

Each call also carries the event loop it came from, so work that must happen on the
loop after commit (dashboard pushes, `orders.events.after_commit_on_loop`) is handed
back to it instead of holding the database thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from asgiref.sync import SyncToAsync
from channels.db import database_sync_to_async
from django.db import connection, connections

# A connection unused for longer than this is health-checked before its next call.
HEALTH_CHECK_IDLE_S = 5.0

# The event loop a database call was made from (None outside one).
CALLER_LOOP: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar("orders_caller_loop", default=None)

_last_used = threading.local()


def _before_call() -> None:
    idle = time.monotonic() - getattr(_last_used, "at", 0.0) > HEALTH_CHECK_IDLE_S
    _cleanup(keep_health_check=not idle)


def _after_call() -> None:
    _last_used.at = time.monotonic()
    _cleanup(keep_health_check=True)


def _cleanup(*, keep_health_check: bool) -> None:
    """Django's cleanup between requests (close on errors, wrong autocommit, max age), minus the SELECT 1 it implies."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        checked = conn.health_check_done  # type: ignore[attr-defined]  # Django's, missing from the stubs
        conn.close_if_unusable_or_obsolete()
        if keep_health_check and checked and conn.connection is not None and not conn.errors_occurred:
            conn.health_check_done = True  # type: ignore[attr-defined]  # used successfully a moment ago: no SELECT 1


class _OrdersDbCall(SyncToAsync[..., Any]):
    """SyncToAsync on the loop's thread pool, with the connection hygiene described above."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        # SyncToAsync's own constructor (its checks of `fn`, functools.update_wrapper)
        # costs more CPU than the hand-off itself, once per database call of the trade
        # path; these are the attributes its __call__ reads.
        self.func = fn
        self.context = None
        self._thread_sensitive = False
        self._executor = None

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        token = CALLER_LOOP.set(asyncio.get_running_loop())
        try:
            return await super().__call__(*args, **kwargs)
        finally:
            CALLER_LOOP.reset(token)

    def thread_handler(self, loop, *args, **kwargs):  # type: ignore[no-untyped-def]
        _before_call()
        try:
            return super().thread_handler(loop, *args, **kwargs)  # type: ignore[no-untyped-call]
        finally:
            _after_call()


def in_db_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Return an awaitable version of the ORM function `fn`."""
    if connection.vendor == "postgresql":
        return _OrdersDbCall(fn)
    return _CarryLoop(database_sync_to_async(fn))


class _CarryLoop:
    """Channels' single database thread, with the caller's loop carried along."""

    def __init__(self, call: Callable[..., Any]) -> None:
        self._call = call

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        token = CALLER_LOOP.set(asyncio.get_running_loop())
        try:
            return await self._call(*args, **kwargs)
        finally:
            CALLER_LOOP.reset(token)
