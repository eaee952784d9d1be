"""Hand-written test doubles for the stream runtime's boundaries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from feeds.market import MarketData
from feeds.streams.runtime_events import RuntimeEvent
from feeds.streams.supervised_stream import SupervisedStream
from feeds.streams.window_planner import TradeRecoveryWindow


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class EventLog:
    """A runtime event publisher that keeps what it was given; can be told to fail."""

    def __init__(self, calls: list[str] | None = None) -> None:
        self.events: list[RuntimeEvent] = []
        self.calls = calls if calls is not None else []
        self.fail = False

    async def publish(self, event: RuntimeEvent) -> None:
        self.calls.append(f"publish:{type(event).__name__}")
        if self.fail:
            raise RuntimeError("publisher down")
        self.events.append(event)


class ScriptedConnection:
    """Connect dispatcher and subscription manager in one, logging the order of calls."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.connect_error: Exception | None = None
        self.restore_error: Exception | None = None

    async def connect(self) -> None:
        self.calls.append("connect")
        if self.connect_error:
            raise self.connect_error

    async def restore_subscriptions(self) -> None:
        self.calls.append("restore")
        if self.restore_error:
            raise self.restore_error


class ListHistory:
    """A trade history served from a list, filtered by window, logging each window asked."""

    def __init__(self, trades: Sequence[MarketData]) -> None:
        self.trades = list(trades)
        self.windows: list[TradeRecoveryWindow] = []
        self.error: Exception | None = None

    async def fetch_window(self, window: TradeRecoveryWindow, after: MarketData | None) -> list[MarketData]:
        self.windows.append(window)
        if self.error:
            raise self.error
        return [
            t
            for t in self.trades
            if t.symbol == window.symbol and window.start_time <= t.ts_event // 1_000_000 <= window.end_time
        ]


async def deliver_burst(stream: SupervisedStream, frames: Sequence[bytes]) -> None:
    """Hand `frames` to the stream as one burst off its socket, then let the burst end."""
    for frame in frames:
        stream.on_frame(frame)
    await asyncio.sleep(0)
