"""A clean stop whose drain meets more work than its time: the final pass still runs, after the drain.

The race a SIGTERM to a busy `runfeed` met: signals of one strategy and symbol queue
behind one another on an account, each waiting for the broker's answer to the one
before. Drained one broker round trip at a time, that backlog outlasted the stop's
time, the final reconciliation pass found no time left, and the placement still
working when the tasks were cancelled left its entry intent PENDING, holding capital,
with no `reconcile.stop` report. These tests run that stop in process.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from core.runtime.core import Runtime
from dashboard.halts import entries_halt_by_reconciliation
from feeds.market import FeedData
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.manual import exit_order_for
from orders.models import AuditEvent, OrderIntent, PaperOrder, Position, SignalOutcome
from orders.models.outcomes import Outcome
from orders.paper_matching import PaperMatcher
from orders.plans import signal_key
from orders.risk_watch import RiskWatcher
from orders.startup import EntryControls, OrdersHubs, orders_startup_tasks
from processor.signals import Signal, SignalHub, SignalKind
from tests.helpers import async_eventually
from tests.orders.factories import Setup, make_setup, make_signal, tick

pytestmark = pytest.mark.django_db(transaction=True)


def _runtime(hubs: OrdersHubs, hub: SignalHub, stop_timeout_s: float) -> Runtime:
    controls = EntryControls(entries_halt=entries_halt_by_reconciliation)
    return Runtime(orders_startup_tasks(hubs, signals=hub, controls=controls), stop_timeout_s=stop_timeout_s)


async def _started(runtime: Runtime) -> asyncio.Task[int]:
    run = asyncio.create_task(runtime.run())
    await async_eventually(lambda: asyncio.sleep(0, runtime.started))
    return run


def _books_closed(setup: Setup) -> dict[str, object]:
    """Nothing pending, the ledger adds up, and the final pass reported; returns its report."""
    assert not OrderIntent.objects.filter(state=OrderIntent.State.PENDING).exists()
    assert ledger_check(account_id=setup.account.pk).ok
    report = AuditEvent.objects.get(event="reconcile.stop")
    return dict(report.details)


def _outcomes(signals: list[Signal]) -> list[str]:
    by_key = dict(SignalOutcome.objects.values_list("signal_key", "outcome"))
    return [by_key.get(signal_key(signal), "") for signal in signals]


async def test_a_backlog_queued_behind_an_order_in_flight_is_stopped_and_the_final_pass_runs(settings) -> None:  # type: ignore[no-untyped-def]
    # Every order takes the paper broker 0.4 s; the backlog below needs 6 s or more one by one.
    settings.ORDERS_PAPER_LATENCY_S = 0.4
    setup = await database_sync_to_async(make_setup)()
    kinds = [SignalKind.ENTRY_LONG, SignalKind.EXIT_LONG] * 8
    signals = [make_signal(setup.strategy, kind) for kind in kinds]
    hubs, hub = OrdersHubs(), SignalHub()
    runtime = _runtime(hubs, hub, stop_timeout_s=5)
    run = await _started(runtime)

    hub.publish(signals)
    await async_eventually(lambda: database_sync_to_async(OrderIntent.objects.exists)())  # the first is in flight
    runtime.request_stop()
    assert await run == 0

    report = await database_sync_to_async(_books_closed)(setup)
    assert report["pending_intents"] == 0
    outcomes = await database_sync_to_async(_outcomes)(signals)
    # The entry in flight was placed; each signal whose turn came after the stop began is stopped, not traded.
    assert outcomes == [Outcome.PLACED] + [Outcome.STOPPED] * (len(signals) - 1)
    assert await database_sync_to_async(PaperOrder.objects.count)() == 1
    assert hubs.trade_executor.get().stop_report is not None


async def test_an_order_still_at_the_broker_when_the_drain_ends_is_cancelled_and_resolved_by_the_final_pass(
    settings,  # type: ignore[no-untyped-def]
) -> None:
    # The broker answers after the whole stop timeout: the drain cannot wait for it.
    settings.ORDERS_PAPER_LATENCY_S = 6.0
    setup = await database_sync_to_async(make_setup)()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    hubs, hub = OrdersHubs(), SignalHub()
    runtime = _runtime(hubs, hub, stop_timeout_s=5)
    run = await _started(runtime)

    hub.publish([signal])
    await async_eventually(lambda: database_sync_to_async(OrderIntent.objects.exists)())
    runtime.request_stop()
    assert await run == 0

    report = await database_sync_to_async(_books_closed)(setup)
    assert report["pending_intents"] == 0
    executor_report = hubs.trade_executor.get().stop_report
    assert executor_report is not None and executor_report.unfinished == [signal_key(signal)]
    # Cancelled before the broker took it: the final pass found no such order and released the reservation.
    intent = await database_sync_to_async(OrderIntent.objects.get)()
    assert intent.state == OrderIntent.State.ABANDONED
    assert await database_sync_to_async(_outcomes)([signal]) == [Outcome.ABANDONED]
    assert not await database_sync_to_async(PaperOrder.objects.exists)()


async def test_an_exit_sent_by_the_risk_watcher_after_the_stop_is_refused_with_its_reason(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    await database_sync_to_async(type(setup.setting).objects.filter(pk=setup.setting.pk).update)(stop_loss_pct=1)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("100", "50"),)))
    watcher = RiskWatcher(executor=executor, refresh_s=0.0)
    await watcher.consume(FeedData("sim", (tick("99.5", "1"),)))  # watched, nothing reached yet

    watcher.stop_firing()
    await executor.stop(1.0)
    await watcher.consume(FeedData("sim", (tick("90", "1"),)))  # a stop-loss tick after the stop
    await watcher.stop()
    assert watcher.triggers == 0

    # A producer that still calls the executor after its drain began is refused, recorded, with no intent.
    position = await database_sync_to_async(
        lambda: Position.objects.select_related("strategy", "instrument__feed", "account").get(state="OPEN")
    )()
    exit_order = await database_sync_to_async(exit_order_for)(position, action="risk-stop-loss", price=90)
    assert await executor.handle_plan(exit_order.signal, exit_order.plan) == Outcome.STOPPED
    assert await database_sync_to_async(_outcomes)([exit_order.signal]) == [Outcome.STOPPED]
    assert not await database_sync_to_async(OrderIntent.objects.filter(intent="EXIT").exists)()


async def test_a_signal_waiting_for_a_slot_when_the_drain_ends_is_stopped_not_started(settings) -> None:  # type: ignore[no-untyped-def]
    a = await database_sync_to_async(make_setup)()
    b = await database_sync_to_async(make_setup)()
    registry = BrokerRegistry(paper_latency_s=3.0)  # the first order outlives the stop
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(max_concurrent=1),  # the second signal waits for the first one's slot
    )
    hub = SignalHub()
    runner = asyncio.create_task(executor.run(hub.subscribe("trade-executor")))
    try:
        first, waiting = make_signal(a.strategy, SignalKind.ENTRY_LONG), make_signal(b.strategy, SignalKind.ENTRY_LONG)
        hub.publish([first, waiting])
        await async_eventually(lambda: database_sync_to_async(OrderIntent.objects.exists)())
        report = await executor.stop(0.5)
        assert report.unfinished == [signal_key(first)]
        # The cancelled first signal gave its slot back after the drain ended: the waiting one must not start.
        await async_eventually(lambda: database_sync_to_async(lambda: _outcomes([waiting])[0])(), timeout_s=5)
        assert await database_sync_to_async(_outcomes)([waiting]) == [Outcome.STOPPED]
    finally:
        runner.cancel()
    assert await database_sync_to_async(OrderIntent.objects.count)() == 1
