"""The orders app's startup tasks (see core.runtime.core.Phase) and the hubs it hands on.

Orders takes the feed fan-out (the paper exchange matches on live ticks), the
processor's signal hub (the trade executor trades its signals), recovery's token state
(broker logins) and the kill switches the composition root injects (EntryControls:
orders never imports the dashboard); it hands on OrdersHubs.

SUBSCRIPTIONS: brokers are built and the restart rebuild runs: every account is
reconciled against its broker (adopting orders placed before a crash, applying missed
fills, releasing reservations of orders that never left, comparing net exposure)
before any signal is traded; an account it cannot vouch for stays halted for entries.
It also registers the clean stop's final reconciliation pass (StopStage.BOOKS).
DATA_FLOW: the paper exchange starts matching on live ticks and the trade executor
subscribes to the processor's signals; its drain is the stop's StopStage.DRAIN, so the
final pass runs after it (and after every producer of intents stopped, StopStage.INTAKE)
however long the drain takes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from channels.db import database_sync_to_async
from django.conf import settings

from core.health import Status
from core.runtime.core import Phase, RuntimeContext, StartupTask, StopStage
from core.runtime.startup_value import StartupValue
from orders.audit import audit_record
from orders.brokers.paper import PaperFees
from orders.brokers.registry import BrokerRegistry
from orders.executor import COMPONENT as EXECUTOR_COMPONENT
from orders.executor import EntryGate, EntryGateMany, ExecutorConfig, TradeExecutor, _never_halted
from orders.paper_matching import PaperMatcher
from orders.reconciliation import ReconcileResult, ReconcileTracker
from orders.services import (
    EntriesHalt,
    broker_registry_from_settings,
    halt_reason,
    needs_operator,
    reconcile_all,
    stop_leftovers,
    summarize,
)

if TYPE_CHECKING:
    from feeds.distribution.fanout import FeedFanout
    from processor.signals import SignalHub
    from recovery.coordinator import AuthState

log = logging.getLogger(__name__)

# Of the final pass's time, what is kept to count and report what is left.
STOP_REPORT_RESERVE_S = 0.5
RECONCILE_COMPONENT = "orders:reconciliation"
PAPER_COMPONENT = "orders:paper-broker"


@dataclass(frozen=True, slots=True)
class EntryControls:
    """The kill switches: consulted before every entry, engaged by reconciliation.

    Injected by the composition root; without them entries are never halted and an
    account reconciliation cannot vouch for is only reported.
    """

    entry_gate: EntryGate = _never_halted
    entries_halt: EntriesHalt | None = None
    # entry_gate for a signal's accounts in one read; None: entry_gate per account.
    entry_gate_many: EntryGateMany | None = None


@dataclass(frozen=True, slots=True)
class OrdersHubs:
    """What the orders app hands the rest of the runtime; each value written by one task here."""

    brokers: StartupValue[BrokerRegistry] = field(default_factory=lambda: StartupValue("broker registry"))
    paper_matcher: StartupValue[PaperMatcher] = field(default_factory=lambda: StartupValue("paper matcher"))
    reconcile_tracker: ReconcileTracker = field(default_factory=ReconcileTracker)
    trade_executor: StartupValue[TradeExecutor] = field(default_factory=lambda: StartupValue("trade executor"))


def executor_config_from_settings() -> ExecutorConfig:
    return ExecutorConfig(
        client_id_prefix=settings.ORDERS_CLIENT_ID_PREFIX,
        lock_ttl_s=settings.ORDERS_LOCK_TTL_S,
        broker_timeout_s=settings.ORDERS_BROKER_TIMEOUT_S,
        market_buffer_bps=settings.ORDERS_MARKET_BUFFER_BPS,
        fee_reserve_bps=settings.ORDERS_FEE_RESERVE_BPS,
    )


def rebuild_health(results: list[ReconcileResult], *, halting: bool) -> tuple[Status, str]:
    """The reconciliation component's health after the restart rebuild, with the numbers."""
    halted = [f"{r.account_id} ({reason})" for r in results if (reason := halt_reason(r, rebuild=True))]
    degraded = bool(halted) or needs_operator(results)
    text = f"restart rebuild: {summarize(results)}"
    if halted:
        text += f"; entries halted on accounts {', '.join(halted)}"
        text += (
            " until a person releases their kill switch" if halting else ", but no kill switch is wired in this process"
        )
    return (Status.DEGRADED if degraded else Status.HEALTHY), text


async def final_reconcile(
    ctx: RuntimeContext,
    registry: BrokerRegistry,
    matcher: PaperMatcher,
    timeout_s: float,
    *,
    tracker: ReconcileTracker | None = None,
    halt_entries: EntriesHalt | None = None,
) -> None:
    """The clean stop's last pass: book every fill the broker matched, resolve every pending intent.

    The paper exchange stops matching first, so the book read is the one the site
    leaves behind. Bounded by the stop hook's time; what is left is logged, audited
    and put on health.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s * 0.9
    await matcher.stop()
    results: list[ReconcileResult] = []
    try:
        results = await asyncio.wait_for(
            reconcile_all(
                registry=registry,
                tracker=tracker,
                halt_entries=halt_entries,
                lease_wait_s=max(min(settings.ORDERS_LOCK_TTL_S, (deadline - loop.time()) / 2), 0.0),
            ),
            max(deadline - loop.time() - STOP_REPORT_RESERVE_S, 0.01),
        )
    except TimeoutError:
        log.warning("orders: the final reconciliation did not finish within %.1fs", timeout_s)
    left = await database_sync_to_async(stop_leftovers)()
    text = f"final pass at stop: {summarize(results)}; left: {left.describe()}"
    if left.anything:
        log.warning("orders: %s", text)
    else:
        log.info("orders: %s", text)
    await database_sync_to_async(audit_record)(
        event="reconcile.stop", account_id=None, message=text, details=left.as_dict()
    )
    ctx.health.set(RECONCILE_COMPONENT, Status.DEGRADED if left.anything else Status.HEALTHY, text)


def orders_startup_tasks(
    hubs: OrdersHubs,
    *,
    fanout: FeedFanout | None = None,
    signals: SignalHub | None = None,
    auth_state: StartupValue[AuthState] | None = None,
    controls: EntryControls | None = None,
) -> list[StartupTask]:
    controls = controls or EntryControls()

    async def rebuild(ctx: RuntimeContext) -> None:
        matcher = PaperMatcher(
            fees=PaperFees(taker_bps=settings.ORDERS_PAPER_TAKER_FEE_BPS, maker_bps=settings.ORDERS_PAPER_MAKER_FEE_BPS)
        )
        registry = broker_registry_from_settings(auth_state=auth_state.get_or(None) if auth_state else None)
        registry.on_paper_place = matcher.order_placed
        hubs.brokers.provide(registry)
        hubs.paper_matcher.provide(matcher)
        ctx.exit_stack.push_async_callback(registry.close)
        tracker = hubs.reconcile_tracker
        halt_entries = controls.entries_halt
        # Trading starts only after this returns: the pass waits for leases a killed
        # process left (until they expire), and every account it cannot vouch for has
        # its entries halted until a person releases them.
        results = await reconcile_all(
            registry=registry,
            tracker=tracker,
            timeout_s=settings.ORDERS_STARTUP_RECONCILE_TIMEOUT_S,
            halt_entries=halt_entries,
            rebuild=True,
        )
        ctx.health.set(RECONCILE_COMPONENT, *rebuild_health(results, halting=halt_entries is not None))
        # The books stage runs after every drain, with a share of the stop timeout of its
        # own: this pass books what the drained executor and the broker left.
        ctx.on_stop(
            "orders-final-reconcile",
            lambda timeout_s: final_reconcile(
                ctx, registry, matcher, timeout_s, tracker=tracker, halt_entries=halt_entries
            ),
            stage=StopStage.BOOKS,
        )

    async def start_trading(ctx: RuntimeContext) -> None:
        registry = hubs.brokers.get()
        if fanout is not None:
            from feeds.distribution.fanout import drain

            name = "paper-broker"
            ctx.spawn(name, drain(name, fanout.subscribe(name), hubs.paper_matcher.get().consume))
            ctx.health.set(PAPER_COMPONENT, Status.HEALTHY, "matching paper orders on live ticks")
        if signals is None:
            ctx.health.set(EXECUTOR_COMPONENT, Status.DEGRADED, "no signal hub in this process: not trading")
            return
        executor = TradeExecutor(
            broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
            config=replace(executor_config_from_settings(), reversal_wait_s=settings.ORDERS_REVERSAL_WAIT_S),
            health=ctx.health,
            entry_gate=controls.entry_gate,
            entry_gate_many=controls.entry_gate_many,
        )
        hubs.trade_executor.provide(executor)
        ctx.spawn("trade-executor", executor.run(signals.subscribe("trade-executor")))

        async def stop_trading(timeout_s: float) -> None:
            # After the producers stopped and before the books close: signals in flight
            # finish, later ones are refused; what is unfinished at the deadline is
            # cancelled, its leases given back for the final pass to resolve.
            await executor.stop(timeout_s)

        ctx.on_stop("trade-executor", stop_trading, stage=StopStage.DRAIN)

    return [
        StartupTask("orders-restart-rebuild", Phase.SUBSCRIPTIONS, rebuild),
        StartupTask("start-trading", Phase.DATA_FLOW, start_trading),
    ]
