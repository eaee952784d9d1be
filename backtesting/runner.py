"""A backtest with fills and money: the live strategy code's signals, traded by a simulated account.

The replay goes through the live Processor (processor.backtest.run_backtest). After each
replayed batch has been folded, its ticks and the signals they caused are merged in
exchange-time order into the simulated account: each tick first fills what is working,
then the signals it caused are decided, so an order fills from the next tick on, never
on the tick that caused it, as on the live paper exchange.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backtesting.simulated_account import SimulatedAccount, SimulatedSettings
from feeds.market import FeedData, MarketData
from processor.backtest import BacktestSummary, JsonLinesWriter, run_backtest
from processor.backtest_report import BacktestReport, build_report
from processor.outputs import StrategyOutput
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
