"""Factories for orders tests: a user with an account on a strategy, signals, ticks."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from core.fixed_point import SCALE
from feeds.market import FeedData, MarketData, parse_fixed
from feeds.models import Feed, Instrument, MarketType
from orders.brokers.paper import PaperFees
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_open
from orders.lifecycle import IntentSpec
from orders.models import Account, TradeSetting
from orders.paper_matching import PaperMatcher
from processor.models import Strategy, StrategySignal
from processor.signals import Signal, SignalKind

_seq = itertools.count(1)


@dataclass
class Setup:
    account: Account
    strategy: Strategy
    instrument: Instrument
    setting: TradeSetting


def make_instrument(feed_name: str = "sim", symbol: str = "BTCUSDT", *, venue: str = "simulated") -> Instrument:
    feed, _ = Feed.objects.get_or_create(
        name=feed_name,
        defaults={
            "venue": venue,
            "market_type": MarketType.SIMULATED if venue == "simulated" else MarketType.PERPETUAL,
        },
    )
    instrument, _ = Instrument.objects.get_or_create(
        feed=feed,
        venue_symbol=symbol,
        defaults={"symbol": symbol, "tick_size": Decimal("0.1"), "lot_size": Decimal("0.001")},
    )
    return instrument


def make_strategy(name: str | None = None) -> Strategy:
    return Strategy.objects.create(
        name=name or f"ema-{next(_seq)}", kind="ema", params={"timeframe_s": 60, "fast": 3, "slow": 5}
    )


def make_setup(
    *,
    username: str | None = None,
    capital: str = "10000",
    quantity: str = "0.01",
    broker: str = "paper",
    mode: str = "paper",
    order_type: str = "MARKET",
    strategy: Strategy | None = None,
    instrument: Instrument | None = None,
) -> Setup:
    user = get_user_model().objects.create_user(username=username or f"trader{next(_seq)}", password="pw-123456")
    account = Account.objects.create(owner=user, name="main", broker=broker, allocated_capital=Decimal(capital))
    ledger_open(account=account)
    strategy = strategy or make_strategy()
    instrument = instrument or make_instrument()
    setting = TradeSetting.objects.create(
        strategy=strategy, account=account, quantity=Decimal(quantity), mode=mode, order_type=order_type
    )
    return Setup(account, strategy, instrument, setting)


def make_signal(
    strategy: Strategy,
    kind: SignalKind,
    price: str = "50000",
    *,
    symbol: str = "BTCUSDT",
    feed: str = "sim",
    occurrence_ns: int | None = None,
) -> Signal:
    n = next(_seq)
    return Signal(
        strategy_id=strategy.pk,
        strategy_name=strategy.name,
        feed=feed,
        symbol=symbol,
        kind=kind,
        price=parse_fixed(price),
        emitted_ns=time.time_ns(),
        occurrence_ns=occurrence_ns if occurrence_ns is not None else 1_764_460_800_000_000_000 + n,
        output_id=f"out-{n}",
    )


def tick(price: str, volume: str, *, symbol: str = "BTCUSDT", ts_recv: int | None = None) -> MarketData:
    ts = ts_recv if ts_recv is not None else time.time_ns() + 1_000_000_000
    return MarketData(symbol=symbol, price=parse_fixed(price), volume=parse_fixed(volume), ts_event=ts, ts_recv=ts)


def stored_signal(signal: Signal) -> StrategySignal:
    """The row the processor stores for `signal` (what the API and the dashboard list)."""
    return StrategySignal.objects.create(
        strategy_id=signal.strategy_id,
        strategy_name=signal.strategy_name,
        feed=signal.feed,
        symbol=signal.symbol,
        kind=str(signal.kind),
        price_fixed=signal.price,
        emitted_at="2026-11-30T00:00:00Z",
        occurrence_ns=signal.occurrence_ns,
        output_id=signal.output_id,
    )


def logged_in(setup: Setup) -> Client:
    """A test client logged in as the owner of the setup's account."""
    client = Client()
    client.force_login(setup.account.owner)
    return client


def market_entry_spec(
    setup: Setup,
    client_order_id: str,
    *,
    quantity: int = SCALE // 100,
    price: int = 50_000 * SCALE,
    reserve: int = 60 * SCALE,
) -> IntentSpec:
    """A long market entry, by default 0.01 at 50,000 reserving 60: the entry the crash and rebuild tests leave behind."""
    return IntentSpec(
        client_order_id=client_order_id,
        account_id=setup.account.pk,
        strategy_id=setup.strategy.pk,
        instrument_id=setup.instrument.pk,
        intent="ENTRY",
        position_side="LONG",
        side="BUY",
        order_type="MARKET",
        quantity=quantity,
        price=price,
        reserve=reserve,
    )


def trade_on_paper(setups: list[Setup]) -> None:
    """An entry on each account, filled on the paper exchange: real orders, fills, positions."""

    async def run() -> None:
        matcher = PaperMatcher(fees=PaperFees(taker_bps=4, maker_bps=2), refresh_s=0.0)
        registry = BrokerRegistry(on_paper_place=matcher.order_placed)
        executor = TradeExecutor(
            broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
            config=ExecutorConfig(),
        )
        for setup in setups:
            assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")) == ["placed"]
        await matcher.consume(FeedData("sim", (tick("50010", "10"),)))

    asyncio.run(run())


def statements_recorded(calls: list[str]) -> Callable[..., Any]:
    """A connection execute wrapper that appends every statement's SQL to `calls`."""

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        calls.append(sql)
        return execute(sql, params, many, context)

    return wrapper
