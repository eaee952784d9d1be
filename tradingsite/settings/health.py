"""Readiness probes: how long /readyz waits for the channel layer's round trip."""

from __future__ import annotations

from tradingsite.settings.base import env

# A shared channel layer (Redis) that does not echo a message within this bound makes
# this web process not ready: its websockets would fail.
READYZ_TIMEOUT_S = env.float("READYZ_TIMEOUT_S", default=2.0)
