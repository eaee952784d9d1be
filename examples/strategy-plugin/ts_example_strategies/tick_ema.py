"""`tick_ema`: the fast/slow EMA crossover of the built-in `ema` kind, on the per-tick interface.

The same arithmetic as the built-in kind (EMAs over bucket closes, the live bucket's
close is the latest price), written the simple way: the benchmark compares the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from processor.signals import Position
from processor.strategies import register_strategy
from processor.strategies.simple import TickStrategy

NS_PER_S = 1_000_000_000


class TickEmaParams(forms.Form):
    timeframe_s = forms.IntegerField(min_value=1, max_value=86_400)
    fast = forms.IntegerField(min_value=1, max_value=10_000)
    slow = forms.IntegerField(min_value=2, max_value=10_000)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "fast" in cleaned and "slow" in cleaned and cleaned["fast"] >= cleaned["slow"]:
            self.add_error("slow", "slow must be greater than fast")
        return cleaned


@register_strategy
class TickEma(TickStrategy):
    kind = "tick_ema"
    params_form = TickEmaParams
    output_names = ("fast", "slow")

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.timeframe_ns = int(params["timeframe_s"]) * NS_PER_S
        self.slow_n = int(params["slow"])
        self.af = 2 / (int(params["fast"]) + 1)
        self.as_ = 2 / (self.slow_n + 1)
        self.end = 0
        self.close: float | None = None
        self.closed = 0
        self.cf = self.cs = 0.0
        self.fast = self.slow = 0.0

    def on_tick(self, price: float, volume: float, ts_ns: int) -> Position | None:
        if ts_ns >= self.end:  # a new bucket: the previous one closes at its last price
            close = self.close
            if close is not None:
                if self.closed:
                    self.cf += self.af * (close - self.cf)
                    self.cs += self.as_ * (close - self.cs)
                else:
                    self.cf = self.cs = close
                self.closed += 1
            self.end = ts_ns - ts_ns % self.timeframe_ns + self.timeframe_ns
        self.close = price
        if not self.closed:
            self.fast = self.slow = price
            return None
        self.fast = fast = self.cf + self.af * (price - self.cf)
        self.slow = slow = self.cs + self.as_ * (price - self.cs)
        if self.closed < self.slow_n:
            return None
        return Position.LONG if fast > slow else Position.SHORT if fast < slow else None

    def outputs(self) -> tuple[float, ...]:
        return (self.fast, self.slow)
