"""`fold_columns(..., only_signal_outputs=True)`: the same signals, at the same row indices, without rows."""

from __future__ import annotations

import random

import pytest

from core.fixed_point import SCALE
from processor.strategies import clean_params, strategy_class

CASES = [
    ("ema", {"timeframe_s": 2, "fast": 2, "slow": 5}),
    ("ema", {"timeframe_s": 1, "fast": 4, "slow": 9, "long_only": True}),
    ("ema", {"timeframe_s": 3, "fast": 2, "slow": 4, "bucket_close_only": True}),
    ("volume_breakout", {"bar_volume": "3", "lookback": 2, "hold_bars": 3, "cooldown_bars": 1}),
]


@pytest.mark.parametrize(("kind", "params"), CASES)
def test_only_signal_outputs_gives_the_signals_of_the_full_fold(kind, params) -> None:
    rng = random.Random(8)
    times, prices, volumes = [], [], []
    ts, price = 1_764_460_800_000_000_000, 100.0
    for _ in range(20_000):
        ts += rng.choice((0, 0, 1_000_000, 400_000_000, 900_000_000) * 9 + (-2_000_000_000,))  # equal, out of order too
        price *= 1 + rng.gauss(0, 0.003)
        times.append(ts)
        prices.append(round(price * 100) * SCALE // 100)
        volumes.append(rng.choice((0, 1, 2)) * SCALE)
    cleaned = clean_params(kind, params)
    full, fast = strategy_class(kind)(cleaned), strategy_class(kind)(cleaned)
    rows: list = []
    full_signals: list = []
    fast_signals: list = []
    for start in range(0, len(times), 700):  # state carried across calls, as in a live run
        end = start + 700
        full.fold_columns(times[start:end], prices[start:end], volumes[start:end], rows, full_signals)
        fast_rows: list = []
        fast.fold_columns(
            times[start:end], prices[start:end], volumes[start:end], fast_rows, fast_signals, only_signal_outputs=True
        )
        assert fast_rows == []
    assert full_signals and [s[1:] for s in fast_signals] == [s[1:] for s in full_signals]
    assert full.skipped_out_of_order == fast.skipped_out_of_order > 0
    assert full.position == fast.position
