"""Processor throughput and latency, with a bare Python EMA loop as the limit.

Prints, in one run:
- ticks/s through the live processor (pre-built MarketData batches of 256; outputs and
  signals consumed by a counting sink, not persisted): 1 strategy x 1 instrument, and
  50 strategies x 200 instruments (every strategy on every instrument);
- tick-to-signal latency p50/p99 (one-tick batches, from `consume` to the sink);
- the same EMA crossover as a bare Python loop over the same ticks (the limit);
- the example plug-in kinds written on the simple interfaces (`tick_ema` per tick,
  `donchian` per bar) against the built-in `ema`, live 1 x 1 and as bare folds;
- 50 x 200 fed batch by batch, and from a feed queue that got ahead of the processor
  (the feed router routes what queued up together, in turns as large as the mailboxes
  allow); CPU-second figures beside the wall figures, which on a shared machine move
  with the load, and the CPU cost per strategy-tick against the 1 x 1 tick's;
- the strategies' folds over the same chunks as batch by batch, called directly (the
  limit of feeding batch by batch: the strategies' own cost per call);
- `manage.py backtest --signals-only` on a CSV against a bare loop that reads the same
  CSV and computes the same EMA crossover.

Run: .venv/bin/python bench/bench_processor.py [--ticks N] [--wide-ticks N]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import gc
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")

import django  # noqa: E402

django.setup()
logging.getLogger("processor").setLevel(logging.WARNING)  # not a line per route added

from core.fixed_point import SCALE  # noqa: E402
from feeds.market import FeedData, MarketData  # noqa: E402
from processor.mailbox import ROUTE_MAILBOX_CAPACITY  # noqa: E402
from processor.processor import Processor  # noqa: E402
from processor.specs import StrategySpec  # noqa: E402

SCALE_FLOAT = float(SCALE)  # the EMA's price conversion (processor.strategies.ema)

EMA = {"timeframe_s": 5, "fast": 12, "slow": 26, "long_only": False}
BATCH = 256
FEED = "bench"


class CountingSink:
    def __init__(self) -> None:
        self.outputs_seen = 0
        self.signals_seen = 0
        self.signal_latencies_ns: list[int] = []
        self.sent_ns = 0

    def outputs(self, batch) -> None:
        self.outputs_seen += len(batch.rows)

    def signals(self, signals, outputs) -> None:
        self.signals_seen += len(signals)
        if self.sent_ns:
            self.signal_latencies_ns.append(time.perf_counter_ns() - self.sent_ns)


def make_ticks(count: int, symbols: list[str], seed: int = 1) -> list[MarketData]:
    rng = random.Random(seed)
    price = dict.fromkeys(symbols, 64000.0)
    ticks = []
    ts = 1_700_000_000_000_000_000
    for i in range(count):
        symbol = symbols[i % len(symbols)]
        ts += rng.randint(0, 40) * 1_000_000
        price[symbol] = max(1.0, price[symbol] + rng.gauss(0, 5))
        ticks.append(
            MarketData(
                symbol, int(round(price[symbol], 1) * 10) * SCALE // 10, rng.randint(1, 1000) * SCALE // 1000, ts, ts
            )
        )
    return ticks


def batches_of(ticks: list[MarketData], size: int) -> list[FeedData]:
    return [FeedData(FEED, tuple(ticks[i : i + size])) for i in range(0, len(ticks), size)]


def spec(strategy_id: int, kind: str, params: dict, symbols: list[str]) -> StrategySpec:
    return StrategySpec.build(
        strategy_id=strategy_id,
        name=f"bench-{strategy_id}",
        kind=kind,
        params=params,
        instruments=frozenset((FEED, symbol) for symbol in symbols),
    )


CPU_SECONDS: list[float] = []  # the process CPU time of each run_processor, beside its wall time


async def run_processor(
    specs: list[StrategySpec], batches: list[FeedData], sink: CountingSink, *, via_feed_queue: bool = False
) -> float:
    """Push `batches` through a processor; return the wall seconds (CPU seconds go to CPU_SECONDS).

    By default each batch goes through `consume` and the strategies run after every one;
    `via_feed_queue` puts them all on the processor's feed queue first, as a feed that
    got ahead of it would (the feed router then routes what queued up together).
    """
    processor = Processor(sink=sink)
    queue: asyncio.Queue[FeedData] = asyncio.Queue()
    processor.start(feed=queue if via_feed_queue else None)
    processor.reconcile(specs)
    await processor.settled()
    await asyncio.sleep(0)
    gc.collect()
    gc.freeze()  # the pre-built batches are long-lived: keep them out of every collection
    started = time.perf_counter()
    cpu_started = time.process_time()
    if via_feed_queue:
        for batch in batches:
            queue.put_nowait(batch)
        idle_turns = 0
        while idle_turns < 3:  # the router may hold one batch back for its next turn
            await asyncio.sleep(0)
            idle_turns = idle_turns + 1 if queue.empty() and not processor.backlog() else 0
    else:
        for batch in batches:
            await processor.consume(batch)
        await processor.drained()
    elapsed = time.perf_counter() - started
    CPU_SECONDS.append(time.process_time() - cpu_started)
    gc.unfreeze()
    degraded = [r for r in processor.snapshot.routes_by_strategy.values() if type(r.state).__name__ == "Degraded"]
    await processor.stop()
    if degraded:
        raise SystemExit(f"bench: {len(degraded)} routes degraded")
    return elapsed


async def latency(ticks: list[MarketData]) -> list[int]:
    sink = CountingSink()
    processor = Processor(sink=sink)
    processor.start()
    processor.reconcile([spec(1, "ema", {"timeframe_s": 1, "fast": 1, "slow": 2}, ["BTC"])])
    await processor.settled()
    for tick in ticks:
        sink.sent_ns = time.perf_counter_ns()
        await processor.consume(FeedData(FEED, (tick,)))
        await asyncio.sleep(0)  # the signal appears on the executor's turn
    await processor.stop()
    return sink.signal_latencies_ns


def zigzag_ticks(count: int) -> list[MarketData]:
    """Prices that turn every two seconds, so the 1/2 EMA crossover reverses often."""
    ticks = []
    for i in range(count):
        ts = 1_700_000_000_000_000_000 + i * 100_000_000
        phase = (i // 20) % 2
        price = 100 + (i % 20 if phase == 0 else 20 - i % 20)
        ticks.append(MarketData("BTC", price * SCALE, SCALE, ts, ts))
    return ticks


def bare_ema(ticks: list[MarketData], timeframe_s: int, fast_n: int, slow_n: int) -> int:
    """The same crossover, nothing else: the limit for the live processor."""
    timeframe = timeframe_s * 1_000_000_000
    af, as_ = 2 / (fast_n + 1), 2 / (slow_n + 1)
    end = 0
    close = None
    closed = 0
    cf = cs = 0.0
    position = 0
    signals = 0
    for tick in ticks:
        ts = tick.ts_event
        if ts >= end:
            if close is not None:
                if closed:
                    cf = af * close + (1 - af) * cf
                    cs = as_ * close + (1 - as_) * cs
                else:
                    cf = cs = close
                closed += 1
            end = ts - ts % timeframe + timeframe
        close = p = float(tick.price) / SCALE_FLOAT  # as processor.strategies.ema does
        fast = af * p + (1 - af) * cf if closed else p
        slow = as_ * p + (1 - as_) * cs if closed else p
        if closed >= slow_n:
            wanted = 1 if fast > slow else -1 if fast < slow else position
            if wanted != position:
                signals += 1 if position == 0 else 2
                position = wanted
    return signals


BARE_CSV = """
import csv, sys, time
started = time.perf_counter()
timeframe, af, as_ = 5000, 2 / 13, 2 / 27
end = 0; close = None; closed = 0; cf = cs = 0.0; position = 0; signals = 0
with open(sys.argv[1], newline="") as f:
    reader = csv.reader(f); next(reader)
    for ts, symbol, price, volume in reader:
        ts = int(ts); p = float(price)
        if ts >= end:
            if close is not None:
                if closed: cf = af * close + (1 - af) * cf; cs = as_ * close + (1 - as_) * cs
                else: cf = cs = close
                closed += 1
            end = ts - ts % timeframe + timeframe
        close = p
        fast = af * p + (1 - af) * cf if closed else p
        slow = as_ * p + (1 - as_) * cs if closed else p
        if closed >= 26:
            wanted = 1 if fast > slow else -1 if fast < slow else position
            if wanted != position:
                signals += 1 if position == 0 else 2; position = wanted
print(signals, time.perf_counter() - started)
"""


def plugin_vs_built_in(ticks: list[MarketData], built_in_rate: float) -> None:
    """The example package's kinds on the simple interfaces against the built-in `ema`.

    `tick_ema` (per tick) is the same crossover as `ema`; `donchian` (per bar) another
    strategy on the same tape. Both through the live processor (1 x 1, as above) and as a
    bare fold of 256-tick batches, where the interface's own cost shows undiluted.
    """
    from processor.strategies import clean_params, strategy_class
    from processor.strategies.plugins import load_strategy_plugins

    sys.path.insert(0, str(ROOT / "examples" / "strategy-plugin"))
    load_strategy_plugins(["ts_example_strategies"])
    kinds = {"ema": EMA, "tick_ema": {k: EMA[k] for k in ("timeframe_s", "fast", "slow")}}
    kinds["donchian"] = {"timeframe_s": EMA["timeframe_s"], "entry_bars": 20, "exit_bars": 10}
    fold_rates = {}
    for kind, params in kinds.items():
        logic = strategy_class(kind)(clean_params(kind, params))
        rows: list = []
        signals: list = []
        started = time.process_time()
        for start in range(0, len(ticks), BATCH):
            logic.fold(ticks[start : start + BATCH], rows, signals)
            rows.clear()
        fold_rates[kind] = len(ticks) / (time.process_time() - started)
    for kind in ("tick_ema", "donchian"):
        sink = CountingSink()
        elapsed = asyncio.run(run_processor([spec(1, kind, kinds[kind], ["BTC"])], batches_of(ticks, BATCH), sink))
        rate = len(ticks) / elapsed
        print(
            f"plug-in {kind} (simple interface) on the live processor 1 x 1: {rate:,.0f} ticks/s "
            f"= {built_in_rate / rate:.2f}x the built-in ema's time ({sink.signals_seen:,} signals); bare fold "
            f"{fold_rates[kind]:,.0f} ticks/CPU-s = {fold_rates['ema'] / fold_rates[kind]:.2f}x ema's "
            f"{fold_rates['ema']:,.0f}"
        )


def bare_chunk_folds(specs: list[StrategySpec], ticks: list[MarketData], size: int, label: str) -> None:
    """The limit of the live figures: each strategy's fold over each `size`-tick slice's chunk of each instrument.

    What the processor's executions fold when it routes `size` ticks at a time (one call
    per strategy, instrument and slice), with nothing around it: no routing, no output
    batch, no sink. It shows how much of the cost is the strategies' own, per call and
    per tick.
    """
    from processor.strategies import strategy_class

    logics = [{symbol: strategy_class(s.kind)(s.params) for _, symbol in s.instruments} for s in specs]
    chunked = []
    for start in range(0, len(ticks), size):
        groups: dict[str, list[MarketData]] = {}
        for tick in ticks[start : start + size]:
            groups.setdefault(tick.symbol, []).append(tick)
        chunked.append([(symbol, tuple(chunk)) for symbol, chunk in groups.items()])
    calls = folded = 0
    started = time.process_time()
    for chunks in chunked:
        for by_symbol in logics:
            for symbol, chunk in chunks:
                rows: list = []
                by_symbol[symbol].fold(chunk, rows, [])
                folded += len(rows)
        calls += len(chunks) * len(logics)
    cpu = time.process_time() - started
    print(
        f"bare folds of the same 50 x 200 in {size}-tick slices ({label}; {calls:,} calls, {folded / calls:.1f} "
        f"ticks each): {folded / cpu:,.0f} strategy-ticks per CPU second"
    )


def write_csv(path: Path, ticks: list[MarketData]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ts_ms", "symbol", "price", "volume"])
        for tick in ticks:
            writer.writerow(
                [tick.ts_event // 1_000_000, tick.symbol, f"{tick.price / SCALE:.1f}", f"{tick.volume / SCALE:.3f}"]
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=1_000_000)
    parser.add_argument("--wide-ticks", type=int, default=100_000)
    args = parser.parse_args()
    print(f"bench_processor: {os.cpu_count()} cores, Python {sys.version.split()[0]}")

    ticks = make_ticks(args.ticks, ["BTC"])
    sink = CountingSink()
    elapsed = asyncio.run(run_processor([spec(1, "ema", EMA, ["BTC"])], batches_of(ticks, BATCH), sink))
    live_rate = len(ticks) / elapsed
    print(
        f"live processor 1 strategy x 1 instrument: {live_rate:,.0f} ticks/s, "
        f"{len(ticks) / CPU_SECONDS[-1]:,.0f} per CPU second ({sink.outputs_seen:,} outputs, {sink.signals_seen:,} signals)"
    )

    started = time.perf_counter()
    bare_signals = bare_ema(ticks, EMA["timeframe_s"], EMA["fast"], EMA["slow"])
    bare_rate = len(ticks) / (time.perf_counter() - started)
    print(
        f"bare Python EMA loop over the same ticks (limit): {bare_rate:,.0f} ticks/s ({bare_signals:,} signals; "
        f"live processor = {live_rate / bare_rate:.0%} of it)"
    )
    if bare_signals != sink.signals_seen:
        raise SystemExit(f"bench: live processor and bare loop disagree: {sink.signals_seen} vs {bare_signals} signals")

    plugin_vs_built_in(ticks, live_rate)

    symbols = [f"S{i:03d}" for i in range(200)]
    specs = []
    for i in range(50):
        if i % 2:
            specs.append(spec(100 + i, "ema", {"timeframe_s": 5 + i, "fast": 5 + i % 7, "slow": 30 + i}, symbols))
        else:
            specs.append(
                spec(
                    100 + i,
                    "volume_breakout",
                    {"bar_volume": str(5 + i), "lookback": 10, "hold_bars": 5, "cooldown_bars": 2},
                    symbols,
                )
            )
    wide = make_ticks(args.wide_ticks, symbols, seed=2)
    wide_batches = batches_of(wide, BATCH)
    one_by_one_cost = CPU_SECONDS[0] / len(ticks)  # CPU seconds per tick of the 1 x 1 run
    seen = {}
    for via_feed_queue, label in ((False, "batch by batch"), (True, "from a queued feed")):
        sink = CountingSink()
        elapsed = asyncio.run(run_processor(specs, wide_batches, sink, via_feed_queue=via_feed_queue))
        cost = CPU_SECONDS[-1] / sink.outputs_seen
        print(
            f"live processor 50 strategies x 200 instruments, {label}: {len(wide) / elapsed:,.0f} ticks/s in, "
            f"{sink.outputs_seen / elapsed:,.0f} strategy-ticks/s, {sink.outputs_seen / CPU_SECONDS[-1]:,.0f} "
            f"per CPU second ({sink.outputs_seen:,} outputs, {sink.signals_seen:,} signals); "
            f"{cost * 1e6:.2f} CPU-us per strategy-tick = {cost / one_by_one_cost:.1f}x the 1 x 1 tick"
        )
        seen[label] = (sink.outputs_seen, sink.signals_seen)
    if len(set(seen.values())) != 1:
        raise SystemExit(f"bench: the two ways of feeding disagree: {seen}")
    bare_chunk_folds(specs, wide, BATCH, "the limit of batch by batch")
    bare_chunk_folds(specs, wide, ROUTE_MAILBOX_CAPACITY // 2, "a queued feed's routing turn")

    latencies = sorted(asyncio.run(latency(zigzag_ticks(20_000))))
    p50 = latencies[len(latencies) // 2] / 1000
    p99 = latencies[int(len(latencies) * 0.99)] / 1000
    print(
        f"tick-to-signal latency (one-tick batches, {len(latencies)} signals): p50 {p50:.1f} us, p99 {p99:.1f} us, "
        f"mean {statistics.fmean(latencies) / 1000:.1f} us"
    )

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ticks.csv"
        write_csv(path, ticks)
        started = time.perf_counter()
        bare = subprocess.run([sys.executable, "-c", BARE_CSV, str(path)], capture_output=True, text=True, check=True)
        bare_wall = time.perf_counter() - started
        started = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "backtest",
                "--strategy",
                "ema",
                "--params",
                '{"timeframe_s": 5, "fast": 12, "slow": 26}',
                "--ticks",
                str(path),
                "--signals-only",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        backtest_wall = time.perf_counter() - started
    backtest_signals = len(result.stdout.splitlines())
    bare_csv_signals = int(bare.stdout.split()[0])
    print(
        f"bare Python loop reading the CSV + same EMA crossover: {len(ticks) / bare_wall:,.0f} ticks/s "
        f"({bare_wall:.2f}s wall incl. interpreter start, {bare_csv_signals:,} signals)"
    )
    print(
        f"manage.py backtest --signals-only on the same CSV: {len(ticks) / backtest_wall:,.0f} ticks/s "
        f"({backtest_wall:.2f}s wall incl. Django start, {backtest_signals:,} signals) = "
        f"{bare_wall / backtest_wall:.0%} of the bare loop"
    )
    print(f"  {result.stderr.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
