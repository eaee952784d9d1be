"""replay: recorded ticks from CSV or the database, paced or as fast as possible."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from core.health import HealthBoard
from feeds.distribution.fanout import FeedFanout
from feeds.market import FeedData, MarketData, Side, parse_fixed
from feeds.streams.local_streams import build_local_stream
from feeds.venues import replay
from feeds.venues.base import FeedSpec, InstrumentSpec

CSV = "ts_ms,symbol,price,volume\n" + "".join(
    f"{1732924800000 + step * 250},BTC-USDT,{96700 + step}.5,0.00{step % 9 + 1}\n" for step in range(40)
)


class FakeClock:
    """A monotonic clock that only moves when the replay sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def frames_of(lines: list[bytes]):  # type: ignore[no-untyped-def]
    for line in lines:
        yield line


async def collect(source: replay.ReplaySource) -> list[list[bytes]]:
    return [batch async for batch in source.batches()]


def test_a_tick_round_trips_through_its_frame() -> None:
    tick = MarketData("BTC-USDT", parse_fixed("96712.4"), parse_fixed("0.004"), 1732924800348123456, 0, "77", Side.SELL)
    assert replay.VENUE.parse(replay.frame_from_tick(tick), 0) == [tick]


async def test_recorded_speed_sleeps_the_exchange_time_gaps() -> None:
    clock = FakeClock()
    lines = [b"1000,A,1,1", b"1000,A,1,1", b"1250,A,1,1", b"2250,A,1,1"]
    source = replay.ReplaySource(lambda: frames_of(lines), speed=1, batch_size=100, clock=clock, sleep=clock.sleep)
    batches = await collect(source)
    assert [len(batch) for batch in batches] == [2, 1, 1]
    assert clock.sleeps == pytest.approx([0.25, 1.0])


async def test_ten_times_speed_sleeps_a_tenth() -> None:
    clock = FakeClock()
    lines = [b"1000,A,1,1", b"2000,A,1,1"]
    await collect(
        replay.ReplaySource(lambda: frames_of(lines), speed=10, batch_size=100, clock=clock, sleep=clock.sleep)
    )
    assert clock.sleeps == pytest.approx([0.1])


async def test_as_fast_as_possible_never_waits_and_batches_by_size() -> None:
    clock = FakeClock()
    lines = [f"{1000 + n * 60_000},A,1,1".encode() for n in range(25)]
    batches = await collect(
        replay.ReplaySource(lambda: frames_of(lines), speed=0, batch_size=10, clock=clock, sleep=clock.sleep)
    )
    assert [len(batch) for batch in batches] == [10, 10, 5]
    assert all(seconds == 0 for seconds in clock.sleeps)


async def test_a_csv_recording_streams_through_the_feed_path(tmp_path: Path) -> None:
    path = tmp_path / "ticks.csv"
    path.write_text(CSV)
    feed = FeedSpec(
        "replayed", "replay", {"path": str(path), "batch_size": 7}, (InstrumentSpec("BTC-USDT", "0.5", "0.001"),)
    )
    fanout = FeedFanout()
    queue = fanout.subscribe("test")
    await build_local_stream(feed, replay.VENUE, publish=fanout.publish, health=HealthBoard(), clock_ns=lambda: 5).run()
    events = []
    while not queue.empty():
        events.extend(queue.get_nowait().events)
    assert len(events) == 40
    assert events[0].price == parse_fixed("96700.5") and events[-1].price == parse_fixed("96739.5")
    assert [event.duration_since_last_ns for event in events[:3]] == [None, 250_000_000, 250_000_000]


def test_settings_are_checked_per_source() -> None:
    with pytest.raises(ValidationError) as info:
        replay.VENUE.clean_settings({"source": "csv", "speed": -1})
    assert set(info.value.message_dict) == {"path", "speed"}
    with pytest.raises(ValidationError) as info:
        replay.VENUE.clean_settings({"source": "database", "start": "yesterday"})
    assert set(info.value.message_dict) == {"source_feed", "start"}
    assert (
        replay.VENUE.clean_settings({"source": "database", "source_feed": "binance", "start": "2024-11-30"})["speed"]
        == 0
    )


@pytest.mark.django_db(transaction=True)
async def test_database_replay_merges_recorded_instruments_in_exchange_time_order() -> None:
    from channels.db import database_sync_to_async

    from feeds.models import Feed, Instrument, Tick

    def record() -> None:
        feed = Feed.objects.create(name="binance-live", venue="binance-usdm", market_type="perpetual")
        btc = Instrument.objects.create(
            feed=feed, symbol="BTC-USDT", venue_symbol="BTCUSDT", tick_size="0.1", lot_size="0.001"
        )
        eth = Instrument.objects.create(
            feed=feed, symbol="ETH-USDT", venue_symbol="ETHUSDT", tick_size="0.01", lot_size="0.001"
        )
        for n, instrument in enumerate([btc, eth, btc, eth]):
            Tick.objects.create(
                instrument=instrument,
                ts_event=1732924800000000000 + n * 1_000_000,
                ts_recv=0,
                price=(100 + n) * 10**8,
                volume=10**7,
                trade_id=str(n),
                side="buy",
            )

    await database_sync_to_async(record)()
    feed = FeedSpec(
        "replayed",
        "replay",
        replay.VENUE.clean_settings({"source": "database", "source_feed": "binance-live"}),
        (InstrumentSpec("BTCUSDT", "0.1", "0.001"), InstrumentSpec("ETHUSDT", "0.01", "0.001")),
    )
    delivered: list[FeedData] = []
    await build_local_stream(feed, replay.VENUE, publish=delivered.append, health=HealthBoard()).run()
    events = [event for batch in delivered for event in batch.events]
    assert [(event.symbol, event.trade_id) for event in events] == [
        ("BTCUSDT", "0"),
        ("ETHUSDT", "1"),
        ("BTCUSDT", "2"),
        ("ETHUSDT", "3"),
    ]
    assert all(event.side is Side.BUY for event in events)  # type: ignore[union-attr]
