"""Deterministic client order ids: <prefix>-<account id>-<digest of the signal and leg>.

The same signal on the same account always yields the same id, in any process, so a
retry or a second runtime racing on the signal can never become a second order: the
venue (and our unique constraint) refuses the duplicate. Ids fit Binance's
`^[.A-Z:/a-z0-9_-]{1,36}$` and Upstox's order tag.
"""

from __future__ import annotations

import hashlib

DIGEST_CHARS = 16


def client_id_prefix(prefix: str, account_id: int) -> str:
    """The part every order id of one account starts with; reconciliation matches on it."""
    return f"{prefix}-{account_id}-"


def client_order_id(*, prefix: str, account_id: int, signal_key: str, leg: str = "") -> str:
    """Return the id for `signal_key` on the account; `leg` tells apart orders of one signal (an exit's cancel-and-replace)."""
    digest = hashlib.sha256(f"{account_id}|{signal_key}|{leg}".encode()).hexdigest()[:DIGEST_CHARS]
    return f"{client_id_prefix(prefix, account_id)}{digest}"


def parse_account_id(prefix: str, client_order_id_value: str) -> int | None:
    """Return the account id encoded in one of our ids, or None for a foreign id."""
    head = f"{prefix}-"
    if not client_order_id_value.startswith(head):
        return None
    account, sep, _ = client_order_id_value[len(head) :].partition("-")
    return int(account) if sep and account.isdigit() else None
