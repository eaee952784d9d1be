"""Where strategy backfill reads recorded ticks from.

The feeds app records every tick; a `HistoricalTickProvider` reads a window
of them for one instrument. Until a recorder-backed provider is wired in, `NoHistory`
answers with nothing and strategies warm up on live ticks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from feeds.market import MarketData


class HistoricalTickProvider(Protocol):
    async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int) -> Sequence[MarketData]:
        """Return the recorded trades of (feed, venue symbol) with start_ns <= ts_event < end_ns, in order."""
        ...


class NoHistory:
    """A provider with no recorded ticks."""

    async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int) -> Sequence[MarketData]:
        return ()


class InMemoryHistory:
    """A provider over ticks held in memory, keyed by (feed, venue symbol); for tests and replays."""

    def __init__(self, ticks: dict[tuple[str, str], Sequence[MarketData]] | None = None) -> None:
        self._ticks: dict[tuple[str, str], list[MarketData]] = {
            key: sorted(values, key=lambda tick: tick.ts_event) for key, values in (ticks or {}).items()
        }
        self.requests: list[tuple[str, str, int, int]] = []

    def add(self, feed: str, ticks: Sequence[MarketData]) -> None:
        for tick in ticks:
            self._ticks.setdefault((feed, tick.symbol), []).append(tick)
        for values in self._ticks.values():
            values.sort(key=lambda tick: tick.ts_event)

    async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int) -> Sequence[MarketData]:
        self.requests.append((feed, symbol, start_ns, end_ns))
        return [t for t in self._ticks.get((feed, symbol), ()) if start_ns <= t.ts_event < end_ns]
