"""The live sink of strategy events: the trade executor, the store and browsers.

Signals go at once to the SignalHub (the trade executor), and are buffered for the
store (flushed every `signal_flush_interval_s`) and for browsers. Outputs are far too
many to store or push one by one: only the latest per (strategy, instrument) is kept,
pushed every `push_interval_s` and stored every `output_persist_interval_s`. Buffers
are bounded; overflow is counted and warned about, never silent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from core.fixed_point import fixed_to_str
from core.log_throttle import FailureLog
from core.push_groups import MARKET_GROUP
from processor.outputs import OutputBatch, StrategyOutput
from processor.signals import Signal, SignalHub
from processor.strategies import output_json_values

log = logging.getLogger(__name__)

SIGNAL_BUFFER_CAPACITY = 10_000
OUTPUT_MESSAGE = "strategy.output"
SIGNAL_MESSAGE = "strategy.signal"

OutputKey = tuple[int, str, str]  # (strategy id, feed, venue symbol)


class GroupSender(Protocol):
    async def group_send(self, group: str, message: dict[str, Any]) -> None: ...


class PersistEvents(Protocol):
    def __call__(
        self, *, signals: Sequence[tuple[Signal, StrategyOutput]], outputs: Sequence[StrategyOutput]
    ) -> Awaitable[None]: ...


def output_message_row(output: StrategyOutput, symbol: str) -> dict[str, Any]:
    return {
        "strategy_id": output.strategy_id,
        "strategy": output.strategy_name,
        "feed": output.feed,
        "symbol": symbol,
        "venue_symbol": output.symbol,
        "time_ms": output.time_ns // 1_000_000,
        "occurrence_time_ms": output.occurrence_ns // 1_000_000,
        "values": output_json_values(output),
    }


def signal_message_row(signal: Signal, symbol: str) -> dict[str, Any]:
    return {
        "strategy_id": signal.strategy_id,
        "strategy": signal.strategy_name,
        "feed": signal.feed,
        "symbol": symbol,
        "venue_symbol": signal.symbol,
        "kind": signal.kind.value,
        "price": fixed_to_str(signal.price),
        "emitted_ms": signal.emitted_ns // 1_000_000,
        "occurrence_time_ms": signal.occurrence_ns // 1_000_000,
        "output_id": signal.output_id,
    }


class LiveStrategyEvents:
    def __init__(
        self,
        *,
        hub: SignalHub,
        layer: GroupSender,
        persist: PersistEvents,
        symbols: Mapping[tuple[str, str], str] | None = None,
        push_interval_s: float = 0.25,
        signal_flush_interval_s: float = 0.5,
        output_persist_interval_s: float = 5.0,
        buffer_capacity: int = SIGNAL_BUFFER_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        warn_interval_s: float = 10.0,
    ) -> None:
        self._hub = hub
        self._layer = layer
        self._persist = persist
        self._symbols = symbols or {}
        self.push_interval_s = push_interval_s
        self.signal_flush_interval_s = signal_flush_interval_s
        self._output_persist_interval_s = output_persist_interval_s
        self._capacity = buffer_capacity
        self._clock = clock
        self._warn_interval_s = warn_interval_s
        self._last_warned = float("-inf")
        self._store_failures = FailureLog(
            log,
            "processor: storing signals (kept and retried with the next flush)",
            interval_s=warn_interval_s,
            monotonic=clock,
        )
        self._push_failures = FailureLog(
            log, "processor: push to browsers", interval_s=warn_interval_s, monotonic=clock
        )
        self._latest: dict[OutputKey, OutputBatch] = {}
        # The batch each key's last push and last store took: a key whose latest batch is
        # another one has new outputs. Compared when pushing or storing, a few times a
        # second, instead of marking keys dirty on every batch.
        self._pushed: dict[OutputKey, OutputBatch] = {}
        self._stored: dict[OutputKey, OutputBatch] = {}
        self._push_signals: list[Signal] = []
        self._store_signals: list[tuple[Signal, StrategyOutput]] = []
        self._last_output_store = float("-inf")
        self.dropped_signals = 0
        self.signals_stored = 0
        self.outputs_stored = 0

    # -- the sink (hot path: no I/O) ------------------------------------------------

    def outputs(self, batch: OutputBatch) -> None:
        self._latest[(batch.strategy_id, batch.feed, batch.symbol)] = batch

    def _changed(self, taken: dict[OutputKey, OutputBatch]) -> list[OutputKey]:
        """The keys with outputs newer than what `taken` holds, in key order; `taken` catches up."""
        changed = sorted(key for key, batch in self._latest.items() if taken.get(key) is not batch)
        latest = self._latest
        for key in changed:
            taken[key] = latest[key]
        return changed

    def signals(self, signals: Sequence[Signal], outputs: Sequence[StrategyOutput]) -> None:
        self._hub.publish(signals)
        for signal, output in zip(signals, outputs):
            if len(self._store_signals) >= self._capacity:
                self._count_dropped()
                continue
            self._store_signals.append((signal, output))
            if len(self._push_signals) < self._capacity:
                self._push_signals.append(signal)

    def _count_dropped(self) -> None:
        self.dropped_signals += 1
        now = self._clock()
        if now - self._last_warned >= self._warn_interval_s:
            self._last_warned = now
            log.warning("processor: signal store buffer full, %d signals not stored", self.dropped_signals)

    # -- pushes to browsers ---------------------------------------------------------

    def _symbol(self, feed: str, venue_symbol: str) -> str:
        return self._symbols.get((feed, venue_symbol), venue_symbol)

    def take_push_messages(self) -> list[dict[str, Any]]:
        """Return the conflated messages for browsers since the last call."""
        messages: list[dict[str, Any]] = []
        changed = self._changed(self._pushed)
        if changed:
            rows = [output_message_row(self._latest[key].last(), self._symbol(key[1], key[2])) for key in changed]
            messages.append({"type": OUTPUT_MESSAGE, "outputs": rows})
        if self._push_signals:
            rows = [signal_message_row(s, self._symbol(s.feed, s.symbol)) for s in self._push_signals]
            self._push_signals = []
            messages.append({"type": SIGNAL_MESSAGE, "signals": rows})
        return messages

    async def run_push(self) -> None:
        while True:
            await asyncio.sleep(self.push_interval_s)
            for message in self.take_push_messages():
                try:
                    await self._layer.group_send(MARKET_GROUP, message)
                except Exception as exc:
                    # The next push carries the newer state; never stop the processor for a browser.
                    self._push_failures.failed(exc)
                else:
                    self._push_failures.succeeded("pushing to browsers again")

    # -- the store ------------------------------------------------------------------

    def take_store_batch(
        self, *, force_outputs: bool = False
    ) -> tuple[list[tuple[Signal, StrategyOutput]], list[StrategyOutput]]:
        """Return the signals to store, and the latest outputs when their interval has passed."""
        signals, self._store_signals = self._store_signals, []
        outputs: list[StrategyOutput] = []
        now = self._clock()
        if force_outputs or now - self._last_output_store >= self._output_persist_interval_s:
            changed = self._changed(self._stored)
            if changed:
                self._last_output_store = now
                outputs = [self._latest[key].last() for key in changed]
        return signals, outputs

    async def flush(self, *, force_outputs: bool = False) -> None:
        signals, outputs = self.take_store_batch(force_outputs=force_outputs)
        if not signals and not outputs:
            return
        try:
            await self._persist(signals=signals, outputs=outputs)
        except Exception as exc:
            self._store_failures.failed(exc)
            # Signals must be stored: put them back ahead of newer ones, within the bound.
            room = self._capacity - len(self._store_signals)
            kept = signals[: max(room, 0)]
            for _ in signals[len(kept) :]:
                self._count_dropped()
            self._store_signals = kept + self._store_signals
            return
        self._store_failures.succeeded("storing signals again")
        self.signals_stored += len(signals)
        self.outputs_stored += len(outputs)

    async def run_store(self) -> None:
        while True:
            await asyncio.sleep(self.signal_flush_interval_s)
            await self.flush()
