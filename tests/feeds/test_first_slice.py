"""The first live slice: simulated venue -> stream -> fan-out -> conflated browser pushes."""

from __future__ import annotations

import asyncio
import contextlib

from core.fixed_point import fixed_to_str
from core.health import HealthBoard, Status
from feeds.distribution.fanout import FeedFanout, drain
from feeds.distribution.price_publisher import PricePublisher
from feeds.market import FeedData, MarketData, Side, parse_fixed
from feeds.streams.local_streams import build_local_stream
from feeds.venues.base import FeedSpec, InstrumentSpec
from feeds.venues.simulated import VENUE, SimulatedMarket
from tests.feeds.doubles import deliver_burst

SPECS = (InstrumentSpec("BTC-USD", "0.1", "0.001"), InstrumentSpec("DOGE-USD", "0.00001", "10"))


def market(seed: int = 7) -> SimulatedMarket:
    return SimulatedMarket(
        seed=seed, volatility_bps=5, instruments=SPECS, start_prices={"BTC-USD": "64000", "DOGE-USD": "0.15"}
    )


def test_the_same_seed_gives_the_same_trades_and_another_seed_does_not() -> None:
    a, b, c = market(), market(), market(seed=8)
    rounds_a = [a.next_round(1_700_000_000_000 + i) for i in range(200)]
    assert rounds_a == [b.next_round(1_700_000_000_000 + i) for i in range(200)]
    assert rounds_a != [c.next_round(1_700_000_000_000 + i) for i in range(200)]


def test_simulated_trades_respect_tick_and_lot_sizes() -> None:
    sim = market()
    for i in range(500):
        for frame in sim.next_round(1_700_000_000_000 + i):
            (trade,) = VENUE.parse(frame, 0)
            tick, lot = (
                (parse_fixed("0.1"), parse_fixed("0.001"))
                if trade.symbol == "BTC-USD"
                else (parse_fixed("0.00001"), parse_fixed("10"))
            )
            assert trade.price > 0 and trade.price % tick == 0
            assert trade.volume > 0 and trade.volume % lot == 0


def test_parse_reads_the_frame_exactly() -> None:
    frame = b'{"e":"trade","s":"BTC-USD","t":42,"p":"64012.5","q":"0.013","T":1732924800123,"m":true}'
    assert VENUE.parse(frame, 99) == [
        MarketData(
            symbol="BTC-USD",
            price=parse_fixed("64012.5"),
            volume=parse_fixed("0.013"),
            ts_event=1_732_924_800_123_000_000,
            ts_recv=99,
            trade_id="42",
            side=Side.SELL,
        )
    ]
    assert VENUE.parse(b'{"e":"heartbeat"}', 0) == []


async def test_stream_counts_and_skips_malformed_frames_and_sets_duration_since_last() -> None:
    delivered: list[FeedData] = []
    stream = build_local_stream(
        FeedSpec("sim", "simulated", {}, SPECS),
        VENUE,
        publish=delivered.append,
        health=HealthBoard(),
        clock_ns=lambda: 5,
    )
    good = b'{"e":"trade","s":"BTC-USD","t":%d,"p":"1.5","q":"1","T":%d,"m":false}'
    await deliver_burst(
        stream,
        [
            good % (1, 1_732_924_800_000),
            b"{not json",
            b'{"e":"trade","s":"BTC-USD"}',
            good % (2, 1_732_924_800_250),
            b'{"e":"trade","s":"X","t":1,"p":"1e3","q":"1","T":1732924800000,"m":false}',
        ],
    )
    (batch,) = delivered
    events = batch.events
    assert [e.trade_id for e in events] == ["1", "2"]
    assert events[0].duration_since_last_ns is None
    assert events[1].duration_since_last_ns == 250_000_000
    assert dict(stream.stats.malformed) == {"json": 1, "schema": 1, "number": 1}


class RecordingLayer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    async def group_send(self, group: str, message: dict) -> None:
        self.sent.append((group, message))


def trade(symbol: str, price: str, ts: int) -> MarketData:
    return MarketData(symbol, parse_fixed(price), parse_fixed("1"), ts, ts)


async def test_publisher_conflates_many_trades_into_one_row_per_instrument() -> None:
    now = [0.0]
    publisher = PricePublisher(
        RecordingLayer(), {("sim", "BTC-USD"): "BTC-USD"}, interval_s=0.25, full_every_s=5, clock=lambda: now[0]
    )
    for i in range(1000):
        await publisher.consume(FeedData("sim", (trade("BTC-USD", f"{100 + i}.5", i),)))
    message = publisher.take_message()
    assert message is not None and message["type"] == "market.prices"
    (row,) = message["prices"]
    assert row["price"] == "1099.5" and row["open"] == "100.5" and row["ticks"] == 1000 and row["volume"] == "1000"
    now[0] = 1.0
    assert publisher.take_message() is None  # nothing changed, no full refresh due yet
    await publisher.consume(FeedData("sim", (trade("ETH-USD", "10", 5),)))
    assert [r["symbol"] for r in publisher.take_message()["prices"]] == ["ETH-USD"]
    now[0] = 6.0
    assert {r["symbol"] for r in publisher.take_message()["prices"]} == {"BTC-USD", "ETH-USD"}  # full refresh


async def test_a_slow_consumer_overflows_alone_and_never_blocks_the_feed() -> None:
    fanout = FeedFanout()
    slow_queue = fanout.subscribe("slow", capacity=2)
    fast_queue = fanout.subscribe("fast", capacity=100)
    seen: list[FeedData] = []

    async def fast(batch: FeedData) -> None:
        seen.append(batch)

    task = asyncio.create_task(drain("fast", fast_queue, fast))
    batches = [FeedData("sim", (trade("BTC-USD", "1", i),)) for i in range(10)]
    for batch in batches:
        fanout.publish(batch)  # never awaits
    await asyncio.sleep(0.01)
    task.cancel()
    assert seen == batches
    assert slow_queue.qsize() == 2 and fanout.overflows == {"slow": 8, "fast": 0}


async def test_stream_runs_the_simulated_source_into_the_fanout_and_reports_healthy() -> None:
    fanout, board = FeedFanout(), HealthBoard()
    queue = fanout.subscribe("probe")
    spec = FeedSpec("sim", "simulated", {"interval_ms": 10, "start_prices": {"BTC-USD": "64000"}}, SPECS)
    task = asyncio.create_task(build_local_stream(spec, VENUE, publish=fanout.publish, health=board).run())
    try:
        batches = [await asyncio.wait_for(queue.get(), 5) for _ in range(3)]
    finally:
        task.cancel()
    assert all({e.symbol for e in b.events} == {"BTC-USD", "DOGE-USD"} for b in batches)
    assert board.get("feed:sim").status is Status.HEALTHY
    assert fixed_to_str(batches[0].events[0].price).startswith("6")


class DeadLayer:
    async def group_send(self, group: str, message: dict) -> None:
        raise ConnectionError("redis down")


async def test_a_dead_channel_layer_is_logged_once_with_a_traceback_then_counted(caplog) -> None:  # type: ignore[no-untyped-def]
    publisher = PricePublisher(DeadLayer(), {("sim", "BTC-USD"): "BTC-USD"}, interval_s=0.001)  # type: ignore[arg-type]
    task = asyncio.create_task(publisher.run())
    with caplog.at_level("INFO", logger="feeds.distribution.price_publisher"):
        for i in range(30):
            await publisher.consume(FeedData("sim", (trade("BTC-USD", "1", i),)))
            await asyncio.sleep(0.003)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    records = [r for r in caplog.records if r.name == "feeds.distribution.price_publisher"]
    assert len([r for r in records if r.exc_info]) == 1  # one traceback for the whole run of failures
    assert len(records) <= 2  # the rest is counted, one line per interval at most
