"""The simple strategy interfaces: one method per tick, or one per closed bar.

Most strategies do not need the batch `fold` of StrategyLogic (the hot path's interface,
kept for the built-in kinds). A kind written on these bases implements one method that
returns the position it wants, and the base turns changes of that wish into signals
exactly as the built-in kinds do (the exit of the old position first):

    @register_strategy
    class Momentum(TickStrategy):
        kind = "momentum"
        params_form = MomentumParams
        output_names = ("average",)

        def on_tick(self, price: float, volume: float, ts_ns: int) -> Position | None:
            ...
            return Position.LONG if price > self.average else Position.FLAT

        def outputs(self) -> tuple[float, ...]:
            return (self.average,)

Returning None keeps the position. While the strategy warms up from history the methods
run as live (indicators fill) but no position changes and no signal is emitted. Prices
and volumes arrive as floats (the indicator's precision); the signal carries the tick's
exact price. A tick older than the previous one is skipped and counted, as for every kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from django import forms

from core.fixed_point import SCALE
from feeds.market import MarketData
from processor.outputs import OutputRow
from processor.signals import Position, transition
from processor.strategies.base import SignalRow, StrategyLogic

_SCALE_FLOAT = float(SCALE)
_NS_PER_S = 1_000_000_000


def _move(position: Position, wanted: Position, index: int, tick: MarketData, signals: list[SignalRow]) -> Position:
    """Append the signals that take `position` to `wanted` (the exit first), caused by row `index`."""
    for kind in transition(position, wanted):
        signals.append((index, kind, tick.price, tick.ts_event))
    return Position(wanted)


class TickStrategy(StrategyLogic):
    """A kind that sees every tick: implement `on_tick` and `outputs`."""

    fixed_point_outputs: ClassVar[bool] = False

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.last_ts_ns = -1

    def on_tick(self, price: float, volume: float, ts_ns: int) -> Position | None:
        """Take one tick; return the position wanted from now on (None: keep it)."""
        raise NotImplementedError

    def outputs(self) -> tuple[float, ...]:
        """The values of `output_names` after the latest tick (drawn on the chart)."""
        raise NotImplementedError

    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        # Per tick only the strategy's two calls and the row: methods bound once, state in
        # locals, and a wanted position equal to the held one (the usual answer) costs an
        # identity check.
        position = self.position
        last = self.last_ts_ns
        skipped = 0
        on_tick, outputs, append = self.on_tick, self.outputs, rows.append
        scale = _SCALE_FLOAT
        for tick in ticks:
            ts = tick.ts_event
            if ts < last:
                skipped += 1
                continue
            last = ts
            wanted = on_tick(tick.price / scale, tick.volume / scale, ts)
            append((ts, ts, *outputs()))
            if wanted is None or wanted is position or not trading:
                continue
            if wanted != position:
                position = _move(position, wanted, len(rows) - 1, tick, signals)
        self.last_ts_ns = last
        self.position = position
        self.skipped_out_of_order += skipped


@dataclass(slots=True)
class Bar:
    """One closed time bucket of an instrument's ticks (floats, as indicators use them)."""

    start_ns: int
    open: float
    high: float
    low: float
    close: float
    volume: float
    ticks: int


class BarParams(forms.Form):
    """The bar width every bar strategy takes; a kind's params form subclasses this one."""

    timeframe_s = forms.IntegerField(min_value=1, max_value=86_400)


class BarStrategy(StrategyLogic):
    """A kind that decides once per closed bar: implement `on_bar` and `outputs`.

    A bar closes when the first tick of the next bucket arrives (bucket = floor(tick
    time / timeframe_s)); `on_bar` decides then, and a signal it causes carries that
    tick's price and time. Buckets without a tick make no bar. Deciding only on closed
    bars is what keeps a strategy from flipping on every tick inside a bucket.
    """

    fixed_point_outputs: ClassVar[bool] = False

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.timeframe_ns = int(self.params["timeframe_s"]) * _NS_PER_S
        self.last_ts_ns = -1
        self.bar: Bar | None = None  # the open bucket

    def on_bar(self, bar: Bar) -> Position | None:
        """Take one closed bar; return the position wanted from now on (None: keep it)."""
        raise NotImplementedError

    def outputs(self) -> tuple[float, ...]:
        """The values of `output_names` after the latest closed bar."""
        raise NotImplementedError

    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        # The open bar lives in locals and becomes a Bar only when it closes (and once at the
        # end, as the state to resume from); `outputs()` is asked once per closed bar, the
        # values it documents, not once per tick.
        position = self.position
        last = self.last_ts_ns
        timeframe = self.timeframe_ns
        scale = _SCALE_FLOAT
        on_bar, append = self.on_bar, rows.append
        values = self.outputs()
        bar = self.bar
        if bar is None:
            start = -1
            o = h = lo = c = v = 0.0
            n = 0
        else:
            start, o, h, lo, c, v, n = bar.start_ns, bar.open, bar.high, bar.low, bar.close, bar.volume, bar.ticks
        skipped = 0
        for tick in ticks:
            ts = tick.ts_event
            if ts < last:
                skipped += 1
                continue
            last = ts
            price = tick.price / scale
            volume = tick.volume / scale
            bucket = ts - ts % timeframe
            if bucket != start:
                wanted = None
                if n:
                    wanted = on_bar(Bar(start, o, h, lo, c, v, n))
                    values = self.outputs()
                start, o, h, lo, c, v, n = bucket, price, price, price, price, volume, 1
                append((start, ts, *values))
                if wanted is not None and wanted != position and trading:
                    position = _move(position, wanted, len(rows) - 1, tick, signals)
            else:
                if price > h:
                    h = price
                elif price < lo:
                    lo = price
                c = price
                v += volume
                n += 1
                append((start, ts, *values))
        self.bar = Bar(start, o, h, lo, c, v, n) if n else None
        self.last_ts_ns = last
        self.position = position
        self.skipped_out_of_order += skipped
