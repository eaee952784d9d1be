"""A test-only strategy kind whose position is scripted by the ticks themselves.

A tick's trade_id "long", "short" or "flat" sets the wanted position; any other trade
id keeps it. Lifecycle tests use it to open and close positions exactly when they want.
"""

from __future__ import annotations

from collections.abc import Sequence

from django import forms

from feeds.market import MarketData
from processor.outputs import OutputRow
from processor.signals import Position, transition
from processor.strategies import STRATEGIES, StrategyLogic, register_strategy
from processor.strategies.base import SignalRow

KIND = "test_scripted"
_WANTED = {"long": Position.LONG, "short": Position.SHORT, "flat": Position.FLAT}


class ScriptedParams(forms.Form):
    """No params: the ticks say what to do."""


class ScriptedStrategy(StrategyLogic):
    kind = KIND
    params_form = ScriptedParams
    output_names = ("position",)
    fixed_point_outputs = False

    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        for tick in ticks:
            wanted = _WANTED.get(tick.trade_id or "", self.position) if trading else self.position
            rows.append((tick.ts_event, tick.ts_event, float(wanted)))
            for kind in transition(self.position, wanted):
                signals.append((len(rows) - 1, kind, tick.price, tick.ts_event))
            self.position = wanted


if KIND not in STRATEGIES:
    register_strategy(ScriptedStrategy)
