"""The ccxt Binance USD-M broker against a local fake of the signed order endpoints."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from feeds.market import parse_fixed
from orders.brokers.base import BrokerUnavailable, DuplicateClientOrderId, OrderNotFound, OrderRequest
from orders.brokers.binance_usdm import BinanceUsdmBroker
from orders.models.lifecycle import OrderStatus
from tests.fakes.brokers.binance_usdm_orders import API_KEY, API_SECRET, FakeBinanceOrders


@pytest.fixture
def venue() -> Iterator[FakeBinanceOrders]:
    with FakeBinanceOrders() as fake:
        yield fake


def _broker(venue: FakeBinanceOrders) -> BinanceUsdmBroker:
    return BinanceUsdmBroker(api_key=API_KEY, secret=API_SECRET, demo=True, fapi_url=venue.base_url, timeout_s=5)


def _request(cid: str = "ts-1-abc", order_type: str = "LIMIT") -> OrderRequest:
    return OrderRequest(
        client_order_id=cid,
        symbol="BTCUSDT",
        side="BUY",
        order_type=order_type,
        quantity=parse_fixed("0.012"),
        price=parse_fixed("96712.4") if order_type == "LIMIT" else None,
    )


async def test_place_sends_exact_strings_and_reads_the_order_back(venue: FakeBinanceOrders) -> None:
    broker = _broker(venue)
    try:
        placed = await broker.place_order(_request())
        assert placed.status == OrderStatus.SUBMITTED
        assert placed.quantity == parse_fixed("0.012") and placed.price == parse_fixed("96712.4")
        assert str(venue.orders["ts-1-abc"].quantity) == "0.012"
        assert str(venue.orders["ts-1-abc"].price) == "96712.4"
        fetched = await broker.fetch_order(client_order_id="ts-1-abc", symbol="BTCUSDT")
        assert fetched.exchange_order_id == placed.exchange_order_id
    finally:
        await broker.close()


async def test_duplicate_client_id_and_unknown_orders_are_told_apart(venue: FakeBinanceOrders) -> None:
    broker = _broker(venue)
    try:
        await broker.place_order(_request())
        with pytest.raises(DuplicateClientOrderId):
            await broker.place_order(_request())
        with pytest.raises(OrderNotFound):
            await broker.fetch_order(client_order_id="ts-1-never", symbol="BTCUSDT")
        assert venue.place_requests == 2 and len(venue.orders) == 1
    finally:
        await broker.close()


async def test_a_5xx_on_place_is_an_unknown_outcome(venue: FakeBinanceOrders) -> None:
    venue.fail_places = 1
    broker = _broker(venue)
    try:
        with pytest.raises(BrokerUnavailable):
            await broker.place_order(_request())
    finally:
        await broker.close()


async def test_fills_and_cancel_report_exact_numbers(venue: FakeBinanceOrders) -> None:
    broker = _broker(venue)
    try:
        placed = await broker.place_order(_request())
        venue.execute("ts-1-abc", "0.005", "96712.4", commission="0.19342480")
        [fill] = await broker.fills(symbols=["BTCUSDT"], since_ns=0)
        assert fill.exchange_order_id == placed.exchange_order_id
        assert fill.quantity == parse_fixed("0.005") and fill.fee == parse_fixed("0.1934248")
        assert fill.exchange_trade_id.startswith("BTCUSDT:")
        [working] = await broker.open_orders(symbols=[])
        assert working.status == OrderStatus.PARTIALLY_FILLED
        canceled = await broker.cancel_order(
            client_order_id="ts-1-abc", exchange_order_id=placed.exchange_order_id, symbol="BTCUSDT"
        )
        assert canceled.status == OrderStatus.CANCELED and canceled.filled_quantity == parse_fixed("0.005")
    finally:
        await broker.close()


@pytest.mark.django_db(transaction=True)
async def test_entry_on_binance_then_fills_and_cancel_found_by_reconciliation(venue: FakeBinanceOrders) -> None:
    from channels.db import database_sync_to_async

    from orders.executor import ExecutorConfig, TradeExecutor
    from orders.ledger import ledger_check
    from orders.models import CapitalLedger, Fill, Order
    from orders.reconciliation import reconcile_account
    from processor.signals import SignalKind
    from tests.orders.factories import make_setup, make_signal

    setup = await database_sync_to_async(make_setup)(
        broker="binance-usdm", mode="sandbox", quantity="0.01", order_type="LIMIT"
    )
    broker = _broker(venue)
    try:
        executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
        assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000.05")) == ["placed"]
        [client_id] = venue.orders
        assert str(venue.orders[client_id].price) == "50000"  # a buy limit rounds down to the 0.1 tick
        venue.execute(client_id, "0.004", "50000", commission="0.08")
        venue.orders[client_id].status = "CANCELED"
        result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
        assert result.corrections == {"ApplyFill": 1, "UpdateStatus": 1}
        again = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
        assert again.corrections == {}

        def check() -> None:
            order = Order.objects.get()
            assert order.status == "CANCELED" and order.filled_quantity == parse_fixed("0.004")
            assert Fill.objects.get().fee == parse_fixed("0.08")
            ledger = CapitalLedger.objects.get(account=setup.account)
            assert ledger.reserved_for_orders == 0 and ledger.reserved_for_positions == parse_fixed("200")
            assert ledger_check(account_id=setup.account.pk).ok

        await database_sync_to_async(check)()
    finally:
        await broker.close()
