"""A backtest's strategy run over a tick tape: the kind's own fold, fed columns.

The live path hands a strategy MarketData chunks through the Processor's mailboxes;
over a tape the same StrategyLogic instance (one per instrument, as live) folds the
instrument's columns in chunks (`fold_columns`), so no object is built per tick. A
kind without `fold_columns` (a plug-in on the batch or simple interface) is handed
MarketData chunks built from the columns, exactly what the live path would give it.
Each signal is the Signal an execution would emit for it, from the same rows.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from backtesting.tick_tape import TickTape, collector_paused
from feeds.venues.construct import fast_constructor
from processor.backtest import BacktestSummary, JsonLinesWriter
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
        logic = logic_class(params)
        positions = tape.positions(symbol_id)
        execution_id = uuid.uuid4().hex[:16]
        arrays = tape.arrays() if only_signals and logic_class.folds_arrays() else None
        if arrays is not None and logic_class.folds_only_signal_outputs:  # the whole column, vectorised
            if positions is not None:
                chosen = np.asarray(positions)
                arrays = (arrays[0][chosen], arrays[1][chosen], None if arrays[2] is None else arrays[2][chosen])
            signal_rows: list[SignalRow] = []
            logic.fold_arrays(*arrays, [], signal_rows, only_signal_outputs=True)
            _Collector(found, logic, tape, strategy_id, name, symbol, execution_id, positions).add(0, None, signal_rows)
            outputs += len(arrays[0]) - logic.skipped_out_of_order
            skipped += logic.skipped_out_of_order
            continue
        if positions is None:
            times, prices, volumes = tape.times, tape.prices, tape.volumes
        else:
            times = [tape.times[i] for i in positions]
            prices = [tape.prices[i] for i in positions]
            volumes = [tape.volumes[i] for i in positions]
        if only_signals and logic_class.folds_only_signal_outputs:
            signal_rows = []
            logic.fold_columns(times, prices, volumes, [], signal_rows, only_signal_outputs=True)
            collect = _Collector(found, logic, tape, strategy_id, name, symbol, execution_id, positions)
            collect.add(0, None, signal_rows)
            outputs += len(times) - logic.skipped_out_of_order
            skipped += logic.skipped_out_of_order
            continue
        seq = 0
        collect = _Collector(found, logic, tape, strategy_id, name, symbol, execution_id, positions)
        for start in range(0, len(times), FOLD_CHUNK):
            end = start + FOLD_CHUNK
            rows: list[OutputRow] = []
            signal_rows = []
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
    with collector_paused():
        folded = fold_tape(kind=kind, params=params, tape=tape, name=name, only_signals=True)
        ordered = sorted(folded.signals, key=_replay_order(tape))
        if ordered:
            writer.signal_lines([s.signal for s in ordered])
    writer.outputs_seen += folded.outputs
    writer.flush()
    return BacktestSummary(
        ticks=len(tape),
        outputs=folded.outputs,
        signals=len(ordered),
        symbols=len(tape.symbols),
        seconds=time.perf_counter() - started,
    )


def _replay_order(tape: TickTape) -> Callable[[TapeSignal], tuple[int, ...]]:
    """The sort key that puts a tape's signals in the order the replay writes their lines.

    The replay writes each batch's lines sorted by time, stable over the order its
    strategy executions emitted them: by symbol, in the order the batch first shows each
    (then fold order, the signal's rank). One symbol: time, then rank.
    """
    if tape.symbol_ids is None:
        return lambda s: (s.signal.occurrence_ns, s.rank)
    ids, size = tape.symbol_ids, REPLAY_BATCH_TICKS
    symbol_ids = {symbol: number for number, symbol in enumerate(tape.symbols)}
    appearance: dict[int, dict[int, int]] = {}  # batch -> symbol id -> order of first appearance

    def key(s: TapeSignal) -> tuple[int, ...]:
        batch = s.index // size
        order = appearance.get(batch)
        if order is None:
            order = appearance[batch] = {}
            for symbol_id in ids[batch * size : (batch + 1) * size]:
                order.setdefault(symbol_id, len(order))
        return (batch, s.signal.occurrence_ns, order[symbol_ids[s.signal.symbol]], s.rank)

    return key
