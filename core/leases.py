"""Named leases with TTL and owner tokens: one holder site-wide, taken over once expired.

A lease names one thing that must run in exactly one process (a feed, the beat
scheduler). `take_lease` is one conditional upsert: create the row the first time
the name is used, else take it if it is free, expired or already ours; renewing is
taking again with the same owner. It runs in autocommit, so the lease is visible to
every other process at once. A holder that dies frees the lease at `expires_at`;
a holder that cannot renew in time must stop, because a standby may take over.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from core.lease_model import Lease


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a lease and until when."""

    owner: str
    holder: str
    expires_at: datetime
    acquired_at: datetime

    def live(self, at: datetime) -> bool:
        return bool(self.owner) and self.expires_at >= at


def new_lease_owner() -> str:
    """A token unique to one holding (a restarted process takes a new one)."""
    return secrets.token_hex(12)


def describe_this_process(role: str) -> str:
    """The holder text an operator reads: role, host and pid."""
    return f"{role} on {socket.gethostname()} pid {os.getpid()}"


def take_lease(
    name: str,
    *,
    owner: str,
    ttl_s: float,
    holder: str = "",
    now: Callable[[], datetime] = timezone.now,
) -> bool:
    """Take or renew the lease on `name` for `owner`; False if another live owner holds it.

    One statement: the row is updated only when it is free, expired or already
    `owner`'s, and RETURNING names it only then. A concurrent taker waits for this
    statement's commit and re-evaluates the condition against the committed row.
    """
    current = now()
    expires = current + timedelta(seconds=ttl_s)
    ops = connection.ops
    table = ops.quote_name(Lease._meta.db_table)
    at, until = ops.adapt_datetimefield_value(current), ops.adapt_datetimefield_value(expires)
    sql = (
        f"INSERT INTO {table} (name, owner, holder, expires_at, acquired_at) VALUES (%s, %s, %s, %s, %s) "
        f"ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, holder = excluded.holder, "
        f"expires_at = excluded.expires_at, "
        f"acquired_at = CASE WHEN {table}.owner = excluded.owner THEN {table}.acquired_at "
        f"ELSE excluded.acquired_at END "
        f"WHERE {table}.expires_at < excluded.acquired_at OR {table}.owner = excluded.owner OR {table}.owner = '' "
        f"RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [name, owner, holder, until, at])
        return cursor.fetchone() is not None


def release_lease(name: str, *, owner: str, now: Callable[[], datetime] = timezone.now) -> bool:
    """Give the lease back if `owner` still holds it, so a standby takes over at once."""
    ops = connection.ops
    sql = (
        f"UPDATE {ops.quote_name(Lease._meta.db_table)} SET owner = '', holder = '', expires_at = %s "
        f"WHERE name = %s AND owner = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [ops.adapt_datetimefield_value(now()), name, owner])
        return cursor.rowcount > 0


def lease_holder(name: str) -> LeaseHolder | None:
    """The current row of `name`, live or not; None if the name was never leased."""
    row = Lease.objects.filter(name=name).values_list("owner", "holder", "expires_at", "acquired_at").first()
    if row is None:
        return None
    return LeaseHolder(owner=row[0], holder=row[1], expires_at=row[2], acquired_at=row[3])
