"""Where the processor sends strategy outputs and signals (live publisher, backtest writer, bench)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from processor.outputs import OutputBatch, StrategyOutput
from processor.signals import Signal


class StrategyEventSink(Protocol):
    def outputs(self, batch: OutputBatch) -> None:
        """Take a batch of outputs; must not await or block (it runs on the hot path)."""
        ...

    def signals(self, signals: Sequence[Signal], outputs: Sequence[StrategyOutput]) -> None:
        """Take signals with the output each was derived from (same order); must not block."""
        ...
