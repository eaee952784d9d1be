"""A clean stop: no new signals are traded, queued and in-flight ones finish, an exit about to be sent is sent."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from core.health import HealthBoard, Status
from core.runtime.core import Runtime
from feeds.market import FeedData
from orders.brokers.registry import BrokerRegistry
from orders.executor import COMPONENT, ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import Order, OrderIntent, PaperOrder, SignalOutcome
from orders.models.outcomes import Outcome
from orders.paper_matching import PaperMatcher
from orders.plans import signal_key
from orders.startup import OrdersHubs, orders_startup_tasks
from processor.signals import Signal, SignalHub, SignalKind
from tests.helpers import async_eventually
from tests.orders.factories import make_setup, make_signal, tick

pytestmark = pytest.mark.django_db(transaction=True)


async def _outcome(signal: Signal) -> str | None:
    return await database_sync_to_async(
        lambda: SignalOutcome.objects.filter(signal_key=signal_key(signal)).values_list("outcome", flat=True).first()
    )()


async def test_queued_and_in_flight_signals_finish_and_later_ones_are_recorded_as_stopped() -> None:
    a = await database_sync_to_async(make_setup)()
    b = await database_sync_to_async(make_setup)()
    registry = BrokerRegistry(paper_latency_s=0.2)
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(max_concurrent=1),  # the second signal queues behind the first
    )
    hub = SignalHub()
    runner = asyncio.create_task(executor.run(hub.subscribe("trade-executor")))
    try:
        first, queued = make_signal(a.strategy, SignalKind.ENTRY_LONG), make_signal(b.strategy, SignalKind.ENTRY_LONG)
        hub.publish([first, queued])
        await async_eventually(lambda: database_sync_to_async(OrderIntent.objects.exists)())  # first is in flight

        stopping = asyncio.create_task(executor.stop(10.0))
        await asyncio.sleep(0)  # the stop has begun
        late = make_signal(a.strategy, SignalKind.EXIT_LONG)
        hub.publish([late])
        report = await stopping

        assert report.clean
        assert await _outcome(first) == Outcome.PLACED
        assert await _outcome(queued) == Outcome.PLACED
        await async_eventually(lambda: _outcome(late))
        assert await _outcome(late) == Outcome.STOPPED
    finally:
        runner.cancel()
    assert await database_sync_to_async(PaperOrder.objects.count)() == 2
    assert not await database_sync_to_async(OrderIntent.objects.filter(state="PENDING").exists)()


async def test_an_exit_intent_created_when_the_stop_begins_is_sent_and_persisted(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)()
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    registry = BrokerRegistry(paper_latency_s=0.2)
    stops: list[asyncio.Task[object]] = []

    def stop_when_the_exit_intent_exists(step: str) -> None:
        if step == "exit_intent_created":
            stops.append(asyncio.ensure_future(stopping.stop(10.0)))

    stopping = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        step_hook=stop_when_the_exit_intent_exists,
    )
    queue: asyncio.Queue[Signal] = asyncio.Queue()
    runner = asyncio.create_task(stopping.run(queue))
    try:
        exit_signal = make_signal(setup.strategy, SignalKind.EXIT_LONG, "50100")
        queue.put_nowait(exit_signal)
        await async_eventually(lambda: asyncio.sleep(0, bool(stops)))
        assert (await stops[0]).clean  # type: ignore[attr-defined]
    finally:
        runner.cancel()
    assert await _outcome(exit_signal) == Outcome.PLACED

    def check() -> None:
        exit_order = Order.objects.get(intent="EXIT")
        assert PaperOrder.objects.filter(client_order_id=exit_order.client_order_id).exists()
        assert OrderIntent.objects.get(client_order_id=exit_order.client_order_id).state == OrderIntent.State.PLACED
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_a_runtime_stop_lets_the_in_flight_exit_finish_before_tasks_are_cancelled(
    executor: TradeExecutor, matcher: PaperMatcher, settings
) -> None:
    settings.ORDERS_PAPER_LATENCY_S = 0.3  # the exit is still at the broker when the stop comes
    setup = await database_sync_to_async(make_setup)()
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    hub = SignalHub()
    hubs = OrdersHubs()
    runtime = Runtime(orders_startup_tasks(hubs, signals=hub))
    run = asyncio.create_task(runtime.run())
    await async_eventually(lambda: asyncio.sleep(0, runtime.started))

    exit_signal = make_signal(setup.strategy, SignalKind.EXIT_LONG, "50100")
    hub.publish([exit_signal])
    await async_eventually(lambda: database_sync_to_async(OrderIntent.objects.filter(intent="EXIT").exists)())
    runtime.request_stop()
    late = make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "50100")

    async def stopping() -> bool:
        return hubs.trade_executor.get().stopping

    await async_eventually(stopping)
    hub.publish([late])
    assert await run == 0

    assert await _outcome(exit_signal) == Outcome.PLACED
    assert await _outcome(late) == Outcome.STOPPED
    assert await database_sync_to_async(Order.objects.filter(intent="EXIT").exists)()
    trade_executor = hubs.trade_executor.get()
    assert trade_executor.stop_report is not None and trade_executor.stop_report.clean
    assert runtime.context.health.get(COMPONENT).status == Status.HEALTHY


async def test_a_signal_unfinished_at_the_deadline_is_reported_on_health() -> None:
    setup = await database_sync_to_async(make_setup)()
    registry = BrokerRegistry(paper_latency_s=3.0)  # the broker outlives the stop's deadline
    health = HealthBoard()
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        health=health,
    )
    queue: asyncio.Queue[Signal] = asyncio.Queue()
    runner = asyncio.create_task(executor.run(queue))
    try:
        signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
        queue.put_nowait(signal)
        await async_eventually(lambda: database_sync_to_async(OrderIntent.objects.exists)())
        report = await executor.stop(0.2)
    finally:
        runner.cancel()
    assert report.unfinished == [signal_key(signal)]
    assert health.get(COMPONENT).status == Status.DEGRADED


async def test_a_reversal_waiting_for_its_exit_ends_as_stopped_at_a_stop(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)()
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "50100")) == ["placed"]
    entry_signal = make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "50100")
    queue: asyncio.Queue[Signal] = asyncio.Queue()
    runner = asyncio.create_task(executor.run(queue))
    try:
        queue.put_nowait(entry_signal)
        await async_eventually(lambda: _is(entry_signal, Outcome.WAITING_FOR_EXIT))
        report = await executor.stop(10.0)
    finally:
        runner.cancel()
    assert report.clean  # the wait ended at the stop instead of running out its 30 s
    assert await _outcome(entry_signal) == Outcome.STOPPED
    assert not await database_sync_to_async(OrderIntent.objects.filter(intent="ENTRY", side="SELL").exists)()


async def _is(signal: Signal, outcome: str) -> bool:
    return await _outcome(signal) == outcome
