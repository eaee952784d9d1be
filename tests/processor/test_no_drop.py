"""Nothing on the trade path is dropped silently: a slow executor, a slow processor."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from core.health import Status
from core.runtime.core import FatalError
from feeds.distribution.fanout import FeedFanout
from processor.outputs import OutputBatch, StrategyOutput
from processor.processor import Processor
from processor.readiness import ProcessorHealth
from processor.routing import Active, Degraded
from processor.signals import Signal, SignalHub
from tests.helpers import async_eventually
from tests.processor.factories import FEED, batch, route_of, spec, started, tick, turn


class HubSink:
    """The live sink's trade-path half: every signal goes to the hub at once."""

    def __init__(self, hub: SignalHub) -> None:
        self.hub = hub

    def outputs(self, batch: OutputBatch) -> None:
        pass

    def signals(self, signals: Sequence[Signal], outputs: Sequence[StrategyOutput]) -> None:
        self.hub.publish(signals)


def flip_flop(start: int, count: int, symbol: str = "BTC"):
    """Ticks that enter and exit alternately: one signal per tick."""
    return [tick(symbol, start + i, trade_id="long" if (start + i) % 2 else "flat") for i in range(count)]


async def test_a_slow_executor_gets_every_signal_in_order_and_shows_how_far_behind_it_is():
    hub = SignalHub(degraded_depth=500)
    queue = hub.subscribe("trade-executor")
    processor = await started(Processor(sink=HubSink(hub)), spec(1, ["BTC"]))
    received: list[Signal] = []
    deepest = 0

    async def slow_executor() -> None:
        while True:
            received.append(await queue.get())
            for _ in range(20):  # each signal takes many loop turns to trade
                await asyncio.sleep(0)

    consumer = asyncio.create_task(slow_executor())
    degraded_seen = []
    for start in range(1, 4001, 100):
        await processor.consume(batch(*flip_flop(start, 100)))
        deepest = max(deepest, queue.qsize())
        status, reason = hub.health()
        if status is Status.DEGRADED:
            degraded_seen.append(reason)
    # Far deeper than the 1024 a bounded queue used to hold before dropping the newest.
    assert deepest > 2_000
    assert degraded_seen and "trade-executor" in degraded_seen[-1] and "queued" in degraded_seen[-1]

    async def all_received() -> bool:
        return len(received) == 4000

    await async_eventually(all_received, timeout_s=60)
    assert [s.occurrence_ns for s in received] == [t.ts_event for t in flip_flop(1, 4000)]
    assert [s.kind.value for s in received[:3]] == ["ENTRY_LONG", "EXIT_LONG", "ENTRY_LONG"]
    assert hub.health()[0] is Status.HEALTHY
    consumer.cancel()
    await processor.stop()


async def test_an_executor_past_the_hard_limit_stops_the_runtime_with_the_reason_and_keeps_every_signal():
    hub = SignalHub(degraded_depth=5, hard_limit=50)
    queue = hub.subscribe("trade-executor")
    processor = await started(Processor(sink=HubSink(hub)), spec(1, ["BTC"]))
    reports: list[tuple[Status, str]] = []
    watcher = asyncio.create_task(hub.watch(lambda *report: reports.append(report), interval_s=60))
    await turn()
    assert reports[-1][0] is Status.HEALTHY

    await processor.consume(batch(*flip_flop(1, 60)))  # nobody is taking them
    with pytest.raises(FatalError, match="trade-executor is 60 signals behind \\(limit 50\\)"):
        await asyncio.wait_for(watcher, 5)
    assert reports[-1] == (Status.BLOCKED, "signal subscriber trade-executor is 60 signals behind (limit 50)")
    assert queue.qsize() == 60  # refused nothing on the way down
    await processor.stop()


async def test_a_slow_processor_degrades_the_routes_whose_ticks_were_shed_and_says_so():
    fanout = FeedFanout()
    processor = Processor(sink=HubSink(SignalHub()))
    feed = fanout.subscribe("processor", capacity=4, on_overflow=processor.shed)
    await started(processor, spec(1, ["BTC"]), spec(2, ["ETH"]), feed=feed)
    # The processor gets no turn between these: its input queue fills and the rest are shed.
    for second in range(1, 11):
        fanout.publish(batch(tick("BTC", second)))
    await processor.settled()
    assert fanout.overflows["processor"] == 6 and processor.shed_batches == 6

    btc, eth = route_of(processor, 1), route_of(processor, 2)
    assert isinstance(btc.state, Degraded) and "processor input full" in btc.state.cause
    assert "sim:BTC" in btc.state.cause
    assert isinstance(eth.state, Active)  # none of its ticks was shed
    readiness = processor.readiness()
    assert readiness.ready and readiness.health is ProcessorHealth.DEGRADED
    assert "s1 (processor input full" in readiness.reason
    assert "input shed 6 feed batches (6 events)" in readiness.reason

    # The sibling keeps trading what it sees.
    fanout.publish(batch(tick("ETH", 20, trade_id="long")))

    async def eth_entered() -> bool:
        return eth.executor.execution((FEED, "ETH")).has_open_position

    await async_eventually(eth_entered)
    await processor.stop()


async def test_a_slow_processor_fails_fast_when_a_route_that_lost_ticks_holds_a_position():
    fanout = FeedFanout()
    processor = Processor(sink=HubSink(SignalHub()))
    feed = fanout.subscribe("processor", capacity=2, on_overflow=processor.shed)
    await started(processor, spec(1, ["BTC"]), feed=feed)
    fanout.publish(batch(tick("BTC", 1, trade_id="short")))

    async def entered() -> bool:
        return route_of(processor, 1).executor.has_open_positions()

    await async_eventually(entered)

    for second in range(2, 6):
        fanout.publish(batch(tick("BTC", second)))
    await processor.settled()
    reason = await asyncio.wait_for(processor.fatal, 5)
    assert "s1 degraded with open positions" in reason and "processor input full" in reason
    readiness = processor.readiness()
    assert not readiness.ready and readiness.health is ProcessorHealth.BLOCKED
    await processor.stop()


async def test_a_shed_batch_nobody_trades_is_counted_and_shown_without_degrading_anyone():
    fanout = FeedFanout()
    processor = Processor(sink=HubSink(SignalHub()))
    feed = fanout.subscribe("processor", capacity=1, on_overflow=processor.shed)
    await started(processor, spec(1, ["BTC"]), feed=feed)
    fanout.publish(batch(tick("SOL", 1)))
    fanout.publish(batch(tick("SOL", 2), tick("SOL", 3)))
    await processor.settled()
    assert isinstance(route_of(processor, 1).state, Active)
    readiness = processor.readiness()
    assert readiness.health is ProcessorHealth.HEALTHY
    assert "input shed 1 feed batches (2 events)" in readiness.reason
    await processor.stop()
