"""Broker failures never stop signals; unknown outcomes and restarts converge through reconciliation."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from core.health import HealthBoard, Status
from core.runtime.core import Phase, Runtime, RuntimeContext, StartupTask
from feeds.distribution.fanout import FeedFanout
from orders.brokers.base import BrokerOrder, BrokerRejected, BrokerUnavailable, OrderRequest
from orders.brokers.paper import PaperBroker
from orders.executor import COMPONENT, ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.lifecycle import intent_create
from orders.models import AuditEvent, CapitalLedger, Order, OrderIntent, PaperOrder
from orders.reconciliation import reconcile_account
from orders.startup import RECONCILE_COMPONENT, OrdersHubs, orders_startup_tasks
from processor.signals import SignalHub, SignalKind
from tests.helpers import async_eventually
from tests.orders.factories import make_setup, make_signal, market_entry_spec

pytestmark = pytest.mark.django_db(transaction=True)


class AcceptedThenTimedOut(PaperBroker):
    """The exchange takes the order, but the answer never comes back."""

    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        await super().place_order(request)
        raise BrokerUnavailable("read timeout")


class Refusing(PaperBroker):
    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        raise BrokerRejected("margin is insufficient")


async def test_an_unknown_outcome_keeps_the_reservation_until_reconciliation_adopts_the_order() -> None:
    setup = await database_sync_to_async(make_setup)()
    broker = AcceptedThenTimedOut(account_key=str(setup.account.pk))
    health = HealthBoard()
    executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig(), health=health)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG)) == ["unknown"]
    assert health.get(COMPONENT).status == Status.DEGRADED

    def pending() -> None:
        intent = OrderIntent.objects.get()
        assert intent.state == OrderIntent.State.PENDING and not Order.objects.exists()
        assert CapitalLedger.objects.get(account_id=setup.account.pk).reserved_for_orders == intent.reserved
        assert AuditEvent.objects.filter(event="signal.unknown").exists()

    await database_sync_to_async(pending)()
    result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
    assert result.corrections == {"Adopt": 1}

    def adopted() -> None:
        order = Order.objects.get()
        assert order.via_reconciliation and order.reserved == OrderIntent.objects.get().reserved
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(adopted)()


async def test_a_refused_order_releases_its_reservation() -> None:
    setup = await database_sync_to_async(make_setup)()
    broker = Refusing(account_key=str(setup.account.pk))
    executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG)) == ["broker_rejected"]

    def check() -> None:
        assert OrderIntent.objects.get().state == OrderIntent.State.ABANDONED
        assert CapitalLedger.objects.get(account_id=setup.account.pk).reserved_for_orders == 0
        assert AuditEvent.objects.filter(event="entry.failed").exists()
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_signals_keep_flowing_to_other_subscribers_while_the_broker_is_down() -> None:
    setup = await database_sync_to_async(make_setup)()
    hub = SignalHub()
    store = hub.subscribe("store")
    broker = Refusing(account_key=str(setup.account.pk))
    executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
    runner = asyncio.create_task(executor.run(hub.subscribe("trade-executor")))
    try:
        signals = [make_signal(setup.strategy, SignalKind.ENTRY_LONG) for _ in range(3)]
        hub.publish(signals)
        assert [store.get_nowait() for _ in range(3)] == signals

        async def handled() -> bool:
            return executor.outcomes.get("broker_rejected", 0) == 3

        await async_eventually(handled)
    finally:
        runner.cancel()


async def test_restart_rebuild_adopts_an_order_left_by_a_crash_before_trading_starts() -> None:
    setup = await database_sync_to_async(make_setup)()
    spec = market_entry_spec(setup, f"ts-{setup.account.pk}-crashed0000000001")
    await database_sync_to_async(intent_create)(spec=spec)
    paper = PaperBroker(account_key=str(setup.account.pk))
    await paper.place_order(
        OrderRequest(spec.client_order_id, "BTCUSDT", "BUY", "MARKET", spec.quantity, None)
    )  # the exchange has it; the crashed process never persisted it
    seen_at_data_flow: list[bool] = []

    async def observe(ctx: RuntimeContext) -> None:
        seen_at_data_flow.append(
            await database_sync_to_async(Order.objects.filter(client_order_id=spec.client_order_id).exists)()
        )

    runtime = Runtime(
        [
            *orders_startup_tasks(OrdersHubs(), fanout=FeedFanout(), signals=SignalHub()),
            StartupTask("observe", Phase.DATA_BRIDGE, observe),
        ]
    )
    run = asyncio.create_task(runtime.run())

    async def started() -> bool:
        return runtime.started

    await async_eventually(started)
    runtime.request_stop()
    assert await run == 0
    assert seen_at_data_flow == [True]
    assert runtime.context.health.get(RECONCILE_COMPONENT).status == Status.HEALTHY
    assert await database_sync_to_async(PaperOrder.objects.count)() == 1
