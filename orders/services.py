"""Services of the orders app that tasks and startup call: brokers from settings, reconciliation passes."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings

from orders.brokers.registry import BrokerNotConfigured, BrokerRegistry
from orders.ledger import ledger_open
from orders.models import Account
from orders.reconciliation import ReconcileResult, ReconcileTracker, accounts_to_reconcile, reconcile_account

log = logging.getLogger(__name__)


def broker_registry_from_settings(*, auth_state: Any = None) -> BrokerRegistry:
    """Build (without connecting) the brokers this deployment is configured for."""
    registry = BrokerRegistry(paper_latency_s=settings.ORDERS_PAPER_LATENCY_S)
    if settings.ORDERS_BINANCE_API_KEY:
        from orders.brokers.binance_usdm import BinanceUsdmBroker

        for mode, demo in (("live", False), ("sandbox", True)):
            registry.factories[("binance-usdm", mode)] = lambda demo=demo: BinanceUsdmBroker(
                api_key=settings.ORDERS_BINANCE_API_KEY,
                secret=settings.ORDERS_BINANCE_API_SECRET,
                demo=demo,
                fapi_url=settings.ORDERS_BINANCE_FAPI_URL,
                timeout_s=settings.ORDERS_BROKER_TIMEOUT_S,
            )
    if auth_state is not None:
        from orders.brokers.upstox import upstox_factories

        registry.factories.update(upstox_factories(auth_state))
    return registry


def ledgers_open_all() -> int:
    """Give every account a ledger (accounts made in the admin or by loaddemo have none yet)."""
    opened = 0
    for account in Account.objects.filter(ledger__isnull=True):
        ledger_open(account=account)
        opened += 1
    return opened


async def reconcile_all(
    *, registry: BrokerRegistry, tracker: ReconcileTracker | None = None, timeout_s: float | None = None
) -> list[ReconcileResult]:
    """Run one reconciliation pass over every account; a failing account is reported, not fatal."""
    await database_sync_to_async(ledgers_open_all)()
    results: list[ReconcileResult] = []
    for account_id, venue, mode in await database_sync_to_async(accounts_to_reconcile)():
        result = ReconcileResult(account_id)
        try:
            broker = registry.broker_for(account_id=account_id, venue=venue, mode=mode)
            result = await asyncio.wait_for(
                reconcile_account(
                    account_id=account_id,
                    broker=broker,
                    prefix=settings.ORDERS_CLIENT_ID_PREFIX,
                    lock_ttl_s=settings.ORDERS_LOCK_TTL_S,
                    tracker=tracker,
                ),
                timeout_s,
            )
        except BrokerNotConfigured as exc:
            result.skipped = str(exc)
        except Exception as exc:  # one broker down must not stop the others' pass
            log.warning("orders reconcile account %s (%s %s) failed: %r", account_id, venue, mode, exc)
            result.skipped = f"failed: {exc!r}"
        results.append(result)
    return results


def summarize(results: list[ReconcileResult]) -> str:
    corrections = sum(sum(r.corrections.values()) for r in results)
    skipped = [f"{r.account_id}: {r.skipped}" for r in results if r.skipped]
    problems = [f"{r.account_id}: {'; '.join(r.invariant_problems)}" for r in results if r.invariant_problems]
    text = f"{len(results)} accounts, {corrections} corrections"
    if skipped:
        text += f", skipped {', '.join(skipped)}"
    if problems:
        text += f", capital invariant violations {', '.join(problems)}"
    return text


class CapitalInvariantViolated(RuntimeError):
    """A reconciliation pass found a ledger that does not add up; the job reports DEGRADED with it."""


def reconcile_accounts() -> str:
    """One pass from a Celery worker or the embedded periodic runner; builds and closes its own brokers.

    `async_to_sync`, not `asyncio.run`: in the embedded site this runs inside Channels'
    database thread, and asgiref routes the pass's own database calls back to this
    thread instead of deadlocking on it.
    """

    async def run() -> list[ReconcileResult]:
        auth_state = await _auth_state_for_worker()
        registry = broker_registry_from_settings(auth_state=auth_state)
        try:
            results = await reconcile_all(registry=registry, timeout_s=settings.ORDERS_STARTUP_RECONCILE_TIMEOUT_S)
        finally:
            await registry.close()
            for provisioned in auth_state.provisioned.values():
                await provisioned.stop()
        return results

    results = async_to_sync(run)()
    summary = summarize(results)
    if any(result.invariant_problems for result in results):
        raise CapitalInvariantViolated(summary)
    return summary


async def _auth_state_for_worker() -> Any:
    """Token managers outside a runtime process: loaded once, not followed."""
    from recovery.clock import current_clock
    from recovery.startup import build_auth_state

    auth_state = build_auth_state(clock=current_clock())
    for manager in auth_state.oauth.values():
        await manager.refresh()
    for provisioned in auth_state.provisioned.values():
        await provisioned.start()
    return auth_state
