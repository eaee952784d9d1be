"""A backlog on the processor's feed queue is routed in turns: more ticks per fold, the same folds.

When feed batches queued up, the feed router routes them as one turn (within half a
route mailbox in all and half an instrument mailbox per instrument) before the
strategies run, so each strategy folds an instrument's ticks of many batches in one
call. A batch that arrives alone is still routed at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from feeds.market import FeedData, MarketData, MarkPrice
from processor.processor import Processor
from processor.routing import RoutingTurn
from processor.specs import StrategySpec
from processor.strategies import strategy_class
from tests.processor.factories import FEED, RecordingSink, spec, tick, turn

OTHER_FEED = "sim2"


async def started(processor: Processor, *specs: StrategySpec) -> asyncio.Queue[FeedData]:
    queue: asyncio.Queue[FeedData] = asyncio.Queue()
    processor.start(feed=queue)
    processor.reconcile(list(specs))
    await processor.settled()
    await turn()
    return queue


async def until_drained(processor: Processor, queue: asyncio.Queue[FeedData]) -> None:
    while not queue.empty() or processor.backlog():
        await asyncio.sleep(0)
    await turn()


def rows_per_fold(sink: RecordingSink, strategy_id: int, symbol: str) -> list[int]:
    return [len(b.rows) for b in sink.batches if (b.strategy_id, b.symbol) == (strategy_id, symbol)]


async def test_a_backlog_over_many_instruments_is_folded_in_turns_that_fit_the_route_mailbox():
    symbols = [f"S{i}" for i in range(10)]
    sink = RecordingSink()
    processor = Processor(sink=sink, route_mailbox_capacity=1_000)  # turns of at most 500 ticks
    queue = await started(processor, spec(1, symbols, kind="ema", params={"timeframe_s": 2, "fast": 2, "slow": 4}))
    ticks = [tick(symbols[i % 10], i * 0.1, 100 + i % 13) for i in range(2_000)]
    for start in range(0, len(ticks), 50):
        queue.put_nowait(FeedData(FEED, tuple(ticks[start : start + 50])))
    await until_drained(processor, queue)
    # 2,000 queued ticks would overflow the 1,000-tick mailbox as one item: four turns of 500.
    assert processor.route_state_counts() == {"active": 1, "stopping": 0, "degraded": 0}
    for symbol in symbols:
        assert rows_per_fold(sink, 1, symbol) == [50, 50, 50, 50]
        assert [o.occurrence_ns for o in sink.outputs_of(1, symbol)] == [
            t.ts_event for t in ticks if t.symbol == symbol
        ]
    await processor.stop()


async def test_one_instruments_backlog_is_folded_in_turns_of_half_an_instrument_mailbox():
    sink = RecordingSink()
    processor = Processor(sink=sink, mailbox_capacity=1_000)  # at most 500 ticks of one instrument per turn
    queue = await started(processor, spec(1, ["BTC"]))
    ticks = [tick("BTC", i * 0.1) for i in range(2_000)]
    for start in range(0, len(ticks), 50):
        queue.put_nowait(FeedData(FEED, tuple(ticks[start : start + 50])))
    await until_drained(processor, queue)
    assert rows_per_fold(sink, 1, "BTC") == [500, 500, 500, 500]
    assert [o.occurrence_ns for o in sink.outputs_of(1)] == [t.ts_event for t in ticks]
    await processor.stop()


async def test_a_lone_batch_is_routed_at_once_and_folded_on_its_own():
    sink = RecordingSink()
    processor = Processor(sink=sink)
    queue = await started(processor, spec(1, ["BTC"]))
    for second in range(1, 4):
        queue.put_nowait(FeedData(FEED, (tick("BTC", second),)))
        await turn()
        assert rows_per_fold(sink, 1, "BTC") == [1] * second  # not held back for company
    await processor.stop()


def direct(strategy: StrategySpec, ticks: list[MarketData]) -> tuple[list[Any], list[tuple[str, int, int]]]:
    """The strategy's logic folded over one instrument's ticks in one call: the truth."""
    logic = strategy_class(strategy.kind)(strategy.params)
    rows: list[Any] = []
    signal_rows: list[Any] = []
    logic.fold(ticks, rows, signal_rows)
    return rows, [(kind.value, ts, index) for index, kind, _, ts in signal_rows]


async def test_a_backlog_of_two_feeds_keeps_every_tick_and_signal_in_order():
    # Scripted positions change often (every signal is easy to lose or reorder), on two
    # feeds, with mark prices in between that are not traded on, in uneven batches.
    script = ["long", "x", "short", "x", "x", "flat", "long", "long", "short", "x", "flat"]
    ticks: dict[str, list[MarketData]] = {FEED: [], OTHER_FEED: []}
    queued: list[FeedData] = []
    sizes = [3, 40, 1, 300, 7, 90]
    second = 0.0
    for i in range(60):
        feed = FEED if i % 3 else OTHER_FEED
        events: list[Any] = []
        for j in range(sizes[i % len(sizes)]):
            second += 0.01
            symbol = ("BTC", "ETH", "SOL")[j % 3]
            event = tick(symbol, second, 100 + j % 5, trade_id=script[(i + j) % len(script)])
            events.append(event)
            ticks[feed].append(event)
            if j % 10 == 0:
                ns = int(second * 1e9)
                events.append(MarkPrice(symbol=symbol, mark_price=event.price, ts_event=ns, ts_recv=ns))
        queued.append(FeedData(feed, tuple(events)))
    both = StrategySpec.build(
        strategy_id=1,
        name="both",
        kind=spec(1, []).kind,
        params={},
        instruments=frozenset({(FEED, "BTC"), (FEED, "ETH"), (OTHER_FEED, "BTC"), (OTHER_FEED, "SOL")}),
    )
    other = spec(2, ["BTC", "ETH", "SOL"], feed=OTHER_FEED)
    sink = RecordingSink()
    # Turns of at most 400 ticks, 300 per instrument: a batch often waits for the next turn.
    processor = Processor(sink=sink, route_mailbox_capacity=800, mailbox_capacity=600)
    queue = await started(processor, both, other)
    for batch in queued:
        queue.put_nowait(batch)
    await until_drained(processor, queue)
    assert processor.route_state_counts()["degraded"] == 0
    folds = 0
    for strategy in (both, other):
        for feed, symbol in sorted(strategy.instruments):
            expected_rows, expected_signals = direct(strategy, [t for t in ticks[feed] if t.symbol == symbol])
            batches = [
                b for b in sink.batches if (b.strategy_id, b.feed, b.symbol) == (strategy.strategy_id, feed, symbol)
            ]
            assert [row for b in batches for row in b.rows] == expected_rows, (strategy.name, feed, symbol)
            signals = [
                (s.kind.value, s.occurrence_ns, int(s.output_id.rsplit(":", 1)[1]))
                for s in sink.signal_log
                if (s.strategy_id, s.feed, s.symbol) == (strategy.strategy_id, feed, symbol)
            ]
            assert signals == expected_signals, (strategy.name, feed, symbol)
            assert len(expected_signals) > 20
            folds += len(batches)
    # Coalesced: fewer fold calls than (instrument, feed batch) pairs, not one per batch.
    pairs = sum(
        len(
            {e.symbol for e in b.events if isinstance(e, MarketData)}
            & {s for f, s in strategy.instruments if f == b.feed}
        )
        for b in queued
        for strategy in (both, other)
    )
    assert folds < pairs
    await processor.stop()


def test_a_turn_takes_slices_while_both_bounds_hold_and_always_its_first():
    turn_ = RoutingTurn(max_ticks=10, max_instrument_ticks=6)
    big = tuple(tick("BTC", i) for i in range(12))
    assert turn_.fits(big)  # the first slice always: a turn is never empty
    turn_ = RoutingTurn(max_ticks=10, max_instrument_ticks=6)
    turn_.add(FEED, (tick("BTC", 1), tick("ETH", 2), tick("BTC", 3)))
    assert turn_.largest == 2 and turn_.ticks == 3
    assert turn_.fits(tuple(tick("SOL", i) for i in range(4)))  # 2 + 4 <= 6 per instrument, 7 <= 10
    assert not turn_.fits(tuple(tick("SOL", i) for i in range(5)))  # it could all be BTC's: 2 + 5 > 6
    mark = MarkPrice(symbol="BTC", mark_price=1, ts_event=4, ts_recv=4)
    turn_.add(OTHER_FEED, (mark, tick("BTC", 4), tick("BTC", 5), tick("BTC", 6)))
    assert turn_.ticks == 7 and turn_.largest == 3  # every event counts toward the turn, only trades are grouped
    assert list(turn_.groups[FEED]) == ["BTC", "ETH"] and [t.ts_event for t in turn_.groups[OTHER_FEED]["BTC"]] == [
        4_000_000_000,
        5_000_000_000,
        6_000_000_000,
    ]
    assert not turn_.fits(tuple(tick("ETH", i) for i in range(4)))  # 7 + 4 > 10 in all
