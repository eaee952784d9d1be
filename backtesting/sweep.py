"""Parameter sweeps: one backtest with fills per point of a grid, spread over processes.

Every point is a full backtest (the processor's replay, the simulated account, the
report) in a worker process of its own, so a sweep uses the machine's cores. Workers
are forked from a fork server that has Django and the backtest code loaded
(`backtesting.sweep_preload`), so none pays Django's setup. A point
whose parameters the strategy refuses (a fast EMA not faster than the slow one) is
reported as refused with the reason, never run. Results are deterministic: each point
runs alone on the same ticks, and the table is sorted by the chosen metric with the
grid order breaking ties.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from backtesting.runner import run_filled_tape
from backtesting.simulated_account import SimulatedSettings
from backtesting.sweep_worker import worker_setup, worker_tape
from processor.backtest_report import BacktestReport

# Higher is better for all but the drawdown, where lower is.
METRICS: dict[str, bool] = {
    "pnl": True,
    "sharpe": True,
    "sortino": True,
    "calmar": True,
    "profit_factor": True,
    "win_rate": True,
    "trades": True,
    "max_drawdown": False,
}
MAX_POINTS = 10_000
MONEY_FIGURES = ("pnl", "fees")


class SweepError(ValueError):
    """A grid that cannot be swept (not a mapping of lists, too many points)."""


@dataclass(frozen=True)
class SweepResult:
    index: int
    params: dict[str, Any]
    refused: str = ""
    figures: dict[str, Any] = field(default_factory=dict)

    def value(self, metric: str) -> float | None:
        value = self.figures.get(metric)
        return None if value is None else float(value)


def grid_points(base: Mapping[str, Any], grid: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the grid's values over `base`, in a fixed order (keys sorted)."""
    if not isinstance(grid, Mapping) or not grid:
        raise SweepError("the grid must be a JSON object of parameter name -> list of values")
    names = sorted(grid)
    for name in names:
        values = grid[name]
        if not isinstance(values, list) or not values:
            raise SweepError(f"grid {name!r}: give a non-empty list of values")
    count = 1
    for name in names:
        count *= len(grid[name])
    if count > MAX_POINTS:
        raise SweepError(f"the grid has {count} points; at most {MAX_POINTS}")
    return [dict(base) | dict(zip(names, combo, strict=True)) for combo in itertools.product(*(grid[n] for n in names))]


def _figures(report: BacktestReport, signals: int) -> dict[str, Any]:
    return {
        "trades": report.trades,
        "pnl": report.pnl,
        "pnl_pct": report.pnl_pct,
        "fees": report.fees,
        "win_rate": report.win_rate,
        "profit_factor": report.profit_factor,
        "max_drawdown": report.drawdown.pct,
        "sharpe": report.sharpe,
        "sortino": report.sortino,
        "calmar": report.calmar,
        "signals": signals,
    }


def run_point(kind: str, index: int, params: dict[str, Any], ticks: str, settings: SimulatedSettings) -> SweepResult:
    """One point's backtest (in a worker process, over the tape it keeps for the file)."""
    from processor.backtest import BACKTEST_FEED
    from processor.strategies import clean_params

    try:
        cleaned = clean_params(kind, params)
    except ValidationError as exc:
        return SweepResult(index=index, params=params, refused="; ".join(exc.messages))
    tape = worker_tape(ticks, BACKTEST_FEED)
    run = asyncio.run(run_filled_tape(kind=kind, params=cleaned, tape=tape, settings=settings))
    return SweepResult(index=index, params=params, figures=_figures(run.report, run.summary.signals))


class PointRunner:
    """Backtests points in this process (`workers` 1) or on warm worker processes kept for every call.

    An optimizer asks for its points a round at a time; keeping the pool between rounds
    keeps each worker's tape of the file, read once per worker, not once per round.
    """

    def __init__(self, *, kind: str, ticks: str, settings: SimulatedSettings, workers: int) -> None:
        self.kind, self.ticks, self.settings, self.workers = kind, ticks, settings, workers
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> PointRunner:
        if self.workers > 1:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=_worker_context(), initializer=worker_setup
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def run(
        self,
        points: Sequence[tuple[int, dict[str, Any]]],
        on_result: Callable[[SweepResult], None] = lambda result: None,
    ) -> list[SweepResult]:
        """Backtest each (index, params); results in the order given, `on_result` as each finishes."""
        if self._pool is None:
            results = []
            for index, params in points:
                results.append(run_point(self.kind, index, params, self.ticks, self.settings))
                on_result(results[-1])
            return results
        futures = [self._pool.submit(run_point, self.kind, i, p, self.ticks, self.settings) for i, p in points]
        for future in as_completed(futures):
            on_result(future.result())
        return [future.result() for future in futures]


def run_sweep(
    *,
    kind: str,
    points: Sequence[dict[str, Any]],
    ticks: str,
    settings: SimulatedSettings,
    workers: int,
    on_result: Callable[[SweepResult], None] = lambda result: None,
) -> list[SweepResult]:
    """Run every point in grid order; `workers` processes (1: in this process, one after the other).

    `on_result` is called in this process with each point as it finishes (progress), in
    the order they finish; the returned list is in grid order whatever that order was.
    """
    with PointRunner(kind=kind, ticks=ticks, settings=settings, workers=workers) as runner:
        return runner.run(list(enumerate(points)), on_result)


PRELOAD = "backtesting.sweep_preload"


def _worker_context() -> multiprocessing.context.BaseContext:
    """Workers forked from a fork server that has Django and the backtest code loaded, so they start warm.

    The fork server is a clean interpreter started once per process (never a fork of
    this one), so a worker inherits no database connection, event loop or thread from
    the caller; it only saves each worker the seconds of Django's setup and imports.
    Where there is no fork server, spawned workers, each setting Django up itself.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([PRELOAD])
    return context


def result_as_json(result: SweepResult) -> dict[str, Any]:
    """A point as JSON-ready values: money as exact decimal strings, ratios as floats."""
    from core.fixed_point import fixed_to_str

    figures = {
        name: fixed_to_str(value) if name in MONEY_FIGURES and value is not None else value
        for name, value in result.figures.items()
    }
    return {"index": result.index, "params": result.params, "refused": result.refused, "figures": figures}


def ranked(results: Sequence[SweepResult], metric: str) -> list[SweepResult]:
    """Run points best first by `metric` (None last), then refused points; ties keep grid order."""
    if metric not in METRICS:
        raise SweepError(f"unknown metric {metric!r}; one of {', '.join(METRICS)}")
    higher = METRICS[metric]

    def key(result: SweepResult) -> tuple[int, float, int]:
        value = result.value(metric)
        if result.refused:
            return (2, 0.0, result.index)
        if value is None:
            return (1, 0.0, result.index)
        return (0, -value if higher else value, result.index)

    return sorted(results, key=key)
