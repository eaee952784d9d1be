"""Every way ticks reach a strategy gives it the same signals and outputs as folding it directly.

One fixed tape over several instruments, strategies on overlapping instrument sets (so
deliveries are shared by some routes and cut down for others), fed to the processor
batch by batch, routed several batches at a time before the executors run (they fold
a backlog per instrument at once), and from a queued feed (the router routes what queued
up together, in turns as large as the mailboxes allow; with small mailboxes a backlog
takes many turns, and a batch that does not fit waits for the next). Each must match
the strategy's logic folded over each instrument's ticks in one call.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from feeds.market import FeedData, MarketData
from processor.processor import Processor
from processor.specs import StrategySpec
from processor.strategies import strategy_class
from tests.processor.factories import FEED, RecordingSink, spec, tick, turn

SYMBOLS = ["BTC", "ETH", "SOL", "XRP", "ADA", "DOT"]
EMA = {"timeframe_s": 2, "fast": 3, "slow": 8}
BREAKOUT = {"bar_volume": "5", "lookback": 4, "hold_bars": 3, "cooldown_bars": 1}

SPECS = [
    spec(1, SYMBOLS, kind="ema", params=EMA),
    spec(2, SYMBOLS, kind="volume_breakout", params=BREAKOUT),
    spec(3, SYMBOLS[:3], kind="ema", params={**EMA, "fast": 2}),
    spec(4, SYMBOLS[2:], kind="volume_breakout", params={**BREAKOUT, "lookback": 2}),
    spec(5, SYMBOLS[:3], kind="ema", params={**EMA, "long_only": True}),
]


def tape(count: int = 6_000) -> list[MarketData]:
    rng = random.Random(17)
    prices = dict.fromkeys(SYMBOLS, 100.0)
    ticks = []
    for i in range(count):
        symbol = rng.choice(SYMBOLS)
        prices[symbol] = max(1.0, prices[symbol] * (1 + rng.gauss(0, 0.004)))
        ticks.append(tick(symbol, i * 0.05, round(prices[symbol], 2), rng.randint(1, 30) / 10))
    return ticks


def batches(ticks: list[MarketData], size: int = 37) -> list[FeedData]:
    return [FeedData(FEED, tuple(ticks[i : i + size])) for i in range(0, len(ticks), size)]


Trace = dict[tuple[int, str], tuple[list[tuple[Any, ...]], list[tuple[str, int, int, int]]]]


def folded_directly(ticks: list[MarketData]) -> Trace:
    """Each strategy's logic over each of its instruments' ticks in one fold: the truth."""
    trace: Trace = {}
    for strategy in SPECS:
        for _, symbol in sorted(strategy.instruments):
            logic = strategy_class(strategy.kind)(strategy.params)
            rows: list[tuple[Any, ...]] = []
            signal_rows: list[Any] = []
            logic.fold([t for t in ticks if t.symbol == symbol], rows, signal_rows)
            trace[(strategy.strategy_id, symbol)] = (
                rows,
                [(kind.value, price, ts, index) for index, kind, price, ts in signal_rows],
            )
    return trace


def through(sink: RecordingSink) -> Trace:
    trace: Trace = {}
    for strategy in SPECS:
        for _, symbol in sorted(strategy.instruments):
            rows = [
                row
                for b in sink.batches
                if (b.strategy_id, b.symbol) == (strategy.strategy_id, symbol)
                for row in b.rows
            ]
            signals = [
                (s.kind.value, s.price, s.occurrence_ns, int(s.output_id.rsplit(":", 1)[1]))
                for s in sink.signal_log
                if (s.strategy_id, s.symbol) == (strategy.strategy_id, symbol)
            ]
            trace[(strategy.strategy_id, symbol)] = (rows, signals)
    return trace


Feeding = Callable[[Processor, "asyncio.Queue[FeedData]", list[FeedData]], Coroutine[Any, Any, None]]


# Turns of at most 600 ticks and 120 per instrument: the tape takes many of them.
SMALL_TURNS = {"route_mailbox_capacity": 1_200, "mailbox_capacity": 240}


async def run(feed: Feeding, specs: list[StrategySpec]) -> Trace:
    sink = RecordingSink()
    capacities = SMALL_TURNS if feed is from_a_queued_feed_in_small_turns else {"mailbox_capacity": 100_000}
    processor = Processor(sink=sink, **capacities)
    queue: asyncio.Queue[FeedData] = asyncio.Queue()
    processor.start(feed=queue)
    processor.reconcile(specs)
    await processor.settled()
    await turn()
    await feed(processor, queue, batches(tape()))
    await processor.drained()
    await turn()
    assert processor.route_state_counts()["degraded"] == 0
    await processor.stop()
    return through(sink)


async def batch_by_batch(processor: Processor, queue: asyncio.Queue[FeedData], feed: list[FeedData]) -> None:
    for batch in feed:
        await processor.consume(batch)


async def several_batches_per_turn(processor: Processor, queue: asyncio.Queue[FeedData], feed: list[FeedData]) -> None:
    for start in range(0, len(feed), 7):
        for batch in feed[start : start + 7]:
            processor.route(batch.feed, batch.events)  # the executors get no turn in between
        await asyncio.sleep(0)


async def from_a_queued_feed(processor: Processor, queue: asyncio.Queue[FeedData], feed: list[FeedData]) -> None:
    for batch in feed:
        queue.put_nowait(batch)
    while not queue.empty():
        await asyncio.sleep(0)
    await turn()


async def from_a_queued_feed_in_small_turns(
    processor: Processor, queue: asyncio.Queue[FeedData], feed: list[FeedData]
) -> None:
    # Batches of uneven sizes, some larger than a routing slice, queued while the router waits.
    events = [event for batch in feed for event in batch.events]
    sizes = [1, 37, 300, 5, 120, 600, 2]
    start = 0
    for i in itertools.count():
        if start >= len(events):
            break
        size = sizes[i % len(sizes)]
        queue.put_nowait(FeedData(FEED, tuple(events[start : start + size])))
        start += size
    while not queue.empty() or processor.backlog():
        await asyncio.sleep(0)
    await turn()


@pytest.mark.parametrize(
    "feed", [batch_by_batch, several_batches_per_turn, from_a_queued_feed, from_a_queued_feed_in_small_turns]
)
async def test_every_routing_path_folds_what_a_direct_fold_does(feed: Feeding) -> None:
    expected = folded_directly(tape())
    assert sum(len(signals) for _, signals in expected.values()) > 100
    got = await run(feed, SPECS)
    for key in expected:
        assert got[key][1] == expected[key][1], key
        assert got[key][0] == expected[key][0], key
