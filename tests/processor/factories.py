"""Small builders for processor tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from feeds.market import FeedData, MarketData, parse_fixed
from processor.outputs import OutputBatch, StrategyOutput
from processor.processor import Processor
from processor.signals import Signal
from processor.specs import StrategySpec
from tests.processor.scripted import KIND

FEED = "sim"


def tick(
    symbol: str, ts_s: float, price: str | float = 100, volume: str | float = 1, trade_id: str | None = None
) -> MarketData:
    ts = int(round(ts_s * 1e9))
    return MarketData(
        symbol=symbol,
        price=parse_fixed(str(price)),
        volume=parse_fixed(str(volume)),
        ts_event=ts,
        ts_recv=ts,
        trade_id=trade_id,
    )


def batch(*ticks: MarketData, feed: str = FEED) -> FeedData:
    return FeedData(feed, tuple(ticks))


def spec(
    strategy_id: int,
    symbols: Sequence[str],
    *,
    kind: str = KIND,
    params: dict[str, Any] | None = None,
    name: str | None = None,
    feed: str = FEED,
) -> StrategySpec:
    return StrategySpec.build(
        strategy_id=strategy_id,
        name=name or f"s{strategy_id}",
        kind=kind,
        params=params or {},
        instruments=frozenset((feed, symbol) for symbol in symbols),
    )


class RecordingSink:
    """A StrategyEventSink that keeps everything, in arrival order."""

    def __init__(self) -> None:
        self.batches: list[OutputBatch] = []
        self.signal_log: list[Signal] = []
        self.signal_outputs: list[StrategyOutput] = []

    def outputs(self, batch: OutputBatch) -> None:
        self.batches.append(batch)

    def signals(self, signals: Sequence[Signal], outputs: Sequence[StrategyOutput]) -> None:
        self.signal_log.extend(signals)
        self.signal_outputs.extend(outputs)

    def outputs_of(self, strategy_id: int, symbol: str | None = None) -> list[StrategyOutput]:
        return [
            output
            for b in self.batches
            if b.strategy_id == strategy_id and (symbol is None or b.symbol == symbol)
            for output in b.outputs()
        ]

    def kinds(self, strategy_id: int | None = None) -> list[str]:
        return [s.kind.value for s in self.signal_log if strategy_id is None or s.strategy_id == strategy_id]


async def turn(times: int = 5) -> None:
    """Let the other tasks run a few times (the pipeline needs one turn per level)."""
    for _ in range(times):
        await asyncio.sleep(0)


async def started(processor: Processor, *specs: StrategySpec, feed: Any = None) -> Processor:
    """Start `processor` (on `feed` when given), add `specs` and let the routes settle."""
    processor.start(feed=feed)
    processor.reconcile(list(specs))
    await processor.settled()
    await turn()
    return processor


def route_of(processor: Processor, strategy_id: int) -> Any:
    """The processor's one route of the strategy."""
    [route] = [r for r in processor.snapshot.routes_by_strategy.values() if r.spec.strategy_id == strategy_id]
    return route
