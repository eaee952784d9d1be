"""Who sees an account's pushes: its owner and name, cached briefly.

One cache with two writers of the same facts: the executor's plan read, which has the
owner and name at hand, and a read of the account when a push finds nothing fresh.
"""

from __future__ import annotations

import time
from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

# An account's owner never changes and its name rarely does: a push may show a name
# up to this old rather than read the account on every decision.
ACCOUNT_CACHE_S = 10.0
_accounts: dict[int, tuple[float, int, str]] = {}


@receiver([post_save, post_delete], sender="orders.Account", dispatch_uid="orders.outcomes.account_cache")
def _forget_account(sender: type, instance: Any, **kwargs: Any) -> None:
    _accounts.pop(instance.pk, None)


def account_audience_seen(*, account_id: int, owner_id: int, name: str) -> None:
    """Remember an account's owner and name as just read (the executor's plan read has them), for the pushes."""
    _accounts[account_id] = (time.monotonic(), owner_id, name)


def account_owner_and_name(account_id: int) -> tuple[int, str] | None:
    """The account's owner id and name, from the cache while fresh; None for no such account."""
    from orders.models import Account

    cached = _accounts.get(account_id)
    if cached is None or time.monotonic() - cached[0] > ACCOUNT_CACHE_S:
        owner = Account.objects.filter(pk=account_id).values_list("owner_id", "name").first()
        if owner is None:
            return None
        cached = _accounts[account_id] = (time.monotonic(), owner[0], owner[1])
    return cached[1], cached[2]
