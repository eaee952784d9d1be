"""Row leases with TTL and owner tokens (seed 003: fn_try_acquire/fn_release_entry_lock_row).

`lock_acquire` is one conditional UPDATE (take the row if it is free, expired or
already ours), with an INSERT the first time a scope is used; both run in autocommit,
outside any caller transaction, so a lease is visible to other processes at once.
A lease that outlives its holder (a killed process) frees itself at `expires_at`.
"""
from __future__ import annotations

import secrets
import time
from datetime import datetime, timedelta
from typing import Callable

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from orders.metrics import LOCK_ACQUIRE_SECONDS, LOCK_CONTENTION
from orders.models import EntryLock

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
    expires = current + timedelta(seconds=ttl_s)
    taken = _take(account_id, scope, owner, current, expires)
    if not taken and not EntryLock.objects.filter(account_id=account_id, scope=scope).exists():
        try:
            with transaction.atomic():
                EntryLock.objects.create(
                    account_id=account_id, scope=scope, owner=owner, expires_at=expires, acquired_at=current
                )
            taken = True
        except IntegrityError:
            # Created by another process in between: the conditional take decides.
            taken = _take(account_id, scope, owner, current, expires)
    LOCK_ACQUIRE_SECONDS.observe(time.monotonic() - started)
    if not taken:
        LOCK_CONTENTION.labels(scope.split(":", 1)[0]).inc()
    return taken


def _take(account_id: int, scope: str, owner: str, current: datetime, expires: datetime) -> bool:
    """One conditional UPDATE: the row is ours if free, expired or already held by `owner`."""
    return bool(
        EntryLock.objects.filter(account_id=account_id, scope=scope)
        .filter(Q(expires_at__lt=current) | Q(owner=owner) | Q(owner=""))
        .update(owner=owner, expires_at=expires, acquired_at=current)
    )


def lock_release(*, account_id: int, scope: str, owner: str) -> bool:
    """Give the lease back if `owner` still holds it; return whether it did."""
    return bool(
        EntryLock.objects.filter(account_id=account_id, scope=scope, owner=owner).update(
            owner="", expires_at=timezone.now()
        )
    )
