"""Poison frames inside a live stream: the feed keeps running and records every good trade.

The fake Binance USD-M venue (a real local websocket server) sends hostile frames in
order between its trades; the runtime runfeed builds (supervised stream, recorder,
database) must count each as malformed with its reason and record all the others.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from prometheus_client import REGISTRY

from core.health import Status
from core.runtime.core import Runtime
from feeds.models import Tick
from feeds.startup import FeedHubs, feed_startup_tasks
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import expected_trades, fast_runtime_streams
from tests.helpers import async_eventually

SYMBOLS = ("BTCUSDT", "ETHUSDT")


def _agg_trade(agg_id: int, *, symbol: str = "BTCUSDT", price: str = "96712.40", quantity: str = "0.015") -> str:
    return (
        f'{{"stream":"btcusdt@aggTrade","data":{{"e":"aggTrade","E":1764460800125,"s":"{symbol}","a":{agg_id},'
        f'"p":"{price}","q":"{quantity}","f":1,"l":2,"T":1764460800123,"m":true}}}}'
    )


# Each with the reason it must be counted under. Their trade ids are far from the
# tape's, so none could pass for a real trade.
POISON: list[tuple[str | bytes, str]] = [
    ('{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","x":' + "[" * 1000 + "]" * 1000 + "}}", "depth"),
    (_agg_trade(9_000_001, price="9" * 19 + ".5"), "number"),  # beyond the documented range (18 whole digits)
    (_agg_trade(9_000_002, price="1" + "0" * 40), "number"),
    (_agg_trade(9_000_003, price="-96712.40"), "price"),
    (_agg_trade(9_000_004, price="0"), "price"),
    (_agg_trade(9_000_005, quantity="-0.015"), "size"),
    (_agg_trade(9_000_006, symbol=""), "symbol"),
    (_agg_trade(9_000_007).replace('"s":"BTCUSDT"', '"s":"BTC\\u0000USDT","a":true').encode(), "schema"),
    (_agg_trade(9_000_008).encode().replace(b"BTCUSDT", b"BTC\xff\xfeUSDT"), "utf8"),  # a binary frame
    ('{"stream":"btcusdt@aggTrade","data":{"e":', "json"),
]


def _malformed(reason: str) -> float:
    return REGISTRY.get_sample_value("feed_frames_malformed_total", {"venue": "binance-usdm", "reason": reason}) or 0.0


@pytest.fixture
def fast_streams(settings):  # type: ignore[no-untyped-def]
    return fast_runtime_streams(settings, heartbeat_timeout_s=2)


@pytest.mark.django_db(transaction=True)
async def test_poison_frames_between_live_trades_are_counted_and_every_good_trade_is_recorded(fast_streams) -> None:  # type: ignore[no-untyped-def]
    async with FakeBinanceUsdm(make_tape(1500, SYMBOLS)) as venue:
        await database_sync_to_async(make_feed)(
            "bin", SYMBOLS, venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        before = {reason: _malformed(reason) for _, reason in POISON}
        runtime = Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))
        task = asyncio.create_task(runtime.run())
        count = database_sync_to_async(Tick.objects.count)
        try:

            async def subscribed() -> bool:
                assert not task.done(), "the runtime stopped"
                return venue.stats.subscribe_messages >= 1

            await async_eventually(subscribed, timeout_s=20, interval_s=0.02)
            # Poison before, between and after the trades, in the order they are sent.
            for frame, _ in POISON[:4]:
                venue.inject(frame)
            venue.release(500)
            for frame, _ in POISON[4:7]:
                venue.inject(frame)
            venue.release(500)
            for frame, _ in POISON[7:]:
                venue.inject(frame)
            venue.release(500)

            async def everything_recorded() -> bool:
                assert not task.done(), "the runtime stopped"
                return await count() == 1500

            await async_eventually(everything_recorded, timeout_s=30, interval_s=0.05)
            health = runtime.context.health.get("feed:bin")
            assert health is not None and health.status is Status.HEALTHY
            assert venue.stats.connections == 1  # no frame cost the connection
        finally:
            runtime.request_stop()
            assert await task == 0

    recorded: dict[str, list[tuple[str, int, int, int]]] = {}
    for symbol, trade_id, price, volume, ts in await database_sync_to_async(
        lambda: list(
            Tick.objects.order_by("pk").values_list(
                "instrument__venue_symbol", "trade_id", "price", "volume", "ts_event"
            )
        )
    )():
        recorded.setdefault(symbol, []).append((trade_id, price, volume, ts))
    assert recorded == expected_trades(venue)
    expected_counts: dict[str, int] = {}
    for _, reason in POISON:
        expected_counts[reason] = expected_counts.get(reason, 0) + 1
    assert {reason: _malformed(reason) - before[reason] for reason in expected_counts} == expected_counts
