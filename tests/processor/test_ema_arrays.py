"""`ema`'s whole-column fold (`fold_arrays`, numpy) against its tick loop (`fold_columns`).

Random ticks with equal and out-of-order times and prices past 2**53, every parameter
mode, split into calls at random points and alternating arrays and lists on one instance,
with the kernel's blocks both longer than the calls and short enough to end inside them:
the rows (bit for bit), the signals, the state and the skipped count must all be equal.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from core.fixed_point import SCALE
from processor.strategies import clean_params, ema_arrays, strategy_class

T0 = 1_764_460_800_000_000_000
PARAMS = [
    {"timeframe_s": 2, "fast": 2, "slow": 5},
    {"timeframe_s": 1, "fast": 4, "slow": 9, "long_only": True},
    {"timeframe_s": 3, "fast": 2, "slow": 4, "bucket_close_only": True},
    {"timeframe_s": 5, "fast": 3, "slow": 6, "long_only": True, "bucket_close_only": True},
    {"timeframe_s": 1, "fast": 1, "slow": 2},
]


def random_ticks(seed: int, count: int, start_price: float) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    times, prices = [], []
    ts, price = T0, start_price
    steps = (0, 0, 1, 1_000_000, 400_000_000, 900_000_000, 3_000_000_000) * 6 + (-2_000_000_000, -1)
    for _ in range(count):
        ts += rng.choice(steps)
        price *= 1 + rng.gauss(0, 0.003)
        if rng.random() < 0.01:
            price = prices[-1] / SCALE if prices else price  # a repeated price: fast == slow can happen
        times.append(ts)
        prices.append(max(1, round(price * SCALE)))
    return times, prices


def state(logic: Any) -> tuple[Any, ...]:
    return (
        logic.bucket_start_ns,
        logic.bucket_end_ns,
        logic.close,
        logic.closed_buckets,
        logic.closed_fast,
        logic.closed_slow,
        logic.last_ts_ns,
        logic.position,
        logic.skipped_out_of_order,
    )


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("only_signal_outputs", [False, True])
@pytest.mark.parametrize(("seed", "start_price"), [(1, 100.0), (2, 25_000.0), (3, 0.000123)])
@pytest.mark.parametrize("block_ticks", [ema_arrays.BLOCK_TICKS, 37])
def test_the_array_fold_equals_the_tick_loop(
    monkeypatch, params, only_signal_outputs, seed, start_price, block_ticks
) -> None:
    monkeypatch.setattr(ema_arrays, "BLOCK_TICKS", block_ticks)  # blocks that end inside calls too
    times, prices = random_ticks(seed, 12_000, start_price)
    cleaned = clean_params("ema", params)
    loop, arrays = strategy_class("ema")(cleaned), strategy_class("ema")(cleaned)
    loop_rows: list = []
    loop_signals: list = []
    array_rows: list = []
    array_signals: list = []
    rng = random.Random(seed)
    start = 0
    turn = 0
    while start < len(times):
        end = start + rng.choice((1, 2, 7, 300, 2_500, 6_000))
        trading = rng.random() > 0.1  # a backfill stretch now and then
        chunk = times[start:end], prices[start:end], []
        loop.fold_columns(*chunk, loop_rows, loop_signals, trading=trading, only_signal_outputs=only_signal_outputs)
        if turn % 3 == 2:  # lists on the same instance between array calls: one state
            arrays.fold_columns(
                *chunk, array_rows, array_signals, trading=trading, only_signal_outputs=only_signal_outputs
            )
        else:
            arrays.fold_arrays(
                np.array(chunk[0], dtype=np.int64),
                np.array(chunk[1], dtype=np.int64),
                None,
                array_rows,
                array_signals,
                trading=trading,
                only_signal_outputs=only_signal_outputs,
            )
        assert state(arrays) == state(loop), f"after ticks {start}..{end}"
        start, turn = end, turn + 1
    assert array_signals == loop_signals
    if not only_signal_outputs:
        assert array_rows == loop_rows and len(loop_rows) == len(times) - loop.skipped_out_of_order
    assert loop_signals and loop.skipped_out_of_order > 0


def test_only_signal_outputs_gives_row_indices_of_the_full_fold() -> None:
    times, prices = random_ticks(9, 5_000, 100.0)
    cleaned = clean_params("ema", PARAMS[0])
    full, fast = strategy_class("ema")(cleaned), strategy_class("ema")(cleaned)
    rows: list = []
    full_signals: list = []
    fast_signals: list = []
    as_arrays = np.array(times, dtype=np.int64), np.array(prices, dtype=np.int64), None
    full.fold_arrays(*as_arrays, rows, full_signals)
    fast.fold_arrays(*as_arrays, [], fast_signals, only_signal_outputs=True)
    assert fast_signals == full_signals and full_signals
    assert all(rows[index][1] == ts for index, _, _, ts in full_signals)


def test_an_empty_or_all_stale_call_changes_nothing() -> None:
    logic = strategy_class("ema")(clean_params("ema", PARAMS[0]))
    empty = np.array([], dtype=np.int64)
    logic.fold_arrays(empty, empty, None, [], [])
    before = state(logic)
    logic.fold_arrays(np.array([T0], dtype=np.int64), np.array([SCALE], dtype=np.int64), None, [], [])
    logic.fold_arrays(np.array([T0 - 5, T0 - 1], dtype=np.int64), np.array([SCALE] * 2, dtype=np.int64), None, [], [])
    assert state(logic)[:-1] != before[:-1] and logic.skipped_out_of_order == 2 and logic.last_ts_ns == T0
