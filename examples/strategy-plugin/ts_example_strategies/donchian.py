"""`donchian`: a breakout on closed bars, long only.

Enter long when a bar closes above the highest high of the `entry_bars` bars before
it; exit when a bar closes below the lowest low of the `exit_bars` bars before it.
Deciding on closed bars only, it cannot flip inside a bar.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from django import forms

from processor.signals import Position
from processor.strategies import register_strategy
from processor.strategies.simple import Bar, BarParams, BarStrategy


class DonchianParams(BarParams):
    entry_bars = forms.IntegerField(min_value=1, max_value=1_000, initial=20)
    exit_bars = forms.IntegerField(min_value=1, max_value=1_000, initial=10)


@register_strategy
class Donchian(BarStrategy):
    kind = "donchian"
    params_form = DonchianParams
    output_names = ("upper", "lower")

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.entry_bars = int(params["entry_bars"])
        self.exit_bars = int(params["exit_bars"])
        self.highs: deque[float] = deque(maxlen=self.entry_bars)
        self.lows: deque[float] = deque(maxlen=self.exit_bars)
        self.upper = self.lower = 0.0

    def on_bar(self, bar: Bar) -> Position | None:
        wanted = None
        if len(self.highs) == self.entry_bars and bar.close > self.upper:
            wanted = Position.LONG
        elif len(self.lows) == self.exit_bars and bar.close < self.lower:
            wanted = Position.FLAT
        self.highs.append(bar.high)
        self.lows.append(bar.low)
        self.upper, self.lower = max(self.highs), min(self.lows)
        return wanted

    def outputs(self) -> tuple[float, ...]:
        return (self.upper, self.lower)
