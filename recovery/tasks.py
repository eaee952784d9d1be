"""Periodic jobs (thin wrappers over services, each declaring its cadence)."""

from __future__ import annotations

from core.jobs import periodic_job
from recovery.clock import current_clock
from recovery.services import token_expire_due


@periodic_job("recovery-token-expiry", every_s=60.0)
def expire_broker_tokens() -> str:
    """Backstop for the runtime's expiry timers: retire every OAuth token past its expiry."""
    moved = token_expire_due(now=current_clock().now())
    return f"{moved} token(s) expired"
