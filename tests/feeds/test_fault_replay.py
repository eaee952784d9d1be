"""The acceptance test: 20,000 trades through at least 50 random faults, recorded exactly.

Fake venue websocket -> supervised stream (parse, consistency, gap recovery over REST)
-> fan-out -> recorder -> database. Afterwards the recorded ticks must equal the
venue's trades: none missing, none twice, in order, with exact numbers.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict

import pytest
from channels.db import database_sync_to_async

from feeds.distribution.fanout import FeedFanout, drain
from feeds.models import Tick
from feeds.recording.database_writer import writer_for_database
from feeds.recording.recorder import TickRecorder
from feeds.recording.tick_selectors import tick_addresses
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import Collector, expected_trades, start_streams, stop
from tests.helpers import async_eventually

SYMBOLS = ("BTCUSDT", "ETHUSDT", "SOLUSDT")
TRADES = 20_000
MIN_FAULTS = 50


async def _inject_faults(venue: FakeBinanceUsdm, rng: random.Random, done: asyncio.Event) -> Counter[str]:
    """Inject faults at random moments until the tape is played and MIN_FAULTS have landed."""
    injected: Counter[str] = Counter()
    while not (venue.finished and sum(injected.values()) >= MIN_FAULTS):
        await asyncio.sleep(rng.uniform(0.02, 0.12))
        kind = rng.choices(["close", "silence", "refuse", "garbage", "slow", "half_open"], [5, 2, 3, 2, 1, 1])[0]
        if venue.open_connections == 0 and kind not in ("refuse",):
            continue
        if kind == "close":
            venue.close_connections()
        elif kind == "silence":
            venue.go_silent()
        elif kind == "half_open":
            venue.go_half_open()
        elif kind == "garbage":
            venue.send_garbage()
        elif kind == "slow":
            venue.slow_down(0.0005)
            await asyncio.sleep(rng.uniform(0.05, 0.1))
            venue.slow_down(0)
        else:
            venue.refuse_connections(True)
            venue.close_connections()
            await asyncio.sleep(rng.uniform(0.05, 0.15))
            venue.refuse_connections(False)
        injected[kind] += 1
    done.set()
    return injected


@pytest.mark.django_db(transaction=True)
async def test_twenty_thousand_trades_through_fifty_random_faults_are_recorded_exactly() -> None:
    rng = random.Random(20_000)
    async with FakeBinanceUsdm(make_tape(TRADES, SYMBOLS, seed=11)) as venue:
        await database_sync_to_async(make_feed)(
            "bin", SYMBOLS, venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        keys = await database_sync_to_async(tick_addresses)(["bin"])
        writer = await database_sync_to_async(writer_for_database)()
        recorder = TickRecorder(writer, keys, batch_size=2000, flush_interval_s=0.05)
        fanout = FeedFanout()
        queue = fanout.subscribe("recorder", capacity=100_000)
        streams, tasks, collector, health = await start_streams(venue, SYMBOLS, collector=Collector(fanout.publish))
        helpers = [asyncio.create_task(drain("recorder", queue, recorder.consume)), asyncio.create_task(recorder.run())]
        faults_done = asyncio.Event()
        try:

            async def subscribed() -> bool:
                return venue.stats.subscribe_messages >= 1

            await async_eventually(subscribed, timeout_s=10)
            venue.play(2500)
            injected = await asyncio.wait_for(_inject_faults(venue, rng, faults_done), timeout=90)

            async def caught_up() -> bool:
                return len(collector.trades) >= TRADES and recorder.buffered == 0 and queue.empty()

            await async_eventually(caught_up, timeout_s=60, interval_s=0.05)
            await asyncio.sleep(0.1)
            await recorder.close()
        finally:
            await stop(tasks)
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    assert sum(injected.values()) >= MIN_FAULTS, injected
    assert streams[0].stats.connects > 20 and streams[0].stats.recovered > 0
    rows = await database_sync_to_async(
        lambda: list(
            Tick.objects.order_by("pk").values_list(
                "instrument__venue_symbol", "trade_id", "price", "volume", "ts_event"
            )
        )
    )()
    recorded: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    for symbol, trade_id, price, volume, ts_event in rows:
        recorded[symbol].append((trade_id, price, volume, ts_event))
    expected = expected_trades(venue)
    assert sum(len(v) for v in expected.values()) == TRADES
    for symbol in SYMBOLS:
        assert len(recorded[symbol]) == len(expected[symbol]), symbol
        assert recorded[symbol] == expected[symbol], symbol
    assert recorder.stats.overflow == 0 and fanout.overflows["recorder"] == 0
