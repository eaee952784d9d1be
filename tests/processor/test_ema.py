"""`ema` against hand-computed sequences: warm-up, intra-bucket values, reversal order."""

from __future__ import annotations

import pytest

from core.fixed_point import SCALE
from processor.signals import Position, SignalKind
from processor.strategies.ema import EmaCrossover
from tests.processor.factories import tick

PARAMS = {"timeframe_s": 10, "fast": 1, "slow": 3, "long_only": False}


def run(strategy: EmaCrossover, ticks):
    rows, signals = [], []
    strategy.fold(ticks, rows, signals)
    return rows, signals


def test_values_are_live_and_intra_bucket_seeded_with_the_first_close():
    ema = EmaCrossover({"timeframe_s": 10, "fast": 3, "slow": 7})
    # Bucket 0 closes at 100 (its last tick), bucket 1 closes at 110.
    rows, _ = run(ema, [tick("X", 1, 90), tick("X", 5, 100), tick("X", 12, 110), tick("X", 25, 130)])
    # Inside the first bucket both EMAs are the tick's price (seeded with the first close).
    assert rows[0] == (0, 1_000_000_000, 90.0, 90.0)
    assert rows[1][2:] == (100.0, 100.0)
    # Bucket 1, live: alpha * price + (1 - alpha) * EMA of the closed bucket 0 (= 100).
    assert rows[2][0] == 10_000_000_000
    assert rows[2][2] == pytest.approx(0.5 * 110 + 0.5 * 100)
    assert rows[2][3] == pytest.approx(0.25 * 110 + 0.75 * 100)
    # Bucket 2: closed EMAs now include bucket 1's close (110).
    fast_closed = 0.5 * 110 + 0.5 * 100
    slow_closed = 0.25 * 110 + 0.75 * 100
    assert rows[3][0] == 20_000_000_000
    assert rows[3][2] == pytest.approx(0.5 * 130 + 0.5 * fast_closed)
    assert rows[3][3] == pytest.approx(0.25 * 130 + 0.75 * slow_closed)


def test_no_signal_until_slow_buckets_have_closed():
    ema = EmaCrossover(PARAMS)
    # Buckets 0, 1, 2 close at rising prices; fast > slow from bucket 1 on, but warm-up is 3 closes.
    rows, signals = run(ema, [tick("X", 1, 100), tick("X", 11, 101), tick("X", 21, 102)])
    assert ema.closed_buckets == 2 and signals == []
    rows, signals = run(ema, [tick("X", 31, 103)])
    assert ema.closed_buckets == 3
    assert [(i, kind) for i, kind, _, _ in signals] == [(0, SignalKind.ENTRY_LONG)]
    assert ema.position == Position.LONG


def test_entry_happens_before_the_bucket_rolls_over():
    ema = EmaCrossover(PARAMS)
    run(ema, [tick("X", 1, 100), tick("X", 11, 100), tick("X", 21, 100)])
    # Bucket 3 opens flat (fast == slow: unchanged), then a tick inside it moves fast above slow.
    rows, signals = run(ema, [tick("X", 31, 100), tick("X", 35, 104)])
    assert [(i, kind) for i, kind, _, _ in signals] == [(1, SignalKind.ENTRY_LONG)]
    assert signals[0][3] == 35_000_000_000 and rows[1][0] == 30_000_000_000


def test_a_reversal_emits_the_exit_first_then_the_opposite_entry_on_the_same_tick():
    ema = EmaCrossover(PARAMS)
    run(ema, [tick("X", 1, 100), tick("X", 11, 101), tick("X", 21, 102), tick("X", 31, 103)])
    assert ema.position == Position.LONG
    rows, signals = run(ema, [tick("X", 33, 90)])
    assert [kind for _, kind, _, _ in signals] == [SignalKind.EXIT_LONG, SignalKind.ENTRY_SHORT]
    assert {index for index, _, _, _ in signals} == {0}
    assert signals[0][2] == 90 * SCALE


def test_long_only_goes_flat_instead_of_short():
    ema = EmaCrossover({**PARAMS, "long_only": True})
    run(ema, [tick("X", 1, 100), tick("X", 11, 101), tick("X", 21, 102), tick("X", 31, 103)])
    _, signals = run(ema, [tick("X", 33, 90)])
    assert [kind for _, kind, _, _ in signals] == [SignalKind.EXIT_LONG]
    assert ema.position == Position.FLAT
    _, signals = run(ema, [tick("X", 34, 80)])
    assert signals == []


def test_equal_emas_keep_the_position():
    flat = EmaCrossover(PARAMS)
    _, signals = run(flat, [tick("X", t, 100) for t in (1, 11, 21, 31, 41)])
    assert signals == [] and flat.position == Position.FLAT


def test_backfill_warms_up_without_trading_and_live_trades_at_once():
    ema = EmaCrossover(PARAMS)
    ema.warm([tick("X", 1, 100), tick("X", 11, 101), tick("X", 21, 102), tick("X", 31, 103)])
    assert ema.position == Position.FLAT and ema.closed_buckets == 3
    _, signals = run(ema, [tick("X", 32, 104)])
    assert [kind for _, kind, _, _ in signals] == [SignalKind.ENTRY_LONG]


def test_a_tick_older_than_the_previous_one_is_skipped_and_counted():
    ema = EmaCrossover(PARAMS)
    rows, _ = run(ema, [tick("X", 5, 100), tick("X", 4, 200), tick("X", 6, 101)])
    assert [row[1] for row in rows] == [5_000_000_000, 6_000_000_000]
    assert ema.skipped_out_of_order == 1


def _whipsaw() -> list:
    """Three flat buckets, then a bucket whose ticks swing above and below the EMAs four times."""
    warm = [tick("X", 1, 100), tick("X", 11, 100), tick("X", 21, 100)]
    swings = [tick("X", 31 + n, 104 if n % 2 == 0 else 96) for n in range(8)]
    return warm + swings + [tick("X", 41, 100), tick("X", 51, 100)]


def test_intra_bucket_swings_whipsaw_without_bucket_close_only():
    _, signals = run(EmaCrossover(PARAMS), _whipsaw())
    assert len(signals) > 8  # an entry and a reversal on almost every tick of one bucket


def test_bucket_close_only_decides_once_per_closed_bucket_from_the_closed_emas():
    ema = EmaCrossover({**PARAMS, "bucket_close_only": True})
    ticks = _whipsaw()
    rows, signals = run(ema, ticks)
    # Bucket 3 closed at 96 (its last tick): fast < slow, a short entry on the first tick of bucket 4;
    # bucket 4 closed at 100 (fast back above slow): the reversal on the first tick of bucket 5. Nothing inside a bucket.
    assert [(kind, ts) for _, kind, _, ts in signals] == [
        (SignalKind.ENTRY_SHORT, 41_000_000_000),
        (SignalKind.EXIT_SHORT, 51_000_000_000),
        (SignalKind.ENTRY_LONG, 51_000_000_000),
    ]
