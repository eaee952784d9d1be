"""`momentum`: long while the price is above the price `lookback` accepted ticks ago, short while below.

The worked example of docs/processor.md ("Writing a strategy"); the guide shows this
file verbatim and tests/processor/test_strategy_guide.py checks both.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from django import forms

from feeds.market import MarketData
from processor.outputs import OutputRow
from processor.signals import Position, transition
from processor.strategies.base import SignalRow, StrategyLogic
from processor.strategies.registry import register_strategy


class MomentumParams(forms.Form):
    """The admin shows one error per field; `fold` gets the cleaned values."""

    lookback = forms.IntegerField(min_value=1, max_value=10_000)
    long_only = forms.BooleanField(required=False)


@register_strategy
class Momentum(StrategyLogic):
    kind = "momentum"
    params_form = MomentumParams
    output_names = ("reference",)  # the price `lookback` accepted ticks ago
    fixed_point_outputs = True  # a price: stored and pushed as an exact decimal string

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.lookback = int(params["lookback"])
        self.long_only = bool(params.get("long_only", False))
        self.window: deque[int] = deque(maxlen=self.lookback + 1)  # fixed-point prices
        self.last_ts_ns = -1

    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        # One call per batch: state lives in locals and is written back once.
        window = self.window
        full = self.lookback + 1
        last_ts = self.last_ts_ns
        position = self.position
        short = Position.FLAT if self.long_only else Position.SHORT
        append = rows.append
        skipped = 0
        for tick in ticks:
            ts = tick.ts_event
            if ts < last_ts:  # older than the last accepted tick: counted, never folded
                skipped += 1
                continue
            last_ts = ts
            price = tick.price
            window.append(price)
            reference = window[0]
            append((ts, ts, reference))  # (time_ns, occurrence_ns, *values): one row per accepted tick
            if not trading or len(window) < full:
                continue  # backfill only warms up; no signal before `lookback` earlier ticks
            if price > reference:
                wanted = Position.LONG
            elif price < reference:
                wanted = short
            else:
                continue
            if wanted != position:
                index = len(rows) - 1  # the row of the tick that caused it
                for kind in transition(position, wanted):  # the exit first, then the entry
                    signals.append((index, kind, price, ts))
                position = wanted
        self.last_ts_ns = last_ts
        self.position = position
        self.skipped_out_of_order += skipped
