"""A price of 0.000000000012 keeps every digit on its way: parsed from the venue's frame,
folded by the processor into a signal, recorded as a tick, traded on the paper broker,
booked in the ledger, and shown by the API and the dashboard as that decimal string."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from decimal import Decimal

import orjson
import pytest
from channels.db import database_sync_to_async
from django.test import Client

from feeds.market import FeedData, MarketData, parse_fixed
from feeds.models import Instrument, Tick
from feeds.recording.database_writer import writer_for_database
from feeds.venues.simulated import VENUE as SIMULATED
from orders.brokers.paper import PaperFees
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import CapitalLedger, Fill, Order, Position
from orders.paper_matching import PaperMatcher
from processor.processor import Processor
from processor.services import strategy_events_persist
from processor.signals import SignalKind
from tests.orders.factories import make_instrument, make_setup
from tests.processor.factories import RecordingSink, batch, spec, turn
from tests.processor.scripted import KIND

pytestmark = pytest.mark.django_db(transaction=True)

PRICE = "0.000000000012"
QUANTITY = "1000000"


def _frame(price: str, quantity: str, trade_id: int) -> bytes:
    return orjson.dumps(
        {
            "e": "trade",
            "s": "PEPEUSDT",
            "t": trade_id,
            "p": price,
            "q": quantity,
            "T": time.time_ns() // 1_000_000,
            "m": False,
        }
    )


def _pepe() -> Instrument:
    instrument = make_instrument(symbol="PEPEUSDT")
    instrument.tick_size, instrument.lot_size = Decimal("0.000000000001"), Decimal("1")
    instrument.save()
    return instrument


async def _fold_and_trade(setup, tick: MarketData) -> None:  # type: ignore[no-untyped-def]
    sink = RecordingSink()
    processor = Processor(sink=sink)
    processor.start()
    processor.reconcile([spec(setup.strategy.pk, ["PEPEUSDT"], kind=KIND)])
    await processor.settled()
    await turn()
    # The scripted strategy goes long on a tick whose trade id says "long".
    await processor.consume(batch(dataclasses.replace(tick, trade_id="long")))
    await turn()
    [signal] = sink.signal_log
    assert (signal.kind, signal.price) == (SignalKind.ENTRY_LONG, parse_fixed(PRICE))
    await database_sync_to_async(strategy_events_persist)(
        signals=list(zip(sink.signal_log, sink.signal_outputs)), outputs=[]
    )

    matcher = PaperMatcher(fees=PaperFees(taker_bps=4, maker_bps=2), refresh_s=0.0)
    registry = BrokerRegistry(on_paper_place=matcher.order_placed)
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
    )
    assert await executor.handle(dataclasses.replace(signal, strategy_name=setup.strategy.name)) == ["placed"]
    await matcher.consume(FeedData("sim", (dataclasses.replace(tick, ts_recv=time.time_ns() + 10**9),)))


def test_a_twelve_place_price_is_exact_from_the_frame_to_the_api_and_the_dashboard() -> None:
    instrument = _pepe()
    setup = make_setup(capital="100", quantity=QUANTITY, instrument=instrument)

    # Parse: the venue's decimal text, all 12 places.
    [tick] = SIMULATED.parse(_frame(PRICE, QUANTITY, 1), time.time_ns())
    assert (tick.price, tick.volume) == (parse_fixed(PRICE), parse_fixed(QUANTITY)) == (12, 10**18)

    # Recorder: the database's own writer (bulk insert on SQLite, COPY on PostgreSQL).
    writer_for_database().write(
        [(instrument.pk, tick.ts_event, tick.ts_recv, tick.price, tick.volume, None, "1", "buy")], []
    )
    assert Tick.objects.values_list("price", "volume").get() == (12, 10**18)

    # Processor, signal store, executor, paper fill.
    asyncio.run(_fold_and_trade(setup, tick))
    order, fill, position = Order.objects.get(), Fill.objects.get(), Position.objects.get()
    assert (order.price, fill.price, fill.quantity, position.quantity) == (12, 12, 10**18, 10**18)
    assert position.cost == 12 * 10**6  # 1,000,000 x 0.000000000012 = 0.000012, exactly
    report = ledger_check(account_id=setup.account.pk)
    assert report.ok, report.problems
    ledger = CapitalLedger.objects.get(account=setup.account)
    # 4 bp of 0.000012 is 0.0000000048: ten places, charged to the ledger exactly.
    assert fill.fee == parse_fixed("0.0000000048") and ledger.realized_pnl == -fill.fee

    client = Client()
    client.force_login(setup.account.owner)
    (signal,) = client.get("/api/signals/").json()["results"]
    assert signal["price"] == PRICE
    (api_order,) = client.get("/api/orders/").json()["results"]
    assert (api_order["price"], api_order["quantity"]) == (PRICE, QUANTITY)
    (api_fill,) = client.get("/api/fills/").json()["results"]
    assert (api_fill["price"], api_fill["fee"]) == (PRICE, "0.0000000048")
    (api_position,) = client.get("/api/positions/").json()["results"]
    assert api_position["cost"] == "0.000012"
    (account,) = client.get("/api/accounts/").json()["results"]
    assert (account["ledger"]["reserved_for_positions"], account["ledger"]["realized_pnl"]) == (
        "0.000012",
        "-0.0000000048",
    )

    signals_panel = client.get("/dashboard/panels/signals/").content.decode()
    assert f">{PRICE}<" in signals_panel
    trading_panel = client.get("/dashboard/panels/trading/").content.decode()
    assert f">{PRICE}<" in trading_panel  # the fill's price


def test_a_frame_beyond_the_range_is_a_parse_error_not_a_truncated_number() -> None:
    from feeds.venues.base import ParseError

    for price in ("0.0000000000001", "1000000000000000000", "1" * 60):
        with pytest.raises(ParseError) as refused:
            SIMULATED.parse(_frame(price, QUANTITY, 2), time.time_ns())
        assert refused.value.reason == "number"


def test_a_capital_or_quantity_the_database_would_round_is_refused_by_validation() -> None:
    from django.core.exceptions import ValidationError
    from django.db import connection

    from orders.models import Account

    setup = make_setup()
    account = Account(
        owner=setup.account.owner, name="wide", broker="paper", allocated_capital=Decimal("1000000.000000000001")
    )  # 19 significant digits
    setting = setup.setting
    setting.quantity = Decimal("1234.000000000001")
    if connection.vendor == "sqlite":  # a decimal column there keeps 15 significant digits
        with pytest.raises(ValidationError, match="SQLite keeps 15"):
            account.full_clean()
        with pytest.raises(ValidationError, match="SQLite keeps 15"):
            setting.full_clean()
    else:
        account.full_clean()
        setting.full_clean()
        account.save()
        setting.save()
        assert Account.objects.get(pk=account.pk).allocated_capital == Decimal("1000000.000000000001")
        setting.refresh_from_db()
        assert setting.quantity == Decimal("1234.000000000001")
