"""A backtest with fills and money: the live strategy code's signals, traded by a simulated account.

The replay goes through the live Processor (processor.backtest.run_backtest). After each
replayed batch has been folded, its ticks and the signals they caused are merged in
exchange-time order into the simulated account: each tick first fills what is working,
then the signals it caused are decided, so an order fills from the next tick on, never
on the tick that caused it, as on the live paper exchange.

Over a tick tape (`run_filled_tape`) the same decisions are reached without a per-tick
step: the strategy folds the tape's columns (backtesting.tape_replay), each signal is
decided after the tick the batch merge above would decide it after, and the account
sees only the ticks it can act on, those of an instrument with a working order or an
open position whose exit levels are armed, plus each instrument's last tick. The results are the merge's, to the fee and the
nanosecond (a test replays random tapes both ways); a tape whose times go backwards,
or batches the processor would route in slices, take the merge path itself.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backtesting.simulated_account import SimulatedAccount, SimulatedSettings
from backtesting.tape_replay import TapeSignal, fold_tape
from backtesting.tick_tape import TickTape, collector_paused
from feeds.market import FeedData, MarketData
from processor.backtest import BacktestSummary, JsonLinesWriter, run_backtest
from processor.backtest_report import BacktestReport, build_report
from processor.outputs import StrategyOutput
from processor.processor import MAX_SLICE_TICKS
from processor.signals import Signal


class _SignalCollector(JsonLinesWriter):
    """The JSON lines writer that also keeps each batch's signals for the simulated account."""

    def __init__(self, write: Callable[[str], None], *, kind: str, signals_only: bool) -> None:
        super().__init__(write, kind=kind, signals_only=signals_only)
        self.pending: list[Signal] = []

    def signals(self, signals: Sequence[Signal], outputs: Sequence[StrategyOutput]) -> None:
        self.pending.extend(signals)
        super().signals(signals, outputs)


@dataclass(frozen=True)
class FilledBacktest:
    summary: BacktestSummary
    account: SimulatedAccount
    report: BacktestReport


def _merge(account: SimulatedAccount, ticks: Sequence[MarketData], signals: list[Signal]) -> None:
    ordered = sorted(signals, key=lambda s: s.occurrence_ns)
    at = 0
    for tick in sorted(ticks, key=lambda t: t.ts_event):
        account.tick(tick)
        while at < len(ordered) and ordered[at].occurrence_ns <= tick.ts_event:
            account.signal(ordered[at])
            at += 1
    for signal in ordered[at:]:  # caused by a tick of an earlier batch, decided last
        account.signal(signal)


async def run_filled_backtest(
    *,
    kind: str,
    params: Mapping[str, Any],
    batches: Iterable[FeedData],
    settings: SimulatedSettings,
    write: Callable[[str], None] = lambda line: None,
    signals_only: bool = True,
    close_at_end: bool = True,
) -> FilledBacktest:
    """Run the backtest and trade its signals; the report covers the replayed ticks' time range."""
    writer = _SignalCollector(write, kind=kind, signals_only=signals_only)
    account = SimulatedAccount(settings)
    span: list[int] = []

    async def replay() -> AsyncIterator[FeedData]:
        previous: FeedData | None = None
        for batch in batches:
            if previous is not None:
                _trade(previous)
            yield batch
            previous = batch
        if previous is not None:
            _trade(previous)

    def _trade(batch: FeedData) -> None:
        ticks = [event for event in batch.events if isinstance(event, MarketData)]
        if ticks:
            first, last = min(t.ts_event for t in ticks), max(t.ts_event for t in ticks)
            span[:] = [min(span[0], first), max(span[1], last)] if span else [first, last]
        signals, writer.pending = writer.pending, []
        _merge(account, ticks, signals)

    summary = await run_backtest(kind=kind, params=params, batches=replay(), writer=writer)
    if writer.pending:
        _merge(account, [], writer.pending)
    if close_at_end:
        account.close_all()
    start_ns, end_ns = (span[0], span[1]) if span else (0, 0)
    report = build_report(account.closed, starting_capital=settings.capital, start_ns=start_ns, end_ns=end_ns)
    return FilledBacktest(summary=summary, account=account, report=report)


async def run_filled_tape(
    *,
    kind: str,
    params: Mapping[str, Any],
    tape: TickTape,
    settings: SimulatedSettings,
    batch_ticks: int = 256,
    close_at_end: bool = True,
) -> FilledBacktest:
    """`run_filled_backtest` over a tape replayed in batches of `batch_ticks`, with the same results."""
    if not tape.in_time_order() or (len(tape.symbols) > 1 and batch_ticks > MAX_SLICE_TICKS):
        return await run_filled_backtest(
            kind=kind, params=params, batches=tape.batches(batch_ticks), settings=settings, close_at_end=close_at_end
        )
    started = time.perf_counter()
    account = SimulatedAccount(settings)
    with collector_paused():
        folded = fold_tape(kind=kind, params=params, tape=tape, only_signals=True)  # fills need no output rows
        at = 0  # the next tape index the account has not been offered
        for index, signal in _decisions(tape, folded.signals, batch_ticks):
            if at <= index:
                _offer(account, tape, at, index + 1)
                at = index + 1
            account.signal(signal)
        _offer(account, tape, at, len(tape))
        for index in _last_ticks(tape):
            account.seen(tape.tick(index))
        if close_at_end:
            account.close_all()
    start_ns, end_ns = (tape.times[0], tape.times[-1]) if len(tape) else (0, 0)
    report = build_report(account.closed, starting_capital=settings.capital, start_ns=start_ns, end_ns=end_ns)
    summary = BacktestSummary(
        ticks=len(tape),
        outputs=folded.outputs,
        signals=len(folded.signals),
        symbols=len(tape.symbols),
        seconds=time.perf_counter() - started,
    )
    return FilledBacktest(summary=summary, account=account, report=report)


def _decisions(tape: TickTape, signals: Sequence[TapeSignal], batch_ticks: int) -> list[tuple[int, Signal]]:
    """Each signal with the tape index of the tick after which the batch merge decides it, in decision order.

    The merge decides a batch's signals, in the order the processor emitted them (by
    instrument in order of first appearance in the batch, each in fold order) sorted
    stably by time, each right after the batch's first tick at or past its time.
    """
    times, ids = tape.times, tape.symbol_ids
    keyed: list[tuple[int, int, int, int, Signal]] = []
    first_in_batch: dict[tuple[int, str], int] = {}
    for found in signals:
        start = found.index - found.index % batch_ticks
        end = min(start + batch_ticks, len(times))
        signal = found.signal
        appears = 0
        if ids is not None:
            key = (start, signal.symbol)
            appears = first_in_batch.get(key, -1)
            if appears < 0:
                symbol_id = tape.symbols.index(signal.symbol)
                appears = first_in_batch[key] = ids.index(symbol_id, start, end)
        keyed.append((start, signal.occurrence_ns, appears, found.rank, signal))
    keyed.sort(key=lambda k: k[:4])
    count = len(times)
    return [
        (bisect_left(times, occurrence, start, min(start + batch_ticks, count)), signal)
        for start, occurrence, _, _, signal in keyed
    ]


def _offer(account: SimulatedAccount, tape: TickTape, start: int, end: int) -> None:
    """Offer the account the ticks [start, end) it can act on: an instrument's with a working order or armed levels."""
    index = start
    if tape.symbol_ids is None:  # one instrument: the working order or armed levels are on it
        while index < end and account.working:
            account.tick(tape.tick(index))
            index += 1
        return
    while index < end and account.working:
        if account.works_on(tape.symbol_of(index)):
            account.tick(tape.tick(index))
        index += 1


def _last_ticks(tape: TickTape) -> list[int]:
    if not len(tape):
        return []
    if tape.symbol_ids is None:
        return [len(tape) - 1]
    last: dict[int, int] = {}
    for index, symbol_id in enumerate(tape.symbol_ids):
        last[symbol_id] = index
    return sorted(last.values())
