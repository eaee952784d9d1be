"""Backtests with fills and money, and sweeps over the cores.

Prints, in one run:
- a bare Python loop that reads the CSV and computes the same EMA crossover: the
  limit, and on a shared machine the measure of its load (every rate is also printed
  as a share of it);
- signals only over the tape (pyarrow reads the CSV into columns, the `ema` kind folds
  them) and, on `--straight-ticks` of the file, the processor's replay of MarketData;
- a backtest with fills (the simulated account, the report) over the tape, and on
  `--straight-ticks` the straightforward path (the processor's replay, every tick
  offered to the account);
- a sweep of 16 parameter sets: the wall time on one process (16 sequential runs) and
  on every core, each worker reading the tape once;
- a strategy written on the simple per-tick interface (the example package's
  `tick_ema`, the same EMA crossover) against the built-in `ema`'s batch fold.

Run: .venv/bin/python bench/bench_backtest.py [--ticks N] [--sweep-ticks N] [--straight-ticks N] [--only-signals]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")

import django

django.setup()

from backtesting.runner import run_filled_backtest, run_filled_tape  # noqa: E402
from backtesting.simulated_account import SimulatedSettings  # noqa: E402
from backtesting.sweep import grid_points, run_sweep  # noqa: E402
from backtesting.tape_replay import run_tape_backtest  # noqa: E402
from backtesting.tick_tape import read_tick_tape  # noqa: E402
from feeds.market import parse_fixed  # noqa: E402
from feeds.venues.tick_csv import read_tick_csv  # noqa: E402
from processor.backtest import BACKTEST_FEED, JsonLinesWriter, run_backtest  # noqa: E402

PARAMS = {"timeframe_s": 10, "fast": 3, "slow": 8}


class Timer:
    """Wall and CPU seconds (this process, every thread) of a block: on a loaded machine the
    CPU seconds say what a run costs, the wall seconds what it waited for a core too."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def plus(self, other: Timer) -> Timer:
        both = Timer()
        both.wall, both.cpu = self.wall + other.wall, self.cpu + other.cpu
        return both

    def rates(self, ticks: int, bare: Timer, bare_ticks: int) -> str:
        wall, cpu = ticks / self.wall, ticks / self.cpu
        return (
            f"{wall:,.0f} ticks/s ({wall / (bare_ticks / bare.wall):.0%} of the bare loop); "
            f"{cpu:,.0f} ticks per CPU-s ({cpu / (bare_ticks / bare.cpu):.0%} of the bare loop's)"
        )


def write_walk(path: Path, count: int, seed: int = 11) -> None:
    rng = random.Random(seed)
    price, ts = 100.0, 1_764_460_800_000
    with path.open("w") as out:
        out.write("ts_ms,symbol,price,volume\n")
        for _ in range(count):
            price *= 1 + rng.gauss(0, 0.0005)
            ts += rng.randint(10, 400)
            out.write(f"{ts},BTC-USD,{price:.2f},{rng.randint(1, 50) / 10}\n")


def bare_loop(path: Path) -> tuple[int, float]:
    """Read the CSV and compute the same bucketed EMA crossover: the limit."""
    started = time.perf_counter()
    af, as_ = 2 / (PARAMS["fast"] + 1), 2 / (PARAMS["slow"] + 1)
    fast = slow = None
    bucket = None
    crosses = 0
    above = None
    with path.open() as handle:
        next(handle)
        for line in handle:
            ts, _, price_text, _ = line.split(",")
            b = int(ts) // (PARAMS["timeframe_s"] * 1000)
            price = float(price_text)
            if b != bucket:
                bucket = b
                fast = price if fast is None else fast + af * (price - fast)
                slow = price if slow is None else slow + as_ * (price - slow)
                now = fast > slow
                if above is not None and now != above:
                    crosses += 1
                above = now
    return crosses, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=1_000_000)
    parser.add_argument("--sweep-ticks", type=int, default=1_000_000)
    parser.add_argument("--straight-ticks", type=int, default=100_000, help="ticks for the straightforward paths")
    parser.add_argument(
        "--only-signals", action="store_true", help="stop after the bare loop and the signals-only tape run"
    )
    args = parser.parse_args()
    settings = SimulatedSettings(capital=parse_fixed("100000"), quantity=parse_fixed("1"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "walk.csv"
        write_walk(path, args.ticks)
        # Imported once per process, as the sweep workers' fork server does; not a run's cost.
        import_started = time.perf_counter()
        import numpy  # noqa: F401
        import pyarrow.compute
        import pyarrow.csv  # noqa: F401

        import processor.strategies.ema_arrays  # noqa: F401

        imports_s = time.perf_counter() - import_started

        with Timer() as bare:
            bare_loop(path)
        print(
            f"bare CSV + EMA loop: {args.ticks / bare.wall:,.0f} ticks/s, {args.ticks / bare.cpu:,.0f} ticks per CPU-s "
            f"({bare.wall:.2f}s wall, {bare.cpu:.2f}s CPU for {args.ticks:,} ticks)"
        )

        writer = JsonLinesWriter(lambda line: None, kind="ema", signals_only=True)
        with Timer() as read:
            tape = read_tick_tape(path, feed=BACKTEST_FEED)
        with Timer() as fold:
            summary = run_tape_backtest(kind="ema", params=PARAMS, tape=tape, writer=writer)
        print(
            f"signals only, tape: {read.plus(fold).rates(args.ticks, bare, args.ticks)}; {summary.signals} signals; "
            f"read {read.wall:.2f}s wall {read.cpu:.2f}s CPU, fold {fold.wall:.2f}s wall {fold.cpu:.2f}s CPU "
            f"(pyarrow and numpy imported before, once per process: {imports_s:.2f}s)"
        )

        if args.only_signals:
            return
        straight_path = Path(tmp) / "straight.csv"
        write_walk(straight_path, args.straight_ticks)
        writer = JsonLinesWriter(lambda line: None, kind="ema", signals_only=True)
        with Timer() as replay:
            batches = read_tick_csv(straight_path, feed=BACKTEST_FEED)
            asyncio.run(run_backtest(kind="ema", params=PARAMS, batches=batches, writer=writer))
        print(
            f"signals only, processor replay of MarketData ({args.straight_ticks:,} ticks): "
            f"{replay.rates(args.straight_ticks, bare, args.ticks)}"
        )

        with Timer() as filled:
            tape = read_tick_tape(path, feed=BACKTEST_FEED)
            run = asyncio.run(run_filled_tape(kind="ema", params=PARAMS, tape=tape, settings=settings))
        print(
            f"with fills + report, tape: {filled.rates(args.ticks, bare, args.ticks)}; "
            f"{run.account.fills} fills, {run.report.trades} trades"
        )

        with Timer() as straight_timer:
            batches = read_tick_csv(straight_path, feed=BACKTEST_FEED)
            straight = asyncio.run(run_filled_backtest(kind="ema", params=PARAMS, batches=batches, settings=settings))
        print(
            f"with fills + report, straightforward ({args.straight_ticks:,} ticks): "
            f"{straight_timer.rates(args.straight_ticks, bare, args.ticks)}; {straight.report.trades} trades"
        )

        sweep_path = Path(tmp) / "sweep.csv"
        write_walk(sweep_path, args.sweep_ticks, seed=12)
        points = grid_points({"timeframe_s": 10}, {"fast": [2, 3, 4, 5], "slow": [8, 12, 16, 20]})
        timings = {}
        for workers in sorted({1, os.cpu_count() or 1}):
            started = time.perf_counter()
            run_sweep(kind="ema", points=points, ticks=str(sweep_path), settings=settings, workers=workers)
            timings[workers] = time.perf_counter() - started
            print(f"sweep of 16 sets x {args.sweep_ticks:,} ticks on {workers} process(es): {timings[workers]:.2f}s")
        if len(timings) > 1:
            many = max(timings)
            print(f"sweep speed-up on {many} processes: {timings[1] / timings[many]:.2f}x")
    plugin_vs_built_in(args.ticks)


def plugin_vs_built_in(count: int) -> None:
    from core.fixed_point import SCALE
    from feeds.market import MarketData
    from processor.strategies import clean_params, strategy_class
    from processor.strategies.plugins import load_strategy_plugins

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "strategy-plugin"))
    load_strategy_plugins(["ts_example_strategies"])
    rng = random.Random(5)
    price, ticks = 100.0, []
    for i in range(count):
        price *= 1 + rng.gauss(0, 0.0005)
        ts = 1_764_460_800_000_000_000 + i * 100_000_000
        ticks.append(MarketData("BTC", round(price * 100) * SCALE // 100, SCALE, ts, ts))
    rates = {}
    for kind in ("ema", "tick_ema"):
        logic = strategy_class(kind)(clean_params(kind, PARAMS))
        rows: list = []
        signals: list = []
        started = time.perf_counter()
        for start in range(0, count, 256):
            logic.fold(ticks[start : start + 256], rows, signals)
            rows.clear()
        rates[kind] = count / (time.perf_counter() - started)
        print(f"fold {kind:>9}: {rates[kind]:,.0f} ticks/s ({len(signals)} signals)")
    print(f"simple per-tick interface: {rates['ema'] / rates['tick_ema']:.2f}x the built-in kind's time per tick")


if __name__ == "__main__":
    main()
