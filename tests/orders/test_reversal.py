"""A reversal (exit, then the opposite entry on the same tick) through the real executor on the paper broker."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from feeds.market import FeedData
from orders.brokers.paper import PaperFees, paper_match
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import Fill, Order, PaperOrder, Position, SignalOutcome, TradeSetting
from orders.models.accounts import Reversal
from orders.models.outcomes import Outcome
from orders.paper_matching import PaperMatcher
from orders.plans import signal_key
from orders.reconciliation import reconcile_account
from processor.signals import Signal, SignalKind
from tests.helpers import async_eventually
from tests.orders.factories import Setup, make_setup, make_signal, tick

pytestmark = pytest.mark.django_db(transaction=True)


def _executor(registry: BrokerRegistry, **config: object) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(**config),  # type: ignore[arg-type]
    )


async def _outcome(signal: Signal, account_id: int) -> str:
    return await database_sync_to_async(
        lambda: SignalOutcome.objects.get(signal_key=signal_key(signal), account_id=account_id).outcome
    )()


async def _waiting(signal: Signal, account_id: int) -> bool:
    rows = SignalOutcome.objects.filter(
        signal_key=signal_key(signal), account_id=account_id, outcome=Outcome.WAITING_FOR_EXIT
    )
    return await database_sync_to_async(rows.exists)()


async def _long_filled(executor: TradeExecutor, matcher: PaperMatcher) -> Setup:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    assert await database_sync_to_async(lambda: Position.objects.get().quantity)() > 0
    return setup


def _sides_by_state() -> list[tuple[str, str]]:
    return list(Position.objects.order_by("id").values_list("side", "state"))


async def test_the_opposite_entry_is_placed_once_the_exit_has_filled(
    registry: BrokerRegistry, matcher: PaperMatcher
) -> None:
    executor = _executor(registry)
    setup = await _long_filled(executor, matcher)
    exit_signal = make_signal(setup.strategy, SignalKind.EXIT_LONG, "51000")
    entry_signal = make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "51000")

    exit_done = asyncio.create_task(executor.handle(exit_signal))
    entry_done = asyncio.create_task(executor.handle(entry_signal))
    assert await exit_done == ["placed"]
    await async_eventually(lambda: _waiting(entry_signal, setup.account.pk))
    # The entry waits without the lease: another account and instrument trade meanwhile.
    other = await database_sync_to_async(make_setup)()
    assert await executor.handle(make_signal(other.strategy, SignalKind.ENTRY_LONG)) == ["placed"]

    await matcher.consume(FeedData("sim", (tick("51000", "1"),)))  # the exit fills
    assert await entry_done == ["placed"]
    assert await _outcome(exit_signal, setup.account.pk) == Outcome.PLACED
    assert await _outcome(entry_signal, setup.account.pk) == Outcome.PLACED

    def check() -> None:
        positions = list(Position.objects.filter(account=setup.account).order_by("id").values_list("side", "state"))
        assert positions == [("LONG", "CLOSED"), ("SHORT", "OPEN")]
        short_entry = Order.objects.get(account=setup.account, intent="ENTRY", side="SELL")
        assert short_entry.quantity == Order.objects.get(account=setup.account, intent="EXIT").quantity
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_an_exit_that_does_not_fill_in_time_records_exit_not_filled(
    registry: BrokerRegistry, matcher: PaperMatcher
) -> None:
    executor = _executor(registry, reversal_wait_s=0.3)
    setup = await _long_filled(executor, matcher)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "51000")) == ["placed"]
    entry_signal = make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "51000")
    assert await executor.handle(entry_signal) == ["exit_not_filled"]
    assert await _outcome(entry_signal, setup.account.pk) == Outcome.EXIT_NOT_FILLED
    # The only SELL the exchange saw is the exit: no short entry was sent.
    assert await database_sync_to_async(PaperOrder.objects.filter(side="SELL").count)() == 1


async def test_refuse_records_position_open_without_waiting(registry: BrokerRegistry, matcher: PaperMatcher) -> None:
    executor = _executor(registry, reversal_wait_s=600)
    setup = await _long_filled(executor, matcher)
    await database_sync_to_async(TradeSetting.objects.filter(pk=setup.setting.pk).update)(reversal=Reversal.REFUSE)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "51000")) == ["placed"]
    entry_signal = make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "51000")
    assert await executor.handle(entry_signal) == ["position_open"]
    assert await _outcome(entry_signal, setup.account.pk) == Outcome.POSITION_OPEN
    assert await database_sync_to_async(Order.objects.filter(intent="ENTRY", side="SELL").exists)() is False


async def test_a_reversal_completes_when_fills_arrive_only_through_reconciliation(registry: BrokerRegistry) -> None:
    # No PaperMatcher here: the paper exchange matches its own book, and the site learns
    # of the fills only from a reconciliation pass, as with a live broker.
    fees = PaperFees(taker_bps=4, maker_bps=2)
    executor = _executor(registry)
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    broker = registry.broker_for(account_id=setup.account.pk, venue="paper", mode="paper")

    async def exchange_trades(price: str) -> None:
        assert await database_sync_to_async(paper_match)([tick(price, "1")], fees=fees)
        await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")

    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")) == ["placed"]
    await exchange_trades("50000")
    exit_signal = make_signal(setup.strategy, SignalKind.EXIT_LONG, "51000")
    entry_signal = make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "51000")
    exit_done = asyncio.create_task(executor.handle(exit_signal))
    entry_done = asyncio.create_task(executor.handle(entry_signal))
    assert await exit_done == ["placed"]
    await async_eventually(lambda: _waiting(entry_signal, setup.account.pk))

    await exchange_trades("51000")  # the exit's fill, booked by reconciliation
    assert await entry_done == ["placed"]

    def check() -> None:
        assert _sides_by_state() == [("LONG", "CLOSED"), ("SHORT", "OPEN")]
        assert Fill.objects.get(order__intent="EXIT").via_reconciliation
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_a_waiting_reversal_does_not_hold_up_the_signals_behind_it(
    registry: BrokerRegistry, matcher: PaperMatcher
) -> None:
    executor = _executor(registry, max_concurrent=1)  # one signal at a time, unless it waits
    setup = await _long_filled(executor, matcher)
    other = await database_sync_to_async(make_setup)()
    queue: asyncio.Queue[Signal] = asyncio.Queue()
    runner = asyncio.create_task(executor.run(queue))
    try:
        exit_signal = make_signal(setup.strategy, SignalKind.EXIT_LONG, "51000")
        entry_signal = make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "51000")
        behind = make_signal(other.strategy, SignalKind.ENTRY_LONG, "51000")
        for signal in (exit_signal, entry_signal, behind):
            queue.put_nowait(signal)
        await async_eventually(lambda: _waiting(entry_signal, setup.account.pk))

        async def traded_behind() -> bool:
            return await database_sync_to_async(
                SignalOutcome.objects.filter(signal_key=signal_key(behind), outcome=Outcome.PLACED).exists
            )()

        await async_eventually(traded_behind)  # placed while the reversal still waits
        assert await _waiting(entry_signal, setup.account.pk)
        await matcher.consume(FeedData("sim", (tick("51000", "1"),)))

        async def reversed_() -> bool:
            return await _outcome(entry_signal, setup.account.pk) == Outcome.PLACED

        await async_eventually(reversed_)
    finally:
        runner.cancel()
