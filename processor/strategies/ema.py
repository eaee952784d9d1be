"""`ema`: fast/slow EMA crossover over time buckets, live and intra-bucket.

Bucket = floor(tick time / timeframe). The EMAs run over bucket closes with
alpha = 2 / (n + 1), seeded with the first bucket's close. On every tick the
current bucket's close is that tick's price, so the live value is
alpha * price + (1 - alpha) * EMA of the previous closed bucket, and an entry can
happen before the bucket rolls over. No signal until `slow` buckets have closed.
Desired position: LONG when fast > slow, SHORT when fast < slow (FLAT when
long_only), unchanged when equal; a change exits the old position first.
With `bucket_close_only` the decision is taken only on the first tick after a bucket
closes, from the EMAs of the closed buckets, so it changes at most once per bucket.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from django import forms

from core.fixed_point import SCALE
from feeds.market import MarketData
from processor.outputs import OutputRow
from processor.signals import Position, transition
from processor.strategies.base import SignalRow, StrategyLogic
from processor.strategies.ema_state import closed_emas
from processor.strategies.registry import register_strategy

_NS_PER_S = 1_000_000_000
# Indicators compute in float. `price / SCALE` rounds exactly once but leaves CPython's
# fast path once the integer passes 2**53 (at 12 places any price above 9,007), about 4x
# slower per tick; float() first costs one more rounding, far below what an EMA notices.
_SCALE_FLOAT = float(SCALE)
# Position(n) goes through the enum's metaclass call, a few microseconds: a signal costs one lookup instead.
_POSITION = {int(p): p for p in Position}


class EmaParams(forms.Form):
    """Fast/slow EMA crossover over time buckets."""

    timeframe_s = forms.IntegerField(min_value=1, max_value=86_400)
    fast = forms.IntegerField(min_value=1, max_value=10_000)
    slow = forms.IntegerField(min_value=2, max_value=10_000)
    long_only = forms.BooleanField(required=False)
    # Decide only when a bucket closes (on the first tick after it), from the closed
    # buckets' EMAs: no entry and exit inside one bucket as the live price wobbles.
    bucket_close_only = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "fast" in cleaned and "slow" in cleaned and cleaned["fast"] >= cleaned["slow"]:
            self.add_error("slow", "slow must be greater than fast")
        return cleaned


@register_strategy
class EmaCrossover(StrategyLogic):
    kind = "ema"
    params_form = EmaParams
    output_names = ("fast", "slow")
    fixed_point_outputs = False
    folds_only_signal_outputs = True

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.timeframe_ns = int(params["timeframe_s"]) * _NS_PER_S
        self.fast_n = int(params["fast"])
        self.slow_n = int(params["slow"])
        self.long_only = bool(params.get("long_only", False))
        self.bucket_close_only = bool(params.get("bucket_close_only", False))
        self.alpha_fast = 2 / (self.fast_n + 1)
        self.alpha_slow = 2 / (self.slow_n + 1)
        self.bucket_start_ns = 0
        self.bucket_end_ns = 0  # no bucket yet: the first tick opens one
        self.close: float | None = None  # the current bucket's latest price
        self.closed_buckets = 0
        self.closed_fast = 0.0  # EMAs over closed buckets only
        self.closed_slow = 0.0
        self.last_ts_ns = -1

    @classmethod
    def backfill_window_ns(cls, params: Mapping[str, Any], default_ns: int) -> int:
        # Enough closed buckets for the slow EMA to warm up several times over.
        return int(params["timeframe_s"]) * _NS_PER_S * (4 * int(params["slow"]) + 1)

    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        # One loop for live ticks and for a backtest's columns: the EMA reads no volume.
        self.fold_columns([t.ts_event for t in ticks], [t.price for t in ticks], (), rows, signals, trading=trading)

    def fold_arrays(
        self,
        times: Any,
        prices: Any,
        volumes: Any,
        rows: list[OutputRow],
        signals: list[SignalRow],
        *,
        trading: bool = True,
        only_signal_outputs: bool = False,
    ) -> None:
        # numpy is imported by the first whole-column fold, not by every process that loads the kinds.
        from processor.strategies.ema_arrays import fold_ema_arrays

        fold_ema_arrays(
            self,
            times,
            prices,
            rows,
            signals,
            trading=trading,
            only_signal_outputs=only_signal_outputs,
            scale=_SCALE_FLOAT,
        )

    def fold_columns(
        self,
        times: Sequence[int],
        prices: Sequence[int],
        volumes: Sequence[int],
        rows: list[OutputRow],
        signals: list[SignalRow],
        *,
        trading: bool = True,
        only_signal_outputs: bool = False,
    ) -> None:
        # The hot loop: state lives in locals and is written back once per call.
        timeframe = self.timeframe_ns
        af = self.alpha_fast
        bf = 1 - af
        as_ = self.alpha_slow
        bs = 1 - as_
        start, end = self.bucket_start_ns, self.bucket_end_ns
        close = self.close
        closed = self.closed_buckets
        cf, cs = self.closed_fast, self.closed_slow
        last_ts = self.last_ts_ns
        position = int(self.position)
        warm_after = self.slow_n
        short = 0 if self.long_only else -1
        on_close = self.bucket_close_only
        append = rows.append
        keep = not only_signal_outputs
        index = len(rows) - 1  # the row index of the latest accepted tick
        # Without rows to write, an in-order tick of the open bucket whose fixed-point price
        # lies strictly inside (low, high) cannot change the position: only its price is
        # kept (`held`) for the bucket's close. An empty window (low == high) skips nothing.
        low = high = held = 0
        skipped = 0
        for ts, price in zip(times, prices):
            if low < price < high and last_ts <= ts < end:
                last_ts = ts
                held = price
                index += 1
                continue
            if ts < last_ts:
                skipped += 1
                continue
            last_ts = ts
            rolled = False
            if ts >= end:
                if held:
                    close = float(held) / _SCALE_FLOAT
                if close is not None:  # the previous bucket closes at its last price
                    rolled = True
                    cf, cs = closed_emas(closed, close, cf, cs, af, bf, as_, bs)
                    closed += 1
                start = ts - ts % timeframe
                end = start + timeframe
            held = 0
            close = p = float(price) / _SCALE_FLOAT
            if closed:
                fast = af * p + bf * cf
                slow = as_ * p + bs * cs
            else:
                fast = slow = p
            index += 1
            if keep:
                append((start, ts, fast, slow))
            decides = closed >= warm_after and trading
            if decides and (rolled or not on_close):
                if on_close:
                    fast, slow = cf, cs  # the decision is the closed buckets', not this tick's
                wanted = 1 if fast > slow else short if fast < slow else position
                if wanted != position:
                    for kind in transition(_POSITION[position], _POSITION[wanted]):
                        signals.append((index, kind, price, ts))
                    position = wanted
            if only_signal_outputs:
                low, high = _quiet_window(decides and not on_close, position, short, af, as_, cf, cs)
        if held:
            close = float(held) / _SCALE_FLOAT
        self.bucket_start_ns, self.bucket_end_ns = start, end
        self.close = close
        self.closed_buckets = closed
        self.closed_fast, self.closed_slow = cf, cs
        self.last_ts_ns = last_ts
        self.position = _POSITION[position]
        self.skipped_out_of_order += skipped


_EPS = sys.float_info.epsilon
_EVERYTHING = (0, 1 << 256)  # every price above zero (a held price of 0 would read as none)


def _quiet_window(
    decides: bool, position: int, short: int, af: float, as_: float, cf: float, cs: float
) -> tuple[int, int]:
    """The fixed-point prices (exclusive bounds) at which a tick of the open bucket changes nothing.

    When the open bucket's ticks cannot decide (not warm yet, not trading, or deciding on
    bucket closes only), every price. Otherwise fast - slow = (af - as_) * p + bf * cf - bs * cs
    is linear in the price p and crosses zero at one price: the side of it that keeps the
    held position, shrunk by a margin far above the float rounding of the live EMAs (64
    epsilons of every term), and bounded so that margin stays valid. Flat while shorts are
    allowed, either side changes the position: no window.
    """
    if not decides:
        return _EVERYTHING
    if position != 1 and position != short:
        return 0, 0
    slope = af - as_
    cross = ((1 - as_) * cs - (1 - af) * cf) / slope
    reach = abs(cross) + abs(cf) + abs(cs)
    if not math.isfinite(reach) or slope <= 0:
        return 0, 0
    margin = 64 * _EPS * 6 * reach / slope
    if position == 1:
        lo, hi = cross + margin, 2 * reach
    else:
        lo, hi = -2 * reach, cross - margin
    if lo >= hi:
        return 0, 0
    # One fixed-point unit inside each bound on top of the margin: the int conversion truncates.
    return int(lo * _SCALE_FLOAT) + 1, int(hi * _SCALE_FLOAT) - 1
