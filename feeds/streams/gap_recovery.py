"""Gap recovery: REST windows from the checkpoint to a given end, through the consistency layer.

TradeRecoveryController fetches one window and passes every trade through the same
consistency controller as the live stream. RuntimeRecoveryCoordinator reads the
checkpoint, plans windows and runs them one after another, never two at once. It
never reads a clock: the lifecycle owner passes the end time. A checkpoint older than
the venue's retention cannot be recovered in full; the coordinator says so in the
result (`hole`) and recovers what the venue still has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from feeds.market import MarketData
from feeds.streams.consistency import TradeRejected, TradeStreamConsistencyController, TradeStreamStateStoreProtocol
from feeds.streams.window_planner import TradeRecoveryWindow, TradeRecoveryWindowPlanner


class TradeHistorySource(Protocol):
    """Fetches every trade of a window, oldest first (paging is the source's business)."""

    async def fetch_window(self, window: TradeRecoveryWindow, after: MarketData | None) -> Sequence[MarketData]: ...


@dataclass(frozen=True, slots=True)
class KnownHoleSpan:
    """Trades between these bounds (UTC ms) are gone from the venue."""

    symbol: str
    start_time: int
    end_time: int


@dataclass(frozen=True, slots=True)
class TradeRecoveryResult:
    symbol: str
    requested_start_time: int
    requested_end_time: int
    recovered_trades: tuple[MarketData, ...]
    hole: KnownHoleSpan | None = None


RecoveredSink = Callable[[Sequence[MarketData]], None]


class TradeRecoveryController:
    """Recovers one window: fetch, then accept through the shared consistency controller.

    Accepted trades go to `sink` as soon as their window is done: once the checkpoint
    has moved past them they must be delivered, even if a later window fails.
    """

    __slots__ = ("_consistency", "_sink", "_source", "rejected")

    def __init__(
        self,
        source: TradeHistorySource,
        consistency: TradeStreamConsistencyController,
        *,
        sink: RecoveredSink | None = None,
    ) -> None:
        self._source = source
        self._consistency = consistency
        self._sink = sink
        self.rejected = 0

    @property
    def consistency(self) -> TradeStreamConsistencyController:
        return self._consistency

    async def recover(self, window: TradeRecoveryWindow) -> tuple[MarketData, ...]:
        state = self._consistency.store.get(window.symbol)
        after = state.last_trade if state is not None else None
        accepted = []
        for trade in await self._source.fetch_window(window, after):
            try:
                if self._consistency.accept(trade) is not None:
                    accepted.append(trade)
            except TradeRejected:
                self.rejected += 1
        if accepted and self._sink is not None:
            self._sink(accepted)
        return tuple(accepted)


@runtime_checkable
class RuntimeRecoveryProtocol(Protocol):
    async def recover(self, symbol: str, recovery_end_time: int) -> TradeRecoveryResult: ...


def ns_to_ms(ts_ns: int) -> int:
    """Integer UTC ns to Unix ms, rounding down, with no float on the way."""
    return ts_ns // 1_000_000


class RuntimeRecoveryCoordinator:
    __slots__ = ("_controller", "_planner", "_retention_ms", "_store")

    def __init__(
        self,
        state_store: TradeStreamStateStoreProtocol,
        planner: TradeRecoveryWindowPlanner,
        controller: TradeRecoveryController,
        *,
        retention_ms: int | None = None,
    ) -> None:
        self._store = state_store
        self._planner = planner
        self._controller = controller
        self._retention_ms = retention_ms

    async def recover(
        self,
        symbol: str,
        recovery_end_time: int,
        *,
        start_if_no_checkpoint: int | None = None,
    ) -> TradeRecoveryResult:
        """Recover [checkpoint time, recovery_end_time] of `symbol`; empty when there is no checkpoint.

        `start_if_no_checkpoint` (Unix ms) lets the lifecycle owner recover a symbol that
        has had no trade yet since the stream first subscribed; the coordinator still
        creates no state itself (the consistency layer does, on the first accepted trade).
        Errors of the store, planner and controller pass through unchanged.
        """
        state = self._store.get(symbol)
        checkpoint = state.last_trade if state is not None else None
        if checkpoint is None:
            if start_if_no_checkpoint is None or start_if_no_checkpoint >= recovery_end_time:
                return TradeRecoveryResult(symbol, recovery_end_time, recovery_end_time, ())
            start = start_if_no_checkpoint
        else:
            start = min(ns_to_ms(checkpoint.ts_event), recovery_end_time)
        hole = None
        if self._retention_ms is not None and recovery_end_time - start > self._retention_ms:
            reachable = recovery_end_time - self._retention_ms
            hole = KnownHoleSpan(symbol, start, reachable)
            start = reachable
        recovered: list[MarketData] = []
        for window in self._planner.build_windows(symbol, start, recovery_end_time):
            recovered.extend(await self._controller.recover(window))
        return TradeRecoveryResult(symbol, start, recovery_end_time, tuple(recovered), hole)
