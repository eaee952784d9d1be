"""Factories for feeds tests: feeds with instruments, and trades."""

from __future__ import annotations

from decimal import Decimal

from feeds.market import MarketData, Side, parse_fixed
from feeds.models import Feed, Instrument, MarketType, Subscription


def make_feed(
    name: str = "sim",
    symbols: tuple[str, ...] = ("BTCUSDT",),
    *,
    venue: str = "simulated",
    settings: dict[str, object] | None = None,
) -> Feed:
    feed = Feed.objects.create(
        name=name,
        venue=venue,
        market_type=MarketType.SIMULATED if venue == "simulated" else MarketType.PERPETUAL,
        settings=settings or {},
    )
    for symbol in symbols:
        instrument = Instrument.objects.create(
            feed=feed, symbol=symbol, venue_symbol=symbol, tick_size=Decimal("0.01"), lot_size=Decimal("0.001")
        )
        Subscription.objects.create(instrument=instrument, channel="trades")
    return feed


def trade(
    trade_id: int,
    *,
    symbol: str = "BTCUSDT",
    ts_ms: int | None = None,
    price: int = parse_fixed("64000.12345678"),
    volume: int = parse_fixed("0.00001234"),
    side: Side | None = Side.BUY,
    duration_ns: int | None = None,
) -> MarketData:
    ts_event = (ts_ms if ts_ms is not None else 1_764_460_800_000 + trade_id) * 1_000_000
    return MarketData(
        symbol=symbol,
        price=price,
        volume=volume,
        ts_event=ts_event,
        ts_recv=ts_event + 5_000_000,
        trade_id=str(trade_id),
        side=side,
        duration_since_last_ns=duration_ns,
    )
