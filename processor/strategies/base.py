"""The strategy plug-in interface: a kind's logic folded over ticks of one instrument.

A kind is a subclass that declares its name, params form and outputs as class
attributes and is registered with `@register_strategy` (processor.strategies.registry);
its params were validated by that form before it is built. One instance holds the
state of one strategy on one instrument and is driven by exactly one StrategyExecution.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from django import forms

from core.fixed_point import fixed_to_str
from feeds.market import MarketData
from processor.outputs import OutputRow
from processor.signals import Position, SignalKind

# (index of the output row that caused it, kind, tick price (fixed point), tick time ns)
SignalRow = tuple[int, SignalKind, int, int]


class StrategyLogic(ABC):
    kind: ClassVar[str]  # the name stored in Strategy.kind
    # Validates and normalises the JSON params of a Strategy, one error per parameter.
    params_form: ClassVar[type[forms.Form]]
    output_names: ClassVar[tuple[str, ...]]
    # True when output values are fixed-point prices/volumes, False when float indicators.
    fixed_point_outputs: ClassVar[bool]
    # True when `fold_columns` takes `only_signal_outputs=True`: a signals-only backtest
    # then builds no output row per tick, only the signals.
    folds_only_signal_outputs: ClassVar[bool] = False

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = dict(params)
        self.position = Position.FLAT
        self.skipped_out_of_order = 0

    @classmethod
    def backfill_window_ns(cls, params: Mapping[str, Any], default_ns: int) -> int:
        """How much recorded history warms this strategy up before it goes live."""
        return default_ns

    @abstractmethod
    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        """Fold `ticks` (in exchange-time order) into the state.

        Append one output row per accepted tick to `rows` and the signals they cause to
        `signals`. With `trading=False` (backfill) the indicators warm up but the
        position never changes and no signal is emitted. A tick older than the previous
        accepted one is skipped and counted in `skipped_out_of_order`.
        """

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
        """Fold ticks of this instrument given as columns (exchange times ns, fixed-point prices and volumes).

        The same fold as `fold`, without a MarketData per tick: a backtest reading a
        columnar tape calls it when the kind has it (`folds_columns`). A kind whose
        `fold` reads only these three fields can implement its loop once here and have
        `fold` pass the columns of its ticks. With `only_signal_outputs` (only when the
        kind declares `folds_only_signal_outputs`) no row is appended and each signal's
        index is still the index its tick's row would have had in `rows`.
        """
        raise NotImplementedError(f"{type(self).__name__} folds MarketData only")

    @classmethod
    def folds_columns(cls) -> bool:
        """Whether this kind implements `fold_columns` (else a columnar caller builds MarketData)."""
        return cls.fold_columns is not StrategyLogic.fold_columns

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
        """`fold_columns` over int64 numpy arrays (a tape's columns as read), vectorised.

        The same rows, signals and state as `fold_columns` on the same values as lists,
        so calls of both may follow one another. Times are at or after the epoch;
        `volumes` is None when the tape's volumes do not fit in 64 bits (a kind that
        reads volumes then needs the lists). For a kind with a whole-column kernel:
        a backtest over a long tape calls it once per instrument (`folds_arrays`).
        """
        raise NotImplementedError(f"{type(self).__name__} folds lists only")

    @classmethod
    def folds_arrays(cls) -> bool:
        """Whether this kind implements `fold_arrays`."""
        return cls.fold_arrays is not StrategyLogic.fold_arrays

    def warm(self, ticks: Sequence[MarketData]) -> None:
        """Pre-fill the state from history without trading."""
        self.fold(ticks, [], [], trading=False)

    def adopt(self, position: Position) -> None:
        """Start trading from `position`, held from before this instance existed.

        Called once, after `warm` and before the first live tick: the position a restarted
        (or re-parameterised) strategy already holds, so its next exit closes it and its
        next entry is not refused as already open. A kind whose exits depend on when the
        position was entered overrides this to set that state too.
        """
        self.position = position

    @property
    def has_open_position(self) -> bool:
        return self.position != Position.FLAT

    @classmethod
    def encode_values(cls, row: OutputRow) -> dict[str, Any]:
        """Return a row's values for JSON: decimal strings for prices, floats for indicators."""
        values = row[2:]
        if cls.fixed_point_outputs:
            return {name: fixed_to_str(value) for name, value in zip(cls.output_names, values)}
        return dict(zip(cls.output_names, values))
