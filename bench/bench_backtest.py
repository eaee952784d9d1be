"""Backtests with fills and money, and sweeps over the cores.

Prints, in one run:
- a backtest with fills (`backtest --report`'s path: the processor's replay, the
  simulated account, the report) over a random-walk CSV, in ticks/s, beside the
  signals-only replay of the same file and a bare Python loop that reads the CSV and
  computes the same EMA crossover (the limit);
- a sweep of 16 parameter sets: the wall time on one process (16 sequential runs) and
  on every core;
- a strategy written on the simple per-tick interface (the example package's
  `tick_ema`, the same EMA crossover) against the built-in `ema`'s batch fold.

Run: .venv/bin/python bench/bench_backtest.py [--ticks N] [--sweep-ticks N]
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

from backtesting.runner import run_filled_backtest  # noqa: E402
from backtesting.simulated_account import SimulatedSettings  # noqa: E402
from backtesting.sweep import grid_points, run_sweep  # noqa: E402
from feeds.market import parse_fixed  # noqa: E402
from feeds.venues.tick_csv import read_tick_csv  # noqa: E402
from processor.backtest import BACKTEST_FEED, JsonLinesWriter, run_backtest  # noqa: E402

PARAMS = {"timeframe_s": 10, "fast": 3, "slow": 8}


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
    parser.add_argument("--sweep-ticks", type=int, default=100_000)
    args = parser.parse_args()
    settings = SimulatedSettings(capital=parse_fixed("100000"), quantity=parse_fixed("1"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "walk.csv"
        write_walk(path, args.ticks)
        _, bare_s = bare_loop(path)
        bare = args.ticks / bare_s
        print(f"bare CSV + EMA loop: {bare:,.0f} ticks/s ({bare_s:.2f}s for {args.ticks:,} ticks)")

        writer = JsonLinesWriter(lambda line: None, kind="ema", signals_only=True)
        started = time.perf_counter()
        summary = asyncio.run(
            run_backtest(kind="ema", params=PARAMS, batches=read_tick_csv(path, feed=BACKTEST_FEED), writer=writer)
        )
        signals_s = time.perf_counter() - started
        rate = args.ticks / signals_s
        print(
            f"signals only:        {rate:,.0f} ticks/s ({rate / bare:.0%} of the bare loop, {summary.signals} signals)"
        )

        started = time.perf_counter()
        run = asyncio.run(
            run_filled_backtest(
                kind="ema", params=PARAMS, batches=read_tick_csv(path, feed=BACKTEST_FEED), settings=settings
            )
        )
        filled_s = time.perf_counter() - started
        rate = args.ticks / filled_s
        print(
            f"with fills + report: {rate:,.0f} ticks/s ({rate / bare:.0%} of the bare loop; "
            f"{run.account.fills} fills, {run.report.trades} trades)"
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
