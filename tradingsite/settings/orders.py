"""Trading: the trade executor, brokers, the ledger's reserves, reconciliation (docs/orders.md)."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import env

# Every client order id starts "<prefix>-<account id>-"; reconciliation matches on it.
ORDERS_CLIENT_ID_PREFIX = env.str("ORDERS_CLIENT_ID_PREFIX", default="ts")
ORDERS_LOCK_TTL_S = env.float("ORDERS_LOCK_TTL_S", default=30.0)
# Must stay below the lock TTL, so an entry never outlives its lease.
ORDERS_BROKER_TIMEOUT_S = env.float("ORDERS_BROKER_TIMEOUT_S", default=10.0)
if ORDERS_BROKER_TIMEOUT_S >= ORDERS_LOCK_TTL_S:
    raise ImproperlyConfigured("ORDERS_BROKER_TIMEOUT_S must be below ORDERS_LOCK_TTL_S")
# How long the entry of a reversal (exit then opposite entry) waits for the exit to fill.
ORDERS_REVERSAL_WAIT_S = env.float("ORDERS_REVERSAL_WAIT_S", default=30.0)
ORDERS_MARKET_BUFFER_BPS = env.int("ORDERS_MARKET_BUFFER_BPS", default=50)
ORDERS_FEE_RESERVE_BPS = env.int("ORDERS_FEE_RESERVE_BPS", default=10)
ORDERS_PAPER_LATENCY_S = env.float("ORDERS_PAPER_LATENCY_S", default=0.0)
ORDERS_PAPER_TAKER_FEE_BPS = env.int("ORDERS_PAPER_TAKER_FEE_BPS", default=4)
ORDERS_PAPER_MAKER_FEE_BPS = env.int("ORDERS_PAPER_MAKER_FEE_BPS", default=2)
# Startup reconciliation (restart rebuild) per account; past it the account is DEGRADED
# and the periodic pass retries.
ORDERS_STARTUP_RECONCILE_TIMEOUT_S = env.float("ORDERS_STARTUP_RECONCILE_TIMEOUT_S", default=15.0)
# An entry whose broker outcome no read could resolve for this long is put to a person
# (dashboard panel "Orders needing a decision").
ORDERS_UNRESOLVED_PROMPT_AFTER_S = env.float("ORDERS_UNRESOLVED_PROMPT_AFTER_S", default=300.0)
# What engages an account's kill switch when reconciliation finds exposure or capital it
# cannot explain (the periodic job's wiring; the runtime injects the same callable).
ORDERS_ENTRIES_HALT = "dashboard.halts.entries_halt_by_reconciliation"
# Binance USD-M through ccxt: one key for every account on it (isolated by client-id prefix).
ORDERS_BINANCE_API_KEY = env.str("ORDERS_BINANCE_API_KEY", default="")
ORDERS_BINANCE_API_SECRET = env.str("ORDERS_BINANCE_API_SECRET", default="")
# Overrides ccxt's fapi URLs (a staging fake); empty = ccxt's live/testnet URLs.
ORDERS_BINANCE_FAPI_URL = env.str("ORDERS_BINANCE_FAPI_URL", default="")
# Upstox order API: live orders on the HFT host, reads on the API host, sandbox on its own.
ORDERS_UPSTOX_API_URL = env.str("ORDERS_UPSTOX_API_URL", default="https://api.upstox.com")
ORDERS_UPSTOX_ORDER_URL = env.str("ORDERS_UPSTOX_ORDER_URL", default="https://api-hft.upstox.com")
ORDERS_UPSTOX_SANDBOX_URL = env.str("ORDERS_UPSTOX_SANDBOX_URL", default="https://api-sandbox.upstox.com")
ORDERS_UPSTOX_PRODUCT = env.str("ORDERS_UPSTOX_PRODUCT", default="I")
