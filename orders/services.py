"""Services of the orders app that tasks and startup call: brokers from settings, reconciliation passes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Count, Sum
from django.utils.module_loading import import_string

from core.fixed_point import fixed_to_str
from orders.brokers.kinds import BROKERS, configured_factories
from orders.brokers.registry import BrokerNotConfigured, BrokerRegistry
from orders.ledger import ledger_open
from orders.models import Account, Order, OrderIntent
from orders.models.lifecycle import TERMINAL_STATUSES
from orders.reconcile_runner import BeforeExposure, Row, exposure_plan, run_passes
from orders.reconciliation import ReconcileResult, ReconcileTracker, accounts_to_reconcile, reconcile_account

log = logging.getLogger(__name__)


def broker_registry_from_settings(*, auth_state: Any = None) -> BrokerRegistry:
    """Build (without connecting) the brokers this deployment is configured for."""
    registry = BrokerRegistry(paper_latency_s=settings.ORDERS_PAPER_LATENCY_S)
    for kind in BROKERS.values():
        registry.factories.update(configured_factories(kind, auth_state=auth_state))
    return registry


def ledgers_open_all() -> int:
    """Give every account a ledger (accounts made in the admin or by loaddemo have none yet)."""
    opened = 0
    for account in Account.objects.filter(ledger__isnull=True):
        ledger_open(account=account)
        opened += 1
    return opened


EntriesHalt = Callable[[int, str], object]
# Past its TTL a dead process's lease is free; the margin covers clock steps between hosts.
LEASE_TAKEOVER_MARGIN_S = 2.0


async def reconcile_all(
    *,
    registry: BrokerRegistry,
    tracker: ReconcileTracker | None = None,
    timeout_s: float | None = None,
    halt_entries: EntriesHalt | None = None,
    rebuild: bool = False,
    lease_wait_s: float | None = None,
) -> list[ReconcileResult]:
    """Run one reconciliation pass over every account; a failing account is reported, not fatal.

    An account whose pass finds exposure or capital it cannot explain has its entries
    halted through `halt_entries(account id, reason)` until a person releases them. The
    restart rebuild (`rebuild`) waits for leases a killed process left until they
    expire, and also halts an account whose pass was skipped or failed: trading must
    not resume on an account nobody reconciled. `lease_wait_s` overrides how long a
    pass waits for a held lease (default: one TTL and a margin at rebuild, else 0).
    """
    await database_sync_to_async(ledgers_open_all)()
    if lease_wait_s is None:
        lease_wait_s = settings.ORDERS_LOCK_TTL_S + LEASE_TAKEOVER_MARGIN_S if rebuild else 0.0
    accounts = await database_sync_to_async(accounts_to_reconcile)()
    plan = exposure_plan(registry, accounts)
    pass_timeout_s = None if timeout_s is None else timeout_s + lease_wait_s

    async def run_pass(row: Row, before_exposure: BeforeExposure | None) -> ReconcileResult:
        account_id, venue, mode = row
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
                    lease_wait_s=lease_wait_s,
                    prompt_after_s=settings.ORDERS_UNRESOLVED_PROMPT_AFTER_S,
                    exposure_accounts=plan.accounts.get(row),
                    before_exposure=before_exposure,
                ),
                pass_timeout_s,
            )
        except BrokerNotConfigured as exc:
            result.skipped = str(exc)
        except TimeoutError:
            log.warning(
                "orders reconcile account %s (%s %s): no answer within %.0fs", account_id, venue, mode, pass_timeout_s
            )
            result.skipped = f"failed: the broker did not answer within {pass_timeout_s:.0f}s"
        except Exception as exc:  # one broker down must not stop the others' pass
            log.warning("orders reconcile account %s (%s %s) failed: %r", account_id, venue, mode, exc)
            result.skipped = f"failed: {exc!r}"
        reason = halt_reason(result, rebuild=rebuild)
        if reason and halt_entries is not None:
            # Exposure of a shared venue key cannot be pinned on one account: halt them all.
            for halted in sorted({account_id, *(result.exposure_accounts if result.exposure_mismatches else ())}):
                await database_sync_to_async(halt_entries)(halted, reason)
        return result

    # Every account at once, each within its own timeout: one broker that hangs (a login
    # pending, a venue not answering) must not hold up the other accounts' passes.
    return await run_passes(accounts, plan, run_pass)


def halt_reason(result: ReconcileResult, *, rebuild: bool) -> str:
    """Why this pass leaves the account halted for entries; "" when it does not."""
    reason = result.halt_reason()
    if rebuild and result.skipped:
        reason = ", ".join(filter(None, [f"restart rebuild did not complete: {result.skipped}", reason]))
    return reason


def summarize(results: list[ReconcileResult]) -> str:
    corrections = sum(sum(r.corrections.values()) for r in results)
    skipped = [f"{r.account_id}: {r.skipped}" for r in results if r.skipped]
    problems = [f"{r.account_id}: {'; '.join(r.invariant_problems)}" for r in results if r.invariant_problems]
    exposure = [f"{r.account_id}: {m.describe()}" for r in results for m in r.exposure_mismatches]
    waiting = [r for r in results if r.awaiting_decision]
    degraded = [
        f"{r.account_id}: {', '.join(f'{step} ({why})' for step, why in sorted(r.degraded_steps.items()))}"
        for r in results
        if r.degraded_steps
    ]
    text = f"{len(results)} accounts, {corrections} corrections"
    if exposure:
        text += f", exposure mismatches {', '.join(exposure)}"
    if waiting:
        parts = [
            f"{r.account_id}: {len(r.awaiting_decision)} reserving "
            f"{fixed_to_str(sum(d.reserved for d in r.awaiting_decision))}"
            for r in waiting
        ]
        text += f", orders needing a decision {', '.join(parts)}"
    if skipped:
        text += f", skipped {', '.join(skipped)}"
    if problems:
        text += f", capital invariant violations {', '.join(problems)}"
    if degraded:
        text += f", broker reads unavailable {'; '.join(degraded)}"
    return text


def needs_operator(results: list[ReconcileResult]) -> bool:
    """A pass left something only a person can settle: exposure nobody explains or an order awaiting a decision."""
    return any(r.exposure_mismatches or r.awaiting_decision for r in results)


@dataclass(frozen=True)
class StopLeftovers:
    """What a clean stop leaves unsettled: intents whose outcome is unknown, orders still working at the broker."""

    pending_intents: int
    pending_reserved: int
    working_orders: int

    @property
    def anything(self) -> bool:
        # A working order is recorded as the broker has it; only an unknown outcome is left undone.
        return self.pending_intents > 0

    def describe(self) -> str:
        return (
            f"{self.pending_intents} pending intents reserving {fixed_to_str(self.pending_reserved)}, "
            f"{self.working_orders} orders working at the broker"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "pending_intents": self.pending_intents,
            "pending_reserved": fixed_to_str(self.pending_reserved),
            "working_orders": self.working_orders,
        }


def stop_leftovers() -> StopLeftovers:
    pending = OrderIntent.objects.filter(state=OrderIntent.State.PENDING).aggregate(
        n=Count("pk"), reserved=Sum("reserved")
    )
    working = Order.objects.exclude(status__in=TERMINAL_STATUSES).count()
    return StopLeftovers(int(pending["n"] or 0), int(pending["reserved"] or 0), working)


class CapitalInvariantViolated(RuntimeError):
    """A reconciliation pass found a ledger that does not add up; the job reports DEGRADED with it."""


class ReconciliationNeedsOperator(RuntimeError):
    """A pass found exposure it cannot explain or orders waiting for a decision; the job reports DEGRADED with it."""


def entries_halt_from_settings() -> EntriesHalt:
    """The kill-switch callable named by ORDERS_ENTRIES_HALT (orders does not import the dashboard)."""
    return import_string(settings.ORDERS_ENTRIES_HALT)


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
            results = await reconcile_all(
                registry=registry,
                timeout_s=settings.ORDERS_STARTUP_RECONCILE_TIMEOUT_S,
                halt_entries=entries_halt_from_settings(),
            )
        finally:
            await registry.close()
            for provisioned in auth_state.provisioned.values():
                await provisioned.stop()
        return results

    results = async_to_sync(run)()
    summary = summarize(results)
    if any(result.invariant_problems for result in results):
        raise CapitalInvariantViolated(summary)
    if needs_operator(results):
        raise ReconciliationNeedsOperator(summary)
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
