"""Row leases with TTL and owner tokens: one holder at a time, taken over once expired.

`lock_acquire` is one conditional upsert (create the row the first time a scope is
used, else take it if it is free, expired or already ours). On its own it runs in
autocommit, so a lease is visible to other processes at once; the executor takes it
inside its reserve transaction instead, so the lease commits with the reservation.
A lease that outlives its holder (a killed process) frees itself at `expires_at`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from orders.metrics import LOCK_ACQUIRE_SECONDS, LOCK_CONTENTION
from orders.models import EntryLock
from orders.round_trips import execute_later
from orders.rows import any_of, insert_rows_statement

DEFAULT_TTL_S = 30.0
RECONCILE_SCOPE = "reconcile"


def entry_scope(instrument_id: int) -> str:
    return f"entry:{instrument_id}"


def new_owner_token() -> str:
    return secrets.token_hex(12)


def lock_acquire(
    *,
    account_id: int,
    scope: str,
    owner: str,
    ttl_s: float = DEFAULT_TTL_S,
    now: Callable[[], datetime] = timezone.now,
) -> bool:
    """Take the lease for `owner`; return False (and count contention) if someone else holds it."""
    started = time.monotonic()
    current = now()
    taken = _take(account_id, scope, owner, current, current + timedelta(seconds=ttl_s))
    LOCK_ACQUIRE_SECONDS.observe(time.monotonic() - started)
    if not taken:
        LOCK_CONTENTION.labels(scope.split(":", 1)[0]).inc()
    return taken


def _take(account_id: int, scope: str, owner: str, current: datetime, expires: datetime) -> bool:
    """One statement: create the scope's row, or take it if free, expired or already held by `owner`.

    The row is updated only when that condition holds, and RETURNING names it only
    then; a concurrent taker of the same row waits for this one's commit and then
    re-evaluates the condition against the committed row.
    """
    ops = connection.ops
    table = ops.quote_name(EntryLock._meta.db_table)
    at, until = ops.adapt_datetimefield_value(current), ops.adapt_datetimefield_value(expires)
    sql = (
        f"INSERT INTO {table} (account_id, scope, owner, expires_at, acquired_at) VALUES (%s, %s, %s, %s, %s) "
        f"ON CONFLICT (account_id, scope) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, "
        f"acquired_at = excluded.acquired_at "
        f"WHERE {table}.expires_at < excluded.acquired_at OR {table}.owner = excluded.owner OR {table}.owner = '' "
        f"RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [account_id, scope, owner, until, at])
        return cursor.fetchone() is not None


def lock_release(*, account_id: int, scope: str, owner: str) -> bool:
    """Give the lease back if `owner` still holds it; return whether it did."""
    ops = connection.ops
    released = timezone.now()
    sql = (
        f"UPDATE {ops.quote_name(EntryLock._meta.db_table)} SET owner = '', expires_at = %s "
        f"WHERE account_id = %s AND scope = %s AND owner = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [ops.adapt_datetimefield_value(released), account_id, scope, owner])
        return cursor.rowcount > 0


def locks_acquire_many(
    *, leases: Sequence[tuple[int, str, str]], ttl_s: float = DEFAULT_TTL_S, now: Callable[[], datetime] = timezone.now
) -> set[str]:
    """Take several (account, scope, owner) leases in one statement; return the owners that got theirs.

    The same condition as `lock_acquire`, row by row. Rows are written in account
    order, the order every multi-account writer takes them in, so two such statements
    never wait for each other in a cycle.
    """
    started = time.monotonic()
    statement = locks_acquire_many_statement(leases=leases, ttl_s=ttl_s, now=now)
    if statement is None:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        rows = cursor.fetchall()
    return locks_taken(leases=leases, rows=rows, started=started)


def locks_acquire_many_statement(
    *, leases: Sequence[tuple[int, str, str]], ttl_s: float = DEFAULT_TTL_S, now: Callable[[], datetime] = timezone.now
) -> tuple[str, list[Any]] | None:
    """The statement of `locks_acquire_many`, to send with others; its rows go to `locks_taken`. None for no lease."""
    if not leases:
        return None
    table = connection.ops.quote_name(EntryLock._meta.db_table)
    current = now()
    until = current + timedelta(seconds=ttl_s)
    return insert_rows_statement(
        EntryLock,
        ("account_id", "scope", "owner", "expires_at", "acquired_at"),
        [(account_id, scope, owner, until, current) for account_id, scope, owner in sorted(leases)],
        suffix=(
            f"ON CONFLICT (account_id, scope) DO UPDATE SET owner = excluded.owner, "
            f"expires_at = excluded.expires_at, acquired_at = excluded.acquired_at "
            f"WHERE {table}.expires_at < excluded.acquired_at OR {table}.owner = excluded.owner "
            f"OR {table}.owner = ''"
        ),
        returning=("owner",),
    )


def locks_taken(
    *, leases: Sequence[tuple[int, str, str]], rows: Sequence[tuple[Any, ...]], started: float | None = None
) -> set[str]:
    """The owners whose lease the rows of `locks_acquire_many_statement` name; the others count as contention."""
    taken = {row[0] for row in rows}
    if started is not None:
        LOCK_ACQUIRE_SECONDS.observe(time.monotonic() - started)
    for _, scope, owner in leases:
        if owner not in taken:
            LOCK_CONTENTION.labels(scope.split(":", 1)[0]).inc()
    return taken


def locks_release_many(*, leases: Sequence[tuple[int, str, str]], later: bool = False) -> int:
    """Give several (account, scope, owner) leases back, each only if its owner still holds it; return how many.

    `later`: the statement travels with the transaction's next round trip
    (orders.round_trips) and the count is not known (0 is returned).
    """
    if not leases:
        return 0
    ops = connection.ops
    accounts, account_params = any_of("account_id", sorted({account_id for account_id, _, _ in leases}))
    owners, owner_params = any_of("owner", [owner for _, _, owner in leases])
    # Owner tokens are unique per lease, so the owner alone names the row; the account
    # narrows the search to the unique (account, scope) index.
    sql = f"UPDATE {ops.quote_name(EntryLock._meta.db_table)} SET owner = '', expires_at = %s WHERE {accounts} AND {owners}"
    params = [ops.adapt_datetimefield_value(timezone.now()), *account_params, *owner_params]
    if later:
        execute_later(sql, params)
        return 0
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
