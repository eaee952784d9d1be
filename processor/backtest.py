"""Backtests: the live Processor, executor and execution code fed by replayed ticks.

A replay of FeedData batches goes through `Processor.consume`, exactly as the feed
fan-out delivers live batches; the strategy sees the same code path it runs live.
The writer turns outputs and signals into JSON lines in exchange-time order, each
signal right after the output line of the tick that caused it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from core.fixed_point import fixed_to_str
from feeds.market import FeedData
from processor.backfill_source import NoHistory
from processor.outputs import OutputBatch, OutputRow, StrategyOutput
from processor.processor import Processor
from processor.routing import Degraded
from processor.signals import Signal, SignalKind
from processor.specs import StrategySpec
from processor.strategies import strategy_class

BACKTEST_FEED = "backtest"
_NS_PER_MS = 1_000_000


class BacktestError(RuntimeError):
    """The backtest could not run to the end (a route degraded)."""


@dataclass(frozen=True)
class BacktestSummary:
    ticks: int
    outputs: int
    signals: int
    symbols: int
    seconds: float

    @property
    def ticks_per_s(self) -> float:
        return self.ticks / self.seconds if self.seconds > 0 else 0.0


class JsonLinesWriter:
    """A StrategyEventSink that writes backtest JSON lines through `write` in blocks.

    The live processor folds a feed batch symbol by symbol, so within one replayed
    batch the lines of several symbols arrive grouped by symbol, not by time. The
    writer collects a replayed batch's lines (`end_batch` closes it, once every tick of
    it has been folded) and orders them by exchange time, stably: each signal stays
    right after the output line of the tick that caused it, and ties keep arrival order.
    Blocks are written only at batch ends, so a block boundary never reorders or loses
    a line. One symbol's lines already arrive in time order and are not sorted.
    """

    def __init__(
        self, write: Callable[[str], None], *, kind: str, signals_only: bool = False, block_lines: int = 4096
    ) -> None:
        self._write = write
        self._encode_values = strategy_class(kind).encode_values
        self._signals_only = signals_only
        self._block_lines = block_lines
        self._lines: list[str] = []
        # Rows of the latest output batch not written yet: written up to each signal, then the rest.
        self._pending: OutputBatch | None = None
        self._pending_from = 0
        # The open replay batch: where its lines start, what each run of lines came from
        # (output rows, or one signal's time) and whether more than one symbol wrote.
        self._batch_start = 0
        self._runs: list[Sequence[OutputRow] | int] = []
        self._symbol: str | None = None
        self._mixed = False
        self.outputs_seen = 0
        self.signals_seen = 0

    @property
    def signals_only(self) -> bool:
        return self._signals_only

    def outputs(self, batch: OutputBatch) -> None:
        self.outputs_seen += len(batch.rows)
        if self._signals_only:
            return
        self._append_pending(None)
        self._pending = batch
        self._pending_from = 0

    def signals(self, signals: Sequence[Signal], outputs: Sequence[StrategyOutput]) -> None:
        self.signals_seen += len(signals)
        lines = self._lines
        for signal, output in zip(signals, outputs, strict=True):
            if not self._signals_only:
                self._append_pending(output.output_id)
            self._saw(signal.symbol)
            self._runs.append(signal.occurrence_ns)
            lines.append(_signal_line(signal))

    def signal_lines(self, lines: Sequence[str]) -> None:
        """Append signal lines (`signal_line`) already in their order, in one go (a signals-only writer only).

        They are one closed batch: written as they are, never sorted with other lines.
        """
        if not self._signals_only:
            raise ValueError("signal_lines needs a signals-only writer: output lines would be missing")
        self.end_batch()
        self.signals_seen += len(lines)
        self._lines.extend(lines)
        self._batch_start = len(self._lines)

    def end_batch(self) -> None:
        """Close the replayed batch (all of it folded): order its lines by time, write full blocks."""
        self._append_pending(None)
        if self._mixed:
            self._sort_batch()
        self._runs = []
        self._symbol = None
        self._mixed = False
        if len(self._lines) >= self._block_lines:
            self._write_lines()
        self._batch_start = len(self._lines)

    def _saw(self, symbol: str) -> None:
        if self._symbol is None:
            self._symbol = symbol
        elif symbol != self._symbol:
            self._mixed = True

    def _sort_batch(self) -> None:
        lines = self._lines
        keys: list[int] = []  # each line's exchange time, in line order
        for run in self._runs:
            if isinstance(run, int):
                keys.append(run)
            else:
                keys.extend(row[1] for row in run)
        start = self._batch_start
        order = sorted(range(len(keys)), key=keys.__getitem__)  # stable: ties keep arrival order
        lines[start:] = [lines[start + i] for i in order]

    def _append_pending(self, through_output_id: str | None) -> None:
        """Append pending rows, through the row of `through_output_id` (all when None)."""
        batch = self._pending
        if batch is None:
            return
        end = len(batch.rows)
        if through_output_id is not None:
            end = int(through_output_id.rsplit(":", 1)[1]) - batch.first_seq + 1
        rows = batch.rows[self._pending_from : end]
        if rows:
            encode = self._encode_values
            symbol = batch.symbol
            lines = self._lines
            self._saw(symbol)
            self._runs.append(rows)
            for row in rows:
                lines.append(
                    orjson.dumps(
                        {
                            "type": "output",
                            "symbol": symbol,
                            "time_ms": row[0] // _NS_PER_MS,
                            "occurrence_time_ms": row[1] // _NS_PER_MS,
                            "values": encode(row),
                        }
                    ).decode()
                )
        self._pending_from = end
        if end >= len(batch.rows):
            self._pending = None

    def _write_lines(self) -> None:
        if self._lines:
            self._write("\n".join(self._lines) + "\n")
            self._lines = []
        self._batch_start = 0

    def flush(self) -> None:
        """Write everything, the pending rows of the latest batch included."""
        self.end_batch()
        self._write_lines()


def signal_line_document(signal: Signal) -> dict[str, Any]:
    """The JSON object of a signal line (`_signal_line` writes it faster, byte for byte the same)."""
    return {
        "type": "signal",
        "symbol": signal.symbol,
        "kind": signal.kind.value,
        "occurrence_time_ms": signal.occurrence_ns // _NS_PER_MS,
        "price": fixed_to_str(signal.price),
    }


# A backtest writes tens of thousands of signal lines over a few symbols and often repeated
# prices: the line's fixed head per (symbol, kind) and the price texts are kept, bounded.
_LINE_CACHE_SIZE = 65_536
_line_heads: dict[tuple[str, Any], str] = {}
_price_texts: dict[int, str] = {}


def _signal_line(signal: Signal) -> str:
    return signal_line(signal.symbol, signal.kind, signal.occurrence_ns, signal.price)


def signal_line(symbol: str, kind: SignalKind, occurrence_ns: int, price: int) -> str:
    """The JSON line of one signal: `signal_line_document`'s compact JSON, byte for byte."""
    head = _line_heads.get((symbol, kind))
    if head is None:
        if len(_line_heads) >= _LINE_CACHE_SIZE:
            _line_heads.clear()
        # orjson's compact form of the document's first three members, the fourth's name.
        body = orjson.dumps({"type": "signal", "symbol": symbol, "kind": kind.value}).decode()
        head = _line_heads[(symbol, kind)] = body[:-1] + ',"occurrence_time_ms":'
    text = _price_texts.get(price)
    if text is None:
        if len(_price_texts) >= _LINE_CACHE_SIZE:
            _price_texts.clear()
        text = _price_texts[price] = fixed_to_str(price)  # digits, point, sign: no escape
    return f'{head}{occurrence_ns // _NS_PER_MS},"price":"{text}"}}'


async def run_backtest(
    *,
    kind: str,
    params: Mapping[str, Any],
    batches: Iterable[FeedData] | AsyncIterable[FeedData],
    writer: JsonLinesWriter,
    strategy_id: int = 0,
    name: str = "backtest",
) -> BacktestSummary:
    """Replay `batches` through a Processor running one strategy on every symbol they contain."""
    processor = Processor(sink=writer, history=NoHistory())
    processor.start()
    instruments: set[tuple[str, str]] = set()
    ticks = 0
    started = time.perf_counter()

    async def replay(batch: FeedData) -> None:
        nonlocal ticks
        new = {(batch.feed, event.symbol) for event in batch.events} - instruments
        if new:
            # A symbol first seen: route it before its first tick, as a live Reconcile would.
            instruments.update(new)
            processor.reconcile(
                [
                    StrategySpec.build(
                        strategy_id=strategy_id,
                        name=name,
                        kind=kind,
                        params=params,
                        instruments=frozenset(instruments),
                    )
                ]
            )
            await processor.settled()
        ticks += len(batch.events)
        await processor.consume(batch)
        # Every tick of the batch folded before the writer orders its lines.
        await processor.drained()
        writer.end_batch()

    try:
        if isinstance(batches, AsyncIterable):
            async for batch in batches:
                await replay(batch)
        else:
            for batch in batches:
                await replay(batch)
        await processor.drained()
        degraded = [
            f"{route.spec.name}: {route.state.cause}"
            for route in processor.snapshot.routes_by_strategy.values()
            if isinstance(route.state, Degraded)
        ]
        if degraded:
            raise BacktestError(f"route degraded: {'; '.join(degraded)}")
    finally:
        await processor.stop()
    writer.flush()
    return BacktestSummary(
        ticks=ticks,
        outputs=writer.outputs_seen,
        signals=writer.signals_seen,
        symbols=len(instruments),
        seconds=time.perf_counter() - started,
    )
