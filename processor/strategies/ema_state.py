"""The `ema` kind's state and its one closed-bucket step, shared by its tick loop and its column kernel."""

from __future__ import annotations

from typing import Protocol

from processor.signals import Position


class EmaState(Protocol):
    """What a fold of `ema` reads and writes on its instance (`EmaCrossover`)."""

    timeframe_ns: int
    slow_n: int
    long_only: bool
    bucket_close_only: bool
    alpha_fast: float
    alpha_slow: float
    bucket_start_ns: int
    bucket_end_ns: int
    close: float | None
    closed_buckets: int
    closed_fast: float
    closed_slow: float
    last_ts_ns: int
    position: Position
    skipped_out_of_order: int


def closed_emas(
    closed: int, close: float, cf: float, cs: float, af: float, bf: float, as_: float, bs: float
) -> tuple[float, float]:
    """The fast and slow EMAs over closed buckets after one more closes at `close` (`closed` before it).

    Seeded with the first close; then alpha * close + (1 - alpha) * EMA, in this order of
    operations, which every fold of the kind keeps so their values agree bit for bit.
    """
    if closed:
        return af * close + bf * cf, as_ * close + bs * cs
    return close, close
