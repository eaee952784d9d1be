"""`volume_breakout`: breakouts of synthetic volume bars, close-gated.

A bar opens at its first tick and closes on the tick that brings its volume to
`bar_volume` or more (exact fixed point; no carry-over). Every tick updates the latest
output (time = the bar's first tick time); signals only at a bar close. At a close,
against the previous `lookback` closed bars: close above their highest high is a long
breakout, below their lowest low a short one. In a position, an opposite breakout
reverses (exit first, no cooldown); otherwise `hold_bars` closed bars after the entry
bar end it with a managed exit, after which the first bar that may enter is
exit bar + cooldown_bars + 1. A same-side breakout changes nothing. An adopted
position (held from before a restart) is treated as entered at the last bar closed
before adoption, its real entry bar being unknown: it ends at an opposite breakout or
at the `hold_bars`-th bar close after adoption.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from django import forms

from feeds.market import MarketData, fixed_from_decimal
from processor.outputs import OutputRow
from processor.signals import Position, transition
from processor.strategies.base import SignalRow, StrategyLogic
from processor.strategies.registry import register_strategy


class VolumeBreakoutParams(forms.Form):
    """Breakouts of synthetic volume bars over the last `lookback` bars."""

    bar_volume = forms.DecimalField(min_value=Decimal("0.000000000001"), max_digits=30, decimal_places=12)
    lookback = forms.IntegerField(min_value=1, max_value=10_000)
    hold_bars = forms.IntegerField(min_value=1, max_value=100_000)
    cooldown_bars = forms.IntegerField(min_value=0, max_value=100_000)


@register_strategy
class VolumeBreakout(StrategyLogic):
    kind = "volume_breakout"
    params_form = VolumeBreakoutParams
    output_names = ("open", "high", "low", "close", "volume")
    fixed_point_outputs = True
    folds_only_signal_outputs = True

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.bar_volume = fixed_from_decimal(Decimal(str(params["bar_volume"])))
        self.lookback = int(params["lookback"])
        self.hold_bars = int(params["hold_bars"])
        self.cooldown_bars = int(params["cooldown_bars"])
        # The open bar: None until a tick opens it.
        self.bar_start_ns: int | None = None
        self.bar_open = self.bar_high = self.bar_low = self.bar_close = self.bar_volume_sum = 0
        self.reference: deque[tuple[int, int]] = deque(maxlen=self.lookback)  # (high, low) of closed bars
        self.closed_bars = 0  # index of the open bar
        self.entry_bar = -1
        self.first_entry_bar = 0  # delayed re-entry after a managed exit
        self.last_ts_ns = -1

    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        # One loop for live ticks and for a backtest's columns.
        self.fold_columns(
            [t.ts_event for t in ticks],
            [t.price for t in ticks],
            [t.volume for t in ticks],
            rows,
            signals,
            trading=trading,
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
        target = self.bar_volume
        start = self.bar_start_ns
        o, h, lo, c, v = self.bar_open, self.bar_high, self.bar_low, self.bar_close, self.bar_volume_sum
        last_ts = self.last_ts_ns
        append = rows.append
        keep = not only_signal_outputs
        index = len(rows) - 1  # the row index of the latest accepted tick
        skipped = 0
        for ts, price, volume in zip(times, prices, volumes, strict=True):
            if ts < last_ts:
                skipped += 1
                continue
            last_ts = ts
            if start is None:
                start = ts
                o = h = lo = c = price
                v = volume
            else:
                if price > h:
                    h = price
                elif price < lo:
                    lo = price
                c = price
                v += volume
            index += 1
            if keep:
                append((start, ts, o, h, lo, c, v))
            if v >= target:
                if trading:
                    self._on_close(c, price, ts, index, signals)
                self.reference.append((h, lo))
                self.closed_bars += 1
                start = None
        self.bar_start_ns = start
        self.bar_open, self.bar_high, self.bar_low, self.bar_close, self.bar_volume_sum = o, h, lo, c, v
        self.last_ts_ns = last_ts
        self.skipped_out_of_order += skipped

    def adopt(self, position: Position) -> None:
        super().adopt(position)
        if position != Position.FLAT:
            self.entry_bar = self.closed_bars - 1

    def _on_close(self, close: int, price: int, ts: int, index: int, signals: list[SignalRow]) -> None:
        bar = self.closed_bars
        breakout = Position.FLAT
        if len(self.reference) == self.lookback:
            if close > max(high for high, _ in self.reference):
                breakout = Position.LONG
            elif close < min(low for _, low in self.reference):
                breakout = Position.SHORT
        position = self.position
        if position != Position.FLAT:
            if breakout == -position:
                wanted = Position(breakout)
                self.entry_bar = bar
            elif bar - self.entry_bar >= self.hold_bars:
                wanted = Position.FLAT
                self.first_entry_bar = bar + self.cooldown_bars + 1
            else:
                return
        elif breakout != Position.FLAT and bar >= self.first_entry_bar:
            wanted = breakout
            self.entry_bar = bar
        else:
            return
        for kind in transition(position, wanted):
            signals.append((index, kind, price, ts))
        self.position = wanted
