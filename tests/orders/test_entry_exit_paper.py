"""The ENTRY and EXIT flows on the paper broker, down to the ledger."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from feeds.market import FeedData, parse_fixed
from orders.executor import TradeExecutor
from orders.ledger import ledger_check
from orders.models import AuditEvent, CapitalLedger, LedgerEntry, Order, OrderIntent, PaperOrder, Position
from orders.models.lifecycle import OrderStatus
from orders.paper_matching import PaperMatcher
from orders.sync import order_sync
from processor.signals import SignalKind
from tests.orders.factories import make_setup, make_signal, tick

pytestmark = pytest.mark.django_db(transaction=True)


def _ledger(account_id: int) -> CapitalLedger:
    return CapitalLedger.objects.get(account_id=account_id)


async def test_entry_reserves_capital_places_at_the_broker_and_persists_the_lifecycle(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")

    assert await executor.handle(signal) == ["placed"]

    def check() -> None:
        order = Order.objects.get()
        assert order.status == OrderStatus.NEW
        assert order.client_order_id.startswith(f"ts-{setup.account.pk}-")
        assert PaperOrder.objects.get().client_order_id == order.client_order_id
        assert OrderIntent.objects.get().state == OrderIntent.State.PLACED
        ledger = _ledger(setup.account.pk)
        # 0.01 * 50000 = 500, + 0.5% market buffer = 502.5, + 0.1% fee = 503.0025
        assert ledger.reserved_for_orders == order.reserved == parse_fixed("503.0025")
        assert ledger.available == parse_fixed("10000") - parse_fixed("503.0025")
        assert Position.objects.get().quantity == 0
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_the_same_signal_twice_places_one_order(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    assert await executor.handle(signal) == ["placed"]
    assert await executor.handle(signal) == ["duplicate"]
    assert await database_sync_to_async(PaperOrder.objects.count)() == 1


async def test_fill_then_exit_realizes_pnl_and_closes_the_position(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000"))
    await matcher.consume(FeedData("sim", (tick("50010", "1"),)))

    def after_entry_fill() -> None:
        order = Order.objects.get()
        assert order.status == OrderStatus.FILLED
        position = Position.objects.get()
        assert position.quantity == parse_fixed("0.01")
        assert position.cost == parse_fixed("500.1")
        ledger = _ledger(setup.account.pk)
        assert ledger.reserved_for_orders == 0
        assert ledger.reserved_for_positions == parse_fixed("500.1")
        # taker fee 4 bps of 500.1 = 0.20004
        assert ledger.realized_pnl == -parse_fixed("0.20004")
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(after_entry_fill)()

    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "51000")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("51000", "1"),)))

    def after_exit_fill() -> None:
        position = Position.objects.get()
        assert position.state == Position.State.CLOSED and position.quantity == 0
        ledger = _ledger(setup.account.pk)
        assert ledger.reserved_for_positions == 0 and ledger.reserved_for_orders == 0
        # gross (510 - 500.1) = 9.9, fees 0.20004 + 0.204
        assert ledger.realized_pnl == parse_fixed("9.9") - parse_fixed("0.20004") - parse_fixed("0.204")
        assert ledger.available == parse_fixed("10000") + ledger.realized_pnl
        assert ledger_check(account_id=setup.account.pk).ok
        kinds = list(LedgerEntry.objects.values_list("kind", flat=True))
        assert kinds == ["allocate", "reserve", "entry_fill", "reserve", "exit_fill"]

    await database_sync_to_async(after_exit_fill)()


async def test_partial_fills_then_cancel_release_exactly_the_unfilled_reservation(
    executor: TradeExecutor, matcher: PaperMatcher, registry
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", order_type="LIMIT", capital="100000")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100"))
    reserved = await database_sync_to_async(lambda: _ledger(setup.account.pk).reserved_for_orders)()
    await matcher.consume(FeedData("sim", (tick("99.9", "0.3"),)))
    await matcher.consume(FeedData("sim", (tick("100.5", "5"),)))  # above the limit: no fill
    await matcher.consume(FeedData("sim", (tick("100", "0.25"),)))

    order = await database_sync_to_async(Order.objects.get)()
    assert order.status == OrderStatus.PARTIALLY_FILLED
    assert order.filled_quantity == parse_fixed("0.55")
    released_by_fills = order.reserve_released
    assert order.reserved == reserved - released_by_fills

    broker = registry.broker_for(account_id=setup.account.pk, venue="paper", mode="paper")
    await broker.cancel_order(
        client_order_id=order.client_order_id, exchange_order_id=order.exchange_order_id, symbol="BTCUSDT"
    )
    await order_sync(broker=broker, account_id=setup.account.pk, order=order, symbol="BTCUSDT")

    def check() -> None:
        order_after = Order.objects.get()
        assert order_after.status == OrderStatus.CANCELED
        assert order_after.reserved == 0
        release = LedgerEntry.objects.get(kind="release")
        assert -release.delta_reserved_for_orders == reserved - released_by_fills
        ledger = _ledger(setup.account.pk)
        assert ledger.reserved_for_orders == 0
        assert ledger.reserved_for_positions == parse_fixed("0.55") * 100  # 0.55 @ 100 limit
        assert Position.objects.get().quantity == parse_fixed("0.55")
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_entry_larger_than_available_capital_is_refused_without_an_order(executor: TradeExecutor) -> None:
    setup = await database_sync_to_async(make_setup)(capital="100", quantity="0.01")
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")) == [
        "insufficient_capital"
    ]

    def check() -> None:
        assert not PaperOrder.objects.exists() and not Order.objects.exists()
        assert AuditEvent.objects.filter(event="signal.insufficient_capital").exists()
        assert _ledger(setup.account.pk).reserved_for_orders == 0

    await database_sync_to_async(check)()


async def test_signal_without_trade_setting_is_recorded_not_raised(executor: TradeExecutor) -> None:
    from tests.orders.factories import make_strategy

    strategy = await database_sync_to_async(make_strategy)()
    assert await executor.handle(make_signal(strategy, SignalKind.ENTRY_LONG)) == ["no_trade_setting"]
    assert await database_sync_to_async(AuditEvent.objects.filter(event="signal.no_trade_setting").exists)()


async def test_exit_cancels_the_working_entry_and_closes_only_what_filled(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", order_type="LIMIT", capital="100000")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100"))
    await matcher.consume(FeedData("sim", (tick("100", "0.4"),)))
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "101")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("101", "5"),)))

    def check() -> None:
        entry, exit_order = Order.objects.order_by("id")
        assert entry.status == OrderStatus.CANCELED and entry.filled_quantity == parse_fixed("0.4")
        assert exit_order.quantity == parse_fixed("0.4") and exit_order.status == OrderStatus.FILLED
        position = Position.objects.get()
        assert position.state == Position.State.CLOSED
        ledger = _ledger(setup.account.pk)
        assert ledger.reserved_for_orders == ledger.reserved_for_positions == 0
        # 0.4 bought at 100 (maker 2 bps), sold at 101 (taker 4 bps)
        fees = parse_fixed("0.008") + parse_fixed("0.01616")
        assert ledger.realized_pnl == parse_fixed("0.4") - fees
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_a_short_gains_when_the_price_falls(executor: TradeExecutor, matcher: PaperMatcher) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "50000"))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_SHORT, "49000"))
    await matcher.consume(FeedData("sim", (tick("49000", "1"),)))

    def check() -> None:
        entry, exit_order = Order.objects.order_by("id")
        assert (entry.side, exit_order.side) == ("SELL", "BUY")
        ledger = _ledger(setup.account.pk)
        fees = parse_fixed("0.2") + parse_fixed("0.196")
        assert ledger.realized_pnl == parse_fixed("10") - fees
        assert Position.objects.get().state == Position.State.CLOSED
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()
