"""Signals: what a strategy wants done, and where their consumers subscribe.

The orders app imports `Signal` and `SignalKind` from here and subscribes to a
`SignalHub` (ctx.resources["signals"]) for the live stream. Prices are fixed point
(feeds.market.SCALE_DIGITS); `ts_`/`_ns` fields are integer UTC nanoseconds.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum, StrEnum
from typing import Sequence

from feeds.market import fixed_to_decimal

log = logging.getLogger(__name__)

DEFAULT_SUBSCRIBER_CAPACITY = 1024


class SignalKind(StrEnum):
    ENTRY_LONG = "ENTRY_LONG"
    EXIT_LONG = "EXIT_LONG"
    ENTRY_SHORT = "ENTRY_SHORT"
    EXIT_SHORT = "EXIT_SHORT"


class Position(IntEnum):
    """A strategy's position on one instrument, as the strategy itself holds it."""

    SHORT = -1
    FLAT = 0
    LONG = 1


ENTRY_OF = {Position.LONG: SignalKind.ENTRY_LONG, Position.SHORT: SignalKind.ENTRY_SHORT}
EXIT_OF = {Position.LONG: SignalKind.EXIT_LONG, Position.SHORT: SignalKind.EXIT_SHORT}


def transition(old: Position, new: Position) -> tuple[SignalKind, ...]:
    """Return the signals that move `old` to `new`: the exit of the old position first."""
    if old == new:
        return ()
    kinds: list[SignalKind] = []
    if old != Position.FLAT:
        kinds.append(EXIT_OF[old])
    if new != Position.FLAT:
        kinds.append(ENTRY_OF[new])
    return tuple(kinds)


@dataclass(frozen=True, slots=True)
class Signal:
    """One entry or exit emitted by a strategy on one instrument."""

    strategy_id: int
    strategy_name: str
    feed: str
    symbol: str  # the venue's spelling
    kind: SignalKind
    price: int  # fixed point: the price of the tick that caused it
    emitted_ns: int  # the app's emission time, not the tick time
    occurrence_ns: int  # exchange time of the tick that caused it
    output_id: str  # the StrategyOutput this signal was derived from

    @property
    def price_decimal(self) -> Decimal:
        return fixed_to_decimal(self.price)

    @property
    def is_entry(self) -> bool:
        return self.kind in (SignalKind.ENTRY_LONG, SignalKind.ENTRY_SHORT)


class SignalHub:
    """Fans live signals out to subscribers (the trade executor) through bounded queues.

    `publish` never awaits: a subscriber that falls 1024 signals behind loses the
    newest ones, counted per subscriber and warned about (throttled), never silently.
    """

    def __init__(self, *, warn_interval_s: float = 10.0) -> None:
        self._queues: dict[str, asyncio.Queue[Signal]] = {}
        self.dropped: dict[str, int] = {}
        self._last_warned: dict[str, float] = {}
        self._warn_interval_s = warn_interval_s

    def subscribe(self, name: str, capacity: int = DEFAULT_SUBSCRIBER_CAPACITY) -> asyncio.Queue[Signal]:
        """Return a queue that receives every signal published from now on."""
        if name in self._queues:
            raise ValueError(f"signal subscriber {name!r} already exists")
        queue: asyncio.Queue[Signal] = asyncio.Queue(capacity)
        self._queues[name] = queue
        self.dropped[name] = 0
        return queue

    def unsubscribe(self, name: str) -> None:
        self._queues.pop(name, None)

    def publish(self, signals: Sequence[Signal]) -> None:
        for name, queue in self._queues.items():
            for signal in signals:
                try:
                    queue.put_nowait(signal)
                except asyncio.QueueFull:
                    self.dropped[name] += 1
                    now = time.monotonic()
                    if now - self._last_warned.get(name, -self._warn_interval_s) >= self._warn_interval_s:
                        self._last_warned[name] = now
                        log.warning("processor: signal subscriber %s is full, %d dropped", name, self.dropped[name])
