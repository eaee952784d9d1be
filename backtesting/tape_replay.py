"""A backtest's strategy run over a tick tape: the kind's own fold, fed columns.

The live path hands a strategy MarketData chunks through the Processor's mailboxes;
over a tape the same StrategyLogic instance (one per instrument, as live) folds the
instrument's columns in chunks (`fold_columns`), so no object is built per tick. A
kind without `fold_columns` (a plug-in on the batch or simple interface) is handed
MarketData chunks built from the columns, exactly what the live path would give it.
Each signal is the Signal an execution would emit for it, from the same rows.
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from backtesting.tick_tape import TickTape, collector_paused
from feeds.venues.construct import fast_constructor
from processor.backtest import BacktestSummary, JsonLinesWriter, signal_line
from processor.outputs import OutputBatch, OutputRow, StrategyOutput, output_id
from processor.signals import Signal
from processor.strategies import strategy_class
from processor.strategies.base import SignalRow, StrategyLogic

FOLD_CHUNK = 256  # ticks per fold call, as many as a live batch: a chunk's rows stay in cache
REPLAY_BATCH_TICKS = 256  # the batches whose line order a signals-only tape run writes
_make_signal = fast_constructor(Signal)  # Signal(...) without the per-field frozen setattr


@dataclass(slots=True)  # not frozen: a frozen __init__ per signal costs more than the signal's fold
class TapeSignal:
    index: int  # the tape index of the tick that caused it (its row's tick when none was skipped)
    rank: int  # the order the live processor emits it in: by instrument, then in fold order
    signal: Signal
    batch: OutputBatch | None  # the rows of the fold call that emitted it (None: a fold of signals only)
    row: int

    @property
    def output(self) -> StrategyOutput:
        """The output the signal was derived from (built when asked: a run with fills never needs it)."""
        if self.batch is None:
            raise ValueError("a fold of signals only kept no output rows")
        return self.batch.output(self.row)


@dataclass(frozen=True)
class TapeFold:
    signals: list[TapeSignal]  # by instrument in order of first appearance, each in time order
    outputs: int
    skipped_out_of_order: int


def fold_tape(
    *,
    kind: str,
    params: Mapping[str, Any],
    tape: TickTape,
    strategy_id: int = 0,
    name: str = "backtest",
    only_signals: bool = False,
) -> TapeFold:
    """Run one strategy of `kind` on every instrument of the tape and collect what it emits.

    With `only_signals`, a kind that `folds_only_signal_outputs` folds each instrument's
    whole column in one call and builds no output row: its signals carry no `output`.
    A kind that also `folds_arrays` folds the tape's int64 arrays, vectorised, when the
    tape was read as arrays.
    """
    logic_class = strategy_class(kind)
    found: list[TapeSignal] = []
    outputs = skipped = 0
    for symbol_id, symbol in enumerate(tape.symbols):
        execution_id = uuid.uuid4().hex[:16]
        whole = _fold_signals_only(logic_class, params, tape, symbol_id) if only_signals else None
        if whole is not None:
            collect = _Collector(found, whole.logic, tape, strategy_id, name, symbol, execution_id, whole.positions)
            collect.add(0, None, whole.rows)
            outputs += whole.outputs
            skipped += whole.logic.skipped_out_of_order
            continue
        logic = logic_class(params)
        positions = tape.positions(symbol_id)
        times, prices, volumes = _columns(tape, positions)
        seq = 0
        collect = _Collector(found, logic, tape, strategy_id, name, symbol, execution_id, positions)
        for start in range(0, len(times), FOLD_CHUNK):
            end = start + FOLD_CHUNK
            rows: list[OutputRow] = []
            signal_rows: list[SignalRow] = []
            if logic.folds_columns():
                logic.fold_columns(times[start:end], prices[start:end], volumes[start:end], rows, signal_rows)
            else:
                chunk = range(start, min(end, len(times)))
                ticks = [tape.tick(i if positions is None else positions[i]) for i in chunk]
                logic.fold(ticks, rows, signal_rows)
            if signal_rows:
                collect.add(seq, rows, signal_rows)
            seq += len(rows)
        outputs += seq
        skipped += logic.skipped_out_of_order
    return TapeFold(signals=found, outputs=outputs, skipped_out_of_order=skipped)


def _columns(tape: TickTape, positions: list[int] | None) -> tuple[list[int], list[int], list[int]]:
    if positions is None:
        return tape.times, tape.prices, tape.volumes
    times, prices, volumes = tape.times, tape.prices, tape.volumes
    return [times[i] for i in positions], [prices[i] for i in positions], [volumes[i] for i in positions]


@dataclass(frozen=True)
class _WholeFold:
    logic: StrategyLogic
    positions: list[int] | None  # the instrument's tape indices (None: the tape has one symbol)
    rows: list[SignalRow]
    outputs: int


def _fold_signals_only(
    logic_class: type[StrategyLogic], params: Mapping[str, Any], tape: TickTape, symbol_id: int
) -> _WholeFold | None:
    """One instrument's whole column folded for its signals only (None: the kind cannot).

    A kind that `folds_arrays` folds the tape's int64 arrays when the tape has them; else
    `fold_columns` folds the lists.
    """
    if not logic_class.folds_only_signal_outputs:
        return None
    logic = logic_class(params)
    positions = tape.positions(symbol_id)
    rows: list[SignalRow] = []
    arrays = tape.arrays() if logic_class.folds_arrays() else None
    if arrays is not None:
        if positions is not None:
            chosen = np.asarray(positions)
            arrays = (arrays[0][chosen], arrays[1][chosen], None if arrays[2] is None else arrays[2][chosen])
        logic.fold_arrays(*arrays, [], rows, only_signal_outputs=True)
        count = len(arrays[0])
    else:
        times, prices, volumes = _columns(tape, positions)
        logic.fold_columns(times, prices, volumes, [], rows, only_signal_outputs=True)
        count = len(times)
    return _WholeFold(logic, positions, rows, count - logic.skipped_out_of_order)


@dataclass(slots=True)
class _Collector:
    """Turns one instrument's signal rows into TapeSignals (the Signal an execution would emit)."""

    found: list[TapeSignal]
    logic: StrategyLogic
    tape: TickTape
    strategy_id: int
    name: str
    symbol: str
    execution_id: str
    positions: list[int] | None

    def add(self, first_seq: int, rows: list[OutputRow] | None, signal_rows: list[SignalRow]) -> None:
        """Collect the signals of a fold call whose first row is `first_seq` (`rows` None: none were built)."""
        tape, positions, found, execution_id = self.tape, self.positions, self.found, self.execution_id
        batch = None
        if rows is not None:
            batch = OutputBatch(
                self.strategy_id,
                self.name,
                type(self.logic).kind,
                tape.feed,
                self.symbol,
                execution_id,
                self.logic.output_names,
                first_seq,
                rows,
            )
        emitted_ns = time.time_ns()
        for index, kind, price, ts in signal_rows:
            # Signal(strategy_id, strategy_name, feed, symbol, kind, price, emitted_ns, occurrence_ns, output_id)
            signal = _make_signal(
                self.strategy_id,
                self.name,
                tape.feed,
                self.symbol,
                kind,
                price,
                emitted_ns,
                ts,
                output_id(execution_id, first_seq + index),
            )
            at = first_seq + index  # the instrument's tick index when none was skipped
            found.append(
                TapeSignal(
                    index=at if positions is None else positions[min(at, len(positions) - 1)],
                    rank=len(found),
                    signal=signal,
                    batch=batch,
                    row=index,
                )
            )


def run_tape_backtest(
    *, kind: str, params: Mapping[str, Any], tape: TickTape, writer: JsonLinesWriter, name: str = "backtest"
) -> BacktestSummary:
    """The signals-only backtest over a tape: the lines the processor's replay writes, through `writer`.

    Only signal lines are produced, so a writer that would also write output lines is refused.
    The lines come in the replay's order (batches of REPLAY_BATCH_TICKS): by batch, then
    exchange time, then, for equal times, by the order the batch first shows their
    symbols. A tape of several symbols whose times go backwards is refused (ValueError):
    its signals' tape positions are not known here, so it is replayed instead.
    """
    if not writer.signals_only:
        raise ValueError("run_tape_backtest writes signal lines only: give it a JsonLinesWriter with signals_only=True")
    if len(tape.symbols) > 1 and not tape.in_time_order():
        raise ValueError("a tape of several symbols whose times go backwards is replayed, not folded whole")
    started = time.perf_counter()
    logic_class = strategy_class(kind)
    with collector_paused():
        if logic_class.folds_only_signal_outputs:
            lines, outputs = _whole_signal_lines(logic_class, params, tape)
        else:
            folded = fold_tape(kind=kind, params=params, tape=tape, name=name, only_signals=True)
            key = _replay_key(tape)
            number = {symbol: n for n, symbol in enumerate(tape.symbols)}
            ordered = sorted(
                folded.signals,
                key=lambda s: key(s.index, s.signal.occurrence_ns, number[s.signal.symbol], s.rank),
            )
            lines = [
                signal_line(s.signal.symbol, s.signal.kind, s.signal.occurrence_ns, s.signal.price) for s in ordered
            ]
            outputs = folded.outputs
        if lines:
            writer.signal_lines(lines)
    writer.outputs_seen += outputs
    writer.flush()
    return BacktestSummary(
        ticks=len(tape),
        outputs=outputs,
        signals=len(lines),
        symbols=len(tape.symbols),
        seconds=time.perf_counter() - started,
    )


def _whole_signal_lines(
    logic_class: type[StrategyLogic], params: Mapping[str, Any], tape: TickTape
) -> tuple[list[str], int]:
    """Every instrument's signal lines, in the replay's order, straight from the signal rows; and the outputs."""
    if len(tape.symbols) == 1:  # one fold: its rows are in time order already
        whole = _fold_signals_only(logic_class, params, tape, 0)
        assert whole is not None
        symbol = tape.symbols[0]
        return [signal_line(symbol, kind, ts, price) for _, kind, price, ts in whole.rows], whole.outputs
    key = _replay_key(tape)
    keyed: list[tuple[tuple[int, ...], str]] = []
    outputs = 0
    for symbol_id, symbol in enumerate(tape.symbols):
        whole = _fold_signals_only(logic_class, params, tape, symbol_id)
        assert whole is not None and whole.positions is not None
        outputs += whole.outputs
        positions = whole.positions  # in time order, nothing skipped: row n is the symbol's tick n
        for index, kind, price, ts in whole.rows:
            keyed.append((key(positions[index], ts, symbol_id, len(keyed)), signal_line(symbol, kind, ts, price)))
    keyed.sort(key=operator.itemgetter(0))
    return [line for _, line in keyed], outputs


def _replay_key(tape: TickTape) -> Callable[[int, int, int, int], tuple[int, ...]]:
    """The sort key (of a signal's tape index, time, symbol number and rank) of the replay's line order.

    The replay writes each batch's lines sorted by time, stable over the order its
    strategy executions emitted them: by symbol, in the order the batch first shows each,
    then fold order (the rank). One symbol: time, then rank.
    """
    if tape.symbol_ids is None:
        return lambda index, ts, symbol_id, rank: (ts, rank)
    ids, size = tape.symbol_ids, REPLAY_BATCH_TICKS
    appearance: dict[int, dict[int, int]] = {}  # batch -> symbol number -> order of first appearance

    def key(index: int, ts: int, symbol_id: int, rank: int) -> tuple[int, ...]:
        batch = index // size
        order = appearance.get(batch)
        if order is None:
            order = appearance[batch] = {}
            for seen in ids[batch * size : (batch + 1) * size]:
                order.setdefault(seen, len(order))
        return (batch, ts, order[symbol_id], rank)

    return key
