"""Where a starting execution learns the position its strategy already holds.

The processor cannot read the orders app (orders depends on the processor, not the
other way round), so the runtime injects a lookup: (strategy id, feed, venue symbol)
-> the Position the ledger says the strategy holds there. Without one (backtests,
tests) every execution starts flat.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from processor.signals import Position

HeldPositionLookup = Callable[[int, str, str], Awaitable[Position]]


async def nothing_held(strategy_id: int, feed: str, symbol: str) -> Position:
    return Position.FLAT
