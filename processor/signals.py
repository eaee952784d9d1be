"""Signals: what a strategy wants done, and where their consumers subscribe.

The orders app imports `Signal` and `SignalKind` from here and subscribes to a
`SignalHub` (ProcessorHubs.signals) for the live stream. Prices are fixed point
(feeds.market.SCALE_DIGITS); `ts_`/`_ns` fields are integer UTC nanoseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum, StrEnum

from core.health import Status
from core.runtime.core import FatalError
from feeds.distribution.hub import FailFast, Hub
from feeds.market import fixed_to_decimal
from processor.metrics import SIGNAL_QUEUE_DEPTH

# A subscriber this far behind shows DEGRADED; this far behind stops the process.
SIGNAL_BACKLOG_DEGRADED = 1_000
SIGNAL_BACKLOG_LIMIT = 50_000


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


class SignalHub(Hub[Signal]):
    """Fans live signals out to subscribers (the trade executor), never dropping one.

    A lost signal is a lost trade decision (a lost exit leaves a position open), so a
    subscriber's queue is unbounded and `publish` never awaits and never refuses (the
    shared hub's `FailFast` policy). A subscriber that falls `degraded_depth` signals
    behind shows DEGRADED with its depth (`watch`); one that falls `hard_limit` behind
    is not keeping up at all, and `watch` raises FatalError with the reason: the
    process stops non-zero and restarts from the ledger, instead of trading minutes
    late or growing without bound.
    """

    def __init__(
        self,
        *,
        degraded_depth: int = SIGNAL_BACKLOG_DEGRADED,
        hard_limit: int = SIGNAL_BACKLOG_LIMIT,
    ) -> None:
        super().__init__(name="processor", subscriber="signal subscriber", unit="signals")
        self.degraded_depth = degraded_depth
        self.hard_limit = hard_limit

    def subscribe(self, name: str, capacity: int | None = None) -> asyncio.Queue[Signal]:
        """Return a queue that receives every signal published from now on.

        `capacity` is how far this subscriber may fall behind before the process fails
        fast (default: the hub's hard limit); the queue itself never refuses a signal.
        """
        return self.add(name, FailFast(capacity if capacity is not None else self.hard_limit))

    def unsubscribe(self, name: str) -> None:
        self.remove(name)

    def publish(self, signals: Sequence[Signal]) -> None:  # type: ignore[override]
        self.publish_all(signals)

    def health(self) -> tuple[Status, str]:
        """BLOCKED past a hard limit, DEGRADED while a subscriber is far behind, else HEALTHY."""
        if self.failure is not None:
            return Status.BLOCKED, self.failure
        depths = self.depths()
        if not depths:
            return Status.HEALTHY, "no signal subscriber"
        text = ", ".join(
            f"{name} {depth} queued (fails at {self.limit(name)})" for name, depth in sorted(depths.items())
        )
        if any(depth >= self.degraded_depth for depth in depths.values()):
            return Status.DEGRADED, f"falling behind: {text}"
        return Status.HEALTHY, text

    async def watch(self, report: Callable[[Status, str], None], *, interval_s: float = 1.0) -> None:
        """Report depths every `interval_s` (gauge and health); raise FatalError past the hard limit."""
        while True:
            for name, depth in self.depths().items():
                SIGNAL_QUEUE_DEPTH.labels(name).set(depth)
            report(*self.health())
            if self.failure is not None:
                raise FatalError(f"processor: {self.failure}")
            try:
                await asyncio.wait_for(self.failed.wait(), interval_s)
            except TimeoutError:
                pass
