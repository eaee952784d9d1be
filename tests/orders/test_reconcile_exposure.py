"""Reconciliation compares net exposure per (account, symbol) with the broker's positions.

A difference a fill of ours explains is booked through the fill handler; any other is
raised to an operator: audit event, metric, the numbers on health, and the account's
entries halted by its kill switch. A pass never reports 0 corrections while the broker
holds exposure the site does not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from prometheus_client import REGISTRY

from core.models import ComponentHealth
from dashboard.halts import entries_halt_by_reconciliation
from dashboard.models import ControlAudit, KillSwitch
from dashboard.selectors import entries_halted
from feeds.market import FeedData, parse_fixed
from orders.brokers.base import OrderRequest
from orders.brokers.binance_usdm import BinanceUsdmBroker
from orders.brokers.registry import BrokerRegistry
from orders.brokers.upstox import UpstoxBroker
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import AuditEvent, Fill, Order, PaperFill, PaperOrder, Position
from orders.paper_matching import PaperMatcher
from orders.reconciliation import reconcile_account
from orders.services import ReconciliationNeedsOperator, reconcile_all, summarize
from orders.tasks import reconcile_accounts
from processor.signals import SignalKind
from tests.fakes.brokers.binance_usdm_orders import API_KEY, API_SECRET, FakeBinanceOrders
from tests.fakes.brokers.upstox_orders import FakeUpstoxOrders
from tests.orders.factories import make_instrument, make_setup, make_signal, tick
from tests.orders.test_upstox_broker import StaticTokens

pytestmark = pytest.mark.django_db(transaction=True)


def _exposure_mismatches() -> float:
    return REGISTRY.get_sample_value("orders_reconciliation_exposure_mismatches_total") or 0.0


def _sell_outside_the_site(account_key: str, quantity: str, price: str = "50000") -> None:
    """A fill in the paper book from an order the site never made (placed by hand at the venue)."""
    now = time.time_ns()
    order = PaperOrder.objects.create(
        account_key=account_key,
        client_order_id="by-hand-1",
        symbol="BTCUSDT",
        side="SELL",
        order_type="MARKET",
        quantity=parse_fixed(quantity),
        status="FILLED",
        filled_quantity=parse_fixed(quantity),
        created_ns=now,
        updated_ns=now,
    )
    PaperFill.objects.create(order=order, quantity=parse_fixed(quantity), price=parse_fixed(price), fee=0, ts_event=now)


async def test_exposure_the_site_does_not_hold_is_raised_and_halts_the_accounts_entries(
    registry: BrokerRegistry, executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000"))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    await database_sync_to_async(_sell_outside_the_site)(str(setup.account.pk), "0.005")
    before = _exposure_mismatches()

    [result] = await reconcile_all(registry=registry, halt_entries=entries_halt_by_reconciliation)

    assert result.corrections == {"ExposureMismatch": 1}
    [mismatch] = result.exposure_mismatches
    assert (mismatch.symbol, mismatch.site, mismatch.broker) == ("BTCUSDT", parse_fixed("0.01"), parse_fixed("0.005"))
    assert _exposure_mismatches() == before + 1
    assert "BTCUSDT: site net 0.01, broker net 0.005" in summarize([result])

    def raised() -> None:
        event = AuditEvent.objects.get(event="reconcile.exposure_mismatch")
        assert event.account_id == setup.account.pk
        assert event.details == {"symbol": "BTCUSDT", "site": "0.01", "broker": "0.005"}
        switch = KillSwitch.objects.get(account=setup.account)
        assert switch.engaged and switch.changed_by is None
        assert "exposure mismatch BTCUSDT: site net 0.01, broker net 0.005" in switch.reason
        assert "exposure mismatch" in (entries_halted(account_id=setup.account.pk) or "")
        audit = ControlAudit.objects.get(action="kill_switch.engage", account=setup.account)
        assert audit.actor is None and audit.actor_name == "reconciliation"

    await database_sync_to_async(raised)()
    # The halt reaches the executor: no new entry on this account until a person releases it.
    gated = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        entry_gate=lambda account_id: entries_halted(account_id=account_id),
    )
    other = await database_sync_to_async(make_instrument)("sim", "ETHUSDT")
    await database_sync_to_async(setup.strategy.instruments.add)(other)
    assert await gated.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "3000", symbol="ETHUSDT")) == [
        "halted"
    ]


async def test_the_periodic_job_reports_the_mismatch_with_its_numbers_as_degraded(
    executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000"))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    await database_sync_to_async(_sell_outside_the_site)(str(setup.account.pk), "0.01")

    with pytest.raises(ReconciliationNeedsOperator):
        await database_sync_to_async(reconcile_accounts)()

    health = await database_sync_to_async(ComponentHealth.objects.get)(component="job:orders-reconcile")
    assert health.status == "DEGRADED"
    assert "BTCUSDT: site net 0.01, broker net 0" in health.reason
    assert await database_sync_to_async(lambda: KillSwitch.objects.get(account=setup.account).engaged)()


async def test_matching_exposure_is_no_correction(
    executor: TradeExecutor, matcher: PaperMatcher, registry: BrokerRegistry
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_SHORT, "50000"))
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    assert await database_sync_to_async(lambda: Position.objects.get().quantity)() == parse_fixed("0.01")

    [result] = await reconcile_all(registry=registry, halt_entries=entries_halt_by_reconciliation)

    assert result.corrections == {} and result.exposure_mismatches == ()
    assert not await database_sync_to_async(KillSwitch.objects.filter(engaged=True).exists)()


@pytest.fixture
def binance() -> Iterator[FakeBinanceOrders]:
    with FakeBinanceOrders() as fake:
        yield fake


def _binance(venue: FakeBinanceOrders) -> BinanceUsdmBroker:
    return BinanceUsdmBroker(api_key=API_KEY, secret=API_SECRET, demo=False, fapi_url=venue.base_url, timeout_s=5)


async def test_a_late_fill_on_an_ended_order_explains_the_difference_and_is_booked(binance: FakeBinanceOrders) -> None:
    setup = await database_sync_to_async(make_setup)(
        broker="binance-usdm", mode="sandbox", quantity="0.01", order_type="LIMIT"
    )
    broker = _binance(binance)
    try:
        executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
        assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")) == ["placed"]
        [client_id] = binance.orders
        binance.execute(client_id, "0.004", "50000")
        binance.orders[client_id].status = "CANCELED"
        first = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
        assert first.corrections == {"ApplyFill": 1, "UpdateStatus": 1}
        # The venue matched more of the order before the cancel took: a fill the site missed.
        binance.execute(client_id, "0.002", "50000")
        binance.orders[client_id].status = "CANCELED"
        assert binance.net_position("BTCUSDT") == Decimal("0.006")

        second = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")

        assert second.corrections == {"ApplyFill": 1} and second.exposure_mismatches == ()

        def booked() -> None:
            assert Position.objects.get().quantity == parse_fixed("0.006")
            assert Fill.objects.filter(order=Order.objects.get(), via_reconciliation=True).count() == 2
            assert ledger_check(account_id=setup.account.pk).ok

        await database_sync_to_async(booked)()
    finally:
        await broker.close()


async def test_a_venue_position_in_a_symbol_the_site_never_traded_is_a_mismatch(binance: FakeBinanceOrders) -> None:
    setup = await database_sync_to_async(make_setup)(broker="binance-usdm", mode="sandbox")
    broker = _binance(binance)
    try:
        binance.trade_outside("ETHUSDT", "-0.5")
        result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
    finally:
        await broker.close()
    [mismatch] = result.exposure_mismatches
    assert (mismatch.symbol, mismatch.site, mismatch.broker) == ("ETHUSDT", 0, -parse_fixed("0.5"))
    assert result.corrections == {"ExposureMismatch": 1}


async def test_an_unreadable_positions_endpoint_degrades_that_step_only(binance: FakeBinanceOrders) -> None:
    setup = await database_sync_to_async(make_setup)(broker="binance-usdm", mode="sandbox")
    broker = _binance(binance)
    try:
        binance.unavailable.add("positionRisk")
        result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
    finally:
        await broker.close()
    assert set(result.degraded_steps) == {"positions"}
    assert result.exposure_mismatches == () and not result.skipped
    assert "broker reads unavailable" in summarize([result])


async def test_upstox_positions_are_the_net_quantity_of_the_product_the_site_trades() -> None:
    with FakeUpstoxOrders({"good-token"}) as venue:
        broker = UpstoxBroker(
            tokens=StaticTokens("good-token"),
            order_url=venue.base_url,
            api_url=venue.base_url,
            sandbox=False,
            timeout_s=5,
        )
        try:
            placed = await broker.place_order(
                OrderRequest("ts-1-a", "NSE_EQ|INE848E01016", "BUY", "MARKET", parse_fixed("10"), None)
            )
            venue.execute(placed.exchange_order_id, 10, "82.5")
            sold = await broker.place_order(
                OrderRequest("ts-1-b", "NSE_EQ|INE848E01016", "SELL", "MARKET", parse_fixed("4"), None)
            )
            venue.execute(sold.exchange_order_id, 4, "83")
            [position] = await broker.positions()
        finally:
            await broker.close()
    assert (position.symbol, position.quantity) == ("NSE_EQ|INE848E01016", parse_fixed("6"))


# ---- the pure pieces ----------------------------------------------------------------


def test_hedge_mode_rows_are_summed_into_one_signed_net_and_flat_symbols_are_dropped() -> None:
    from orders.brokers.binance_usdm import parse_position_risk

    rows = [
        {"symbol": "BTCUSDT", "positionSide": "LONG", "positionAmt": "0.500"},
        {"symbol": "BTCUSDT", "positionSide": "SHORT", "positionAmt": "-0.200"},
        {"symbol": "ETHUSDT", "positionSide": "BOTH", "positionAmt": "0.000"},
    ]
    [position] = parse_position_risk(rows)
    assert (position.symbol, position.quantity) == ("BTCUSDT", parse_fixed("0.3"))


def test_upstox_positions_of_another_product_are_not_the_sites_exposure() -> None:
    from orders.brokers.upstox import parse_position_rows

    rows = [
        {"instrument_token": NHPC_TOKEN, "product": "D", "quantity": 50},
        {"instrument_token": NHPC_TOKEN, "product": "I", "quantity": -3},
    ]
    [position] = parse_position_rows(rows, product="I")
    assert (position.symbol, position.quantity) == (NHPC_TOKEN, -parse_fixed("3"))


def test_a_busy_symbol_is_not_compared_but_one_the_site_never_traded_always_is() -> None:
    from orders.brokers.base import BrokerPosition
    from orders.exposure import SymbolBook, exposure_diff

    site = {
        "BTCUSDT": SymbolBook("BTCUSDT", ((1, 1),), parse_fixed("1"), busy=True),
        "ETHUSDT": SymbolBook("ETHUSDT", ((1, 2),), parse_fixed("2"), busy=False),
    }
    broker = [BrokerPosition("BTCUSDT", parse_fixed("0.5")), BrokerPosition("SOLUSDT", parse_fixed("4"))]
    mismatches = exposure_diff(site, broker, compared={"ETHUSDT"})
    assert [(m.symbol, m.site, m.broker) for m in mismatches] == [
        ("ETHUSDT", parse_fixed("2"), 0),
        ("SOLUSDT", 0, parse_fixed("4")),
    ]


NHPC_TOKEN = "NSE_EQ|INE848E01016"


async def test_accounts_on_one_venue_key_are_compared_together_and_halted_together(binance: FakeBinanceOrders) -> None:
    first = await database_sync_to_async(make_setup)(broker="binance-usdm", mode="sandbox", quantity="0.01")
    second = await database_sync_to_async(make_setup)(
        broker="binance-usdm", mode="sandbox", quantity="0.02", strategy=first.strategy, instrument=first.instrument
    )
    broker = _binance(binance)
    registry = BrokerRegistry(factories={("binance-usdm", "sandbox"): lambda: broker})
    try:
        executor = TradeExecutor(broker_for=lambda plan: broker, config=ExecutorConfig())
        assert await executor.handle(make_signal(first.strategy, SignalKind.ENTRY_LONG, "50000")) == [
            "placed",
            "placed",
        ]
        for client_id, order in binance.orders.items():
            binance.execute(client_id, str(order.quantity), "50000")
        # The venue holds 0.03 for the key; each account holds its own share of it.
        results = await reconcile_all(registry=registry, halt_entries=entries_halt_by_reconciliation)
        assert [r.exposure_mismatches for r in results] == [(), ()]
        assert sum(r.corrections.get("ApplyFill", 0) for r in results) == 2

        binance.trade_outside("BTCUSDT", "0.005")
        results = await reconcile_all(registry=registry, halt_entries=entries_halt_by_reconciliation)
    finally:
        await broker.close()
    [mismatch] = [m for r in results for m in r.exposure_mismatches]
    assert (mismatch.site, mismatch.broker) == (parse_fixed("0.03"), parse_fixed("0.035"))
    engaged = await database_sync_to_async(
        lambda: set(KillSwitch.objects.filter(engaged=True).values_list("account_id", flat=True))
    )()
    assert engaged == {first.account.pk, second.account.pk}
