"""The orders app's startup tasks (see tradingsite.runtime.core.Phase).

SUBSCRIPTIONS: brokers are built and the restart rebuild runs: every account is
reconciled against its broker (adopting orders placed before a crash, applying missed
fills, releasing reservations of orders that never left) before any signal is traded.
DATA_FLOW: the paper exchange starts matching on live ticks and the trade executor
subscribes to the processor's signals.
"""
from __future__ import annotations

from django.conf import settings

from orders.brokers.paper import PaperFees
from orders.executor import COMPONENT as EXECUTOR_COMPONENT
from orders.executor import ExecutorConfig, TradeExecutor, _never_halted
from orders.paper_matching import PaperMatcher
from orders.reconciliation import ReconcileTracker
from orders.services import broker_registry_from_settings, reconcile_all, summarize
from tradingsite.health import Status
from tradingsite.runtime.core import Phase, RuntimeContext, StartupTask

BROKERS_RESOURCE = "brokers"
RECONCILE_COMPONENT = "orders:reconciliation"
PAPER_COMPONENT = "orders:paper-broker"


def executor_config_from_settings() -> ExecutorConfig:
    return ExecutorConfig(
        client_id_prefix=settings.ORDERS_CLIENT_ID_PREFIX,
        lock_ttl_s=settings.ORDERS_LOCK_TTL_S,
        broker_timeout_s=settings.ORDERS_BROKER_TIMEOUT_S,
        market_buffer_bps=settings.ORDERS_MARKET_BUFFER_BPS,
        fee_reserve_bps=settings.ORDERS_FEE_RESERVE_BPS,
    )


def orders_startup_tasks() -> list[StartupTask]:
    async def rebuild(ctx: RuntimeContext) -> None:
        matcher = PaperMatcher(
            fees=PaperFees(taker_bps=settings.ORDERS_PAPER_TAKER_FEE_BPS, maker_bps=settings.ORDERS_PAPER_MAKER_FEE_BPS)
        )
        registry = broker_registry_from_settings(auth_state=ctx.resources.get("auth_state"))
        registry.on_paper_place = matcher.order_placed
        ctx.resources[BROKERS_RESOURCE] = registry
        ctx.resources["paper_matcher"] = matcher
        ctx.exit_stack.push_async_callback(registry.close)
        tracker = ReconcileTracker()
        ctx.resources["reconcile_tracker"] = tracker
        results = await reconcile_all(
            registry=registry, tracker=tracker, timeout_s=settings.ORDERS_STARTUP_RECONCILE_TIMEOUT_S
        )
        degraded = any(r.skipped or r.invariant_problems for r in results)
        ctx.health.set(
            RECONCILE_COMPONENT, Status.DEGRADED if degraded else Status.HEALTHY, f"restart rebuild: {summarize(results)}"
        )

    async def start_trading(ctx: RuntimeContext) -> None:
        registry = ctx.resources[BROKERS_RESOURCE]
        fanout = ctx.resources.get("fanout")
        if fanout is not None:
            from feeds.fanout import drain

            name = "paper-broker"
            ctx.spawn(name, drain(name, fanout.subscribe(name), ctx.resources["paper_matcher"].consume))
            ctx.health.set(PAPER_COMPONENT, Status.HEALTHY, "matching paper orders on live ticks")
        hub = ctx.resources.get("signals")
        if hub is None:
            ctx.health.set(EXECUTOR_COMPONENT, Status.DEGRADED, "no signal hub in this process: not trading")
            return
        from dataclasses import replace

        executor = TradeExecutor(
            broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
            config=replace(executor_config_from_settings(), reversal_wait_s=settings.ORDERS_REVERSAL_WAIT_S),
            health=ctx.health,
            entry_gate=ctx.resources.get("entry_gate", _never_halted),
        )
        ctx.resources["trade_executor"] = executor
        ctx.spawn("trade-executor", executor.run(hub.subscribe("trade-executor")))

        async def stop_trading(timeout_s: float) -> None:
            # Registered after the brokers and the paper matcher, so it runs before their
            # books close: queued and in-flight signals finish, later ones are refused.
            await executor.stop(timeout_s)

        ctx.on_stop("trade-executor", stop_trading)

    return [
        StartupTask("orders-restart-rebuild", Phase.SUBSCRIPTIONS, rebuild),
        StartupTask("start-trading", Phase.DATA_FLOW, start_trading),
    ]



