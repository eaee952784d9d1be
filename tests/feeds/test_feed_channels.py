"""Non-trade channels (mark price, book ticker) reach the runtime on streams of their own."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core.health import HealthBoard
from feeds.models import Feed, Instrument, Subscription
from feeds.selectors import feed_specs_for_run
from feeds.streams.feed_streams import build_feed_streams
from feeds.venues import get_venue
from feeds.venues.base import FeedSpec, InstrumentSpec


class RecordingVenue:
    """The Binance USD-M adapter, recording which endpoints the runtime asks for."""

    def __init__(self) -> None:
        self._adapter = get_venue("binance-usdm")
        self.asked: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._adapter, name)

    async def endpoints(self, symbols, channels, settings):  # type: ignore[no-untyped-def]
        self.asked.append((tuple(symbols), tuple(channels)))
        return await self._adapter.endpoints(symbols, channels, settings)


async def test_each_channel_gets_its_own_streams_and_only_trade_streams_recover() -> None:
    venue = RecordingVenue()
    spec = FeedSpec(
        name="bin",
        venue="binance-usdm",
        settings=get_venue("binance-usdm").clean_settings(
            {"ws_url": "ws://127.0.0.1:9", "rest_url": "http://127.0.0.1:9"}
        ),
        instruments=(
            InstrumentSpec("BTCUSDT", "0.1", "0.001", channels=("mark_price", "trades")),
            InstrumentSpec("ETHUSDT", "0.01", "0.001", channels=("book_ticker",)),
            InstrumentSpec("SOLUSDT", "0.01", "1", channels=("trades",)),
        ),
    )
    streams = await build_feed_streams(spec, venue, publish=lambda batch: None, health=HealthBoard(), limiter=None)  # type: ignore[arg-type]
    assert venue.asked == [
        (("BTCUSDT", "SOLUSDT"), ("trades",)),
        (("ETHUSDT",), ("book_ticker",)),
        (("BTCUSDT",), ("mark_price",)),
    ]
    assert [s.label for s in streams] == ["ws0", "ws1", "ws2"]
    # A stream that carries no trades must never fetch trades over REST: they would arrive twice.
    assert [s._recovery_enabled for s in streams] == [True, False, False]


@pytest.mark.django_db
def test_feed_specs_carry_every_enabled_channel_of_an_instrument() -> None:
    feed = Feed.objects.create(name="bin", venue="binance-usdm", market_type="perpetual")
    btc = Instrument.objects.create(
        feed=feed, symbol="BTC-USDT", venue_symbol="BTCUSDT", tick_size=Decimal("0.1"), lot_size=Decimal("0.001")
    )
    eth = Instrument.objects.create(
        feed=feed, symbol="ETH-USDT", venue_symbol="ETHUSDT", tick_size=Decimal("0.01"), lot_size=Decimal("0.001")
    )
    Subscription.objects.create(instrument=btc, channel="trades")
    Subscription.objects.create(instrument=btc, channel="mark_price")
    Subscription.objects.create(instrument=eth, channel="book_ticker", enabled=False)
    Subscription.objects.create(instrument=eth, channel="trades")
    (spec,) = feed_specs_for_run(["bin"])
    assert {i.venue_symbol: i.channels for i in spec.instruments} == {
        "BTCUSDT": ("mark_price", "trades"),
        "ETHUSDT": ("trades",),
    }
