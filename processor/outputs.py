"""Strategy outputs: the indicator values a strategy emits for every accepted tick.

On the hot path an execution appends one plain tuple per tick to a row list,
`(time_ns, occurrence_ns, *values)`, and hands the whole list on as one
`OutputBatch`; a tuple costs a fraction of an object and outputs are far more
numerous than their readers (the dashboard and the store conflate them). Readers
that want objects call `OutputBatch.outputs()` or `OutputBatch.last()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

OutputRow = tuple[Any, ...]  # (time_ns, occurrence_ns, *values), values in `names` order


def output_id(execution_id: str, seq: int) -> str:
    """The id of the seq-th output of one execution incarnation; unique across restarts."""
    return f"{execution_id}:{seq}"


@dataclass(frozen=True, slots=True)
class StrategyOutput:
    output_id: str
    strategy_id: int
    strategy_name: str
    kind: str
    feed: str
    symbol: str
    time_ns: int  # the strategy's logical time: EMA bucket start or volume bar start
    occurrence_ns: int  # exchange time of the tick that caused it
    values: dict[str, Any]  # floats for indicators, fixed-point ints for prices and volumes


@dataclass(slots=True)  # not frozen: a frozen __init__ costs more than folding a tick; never mutated
class OutputBatch:
    """Consecutive outputs of one execution: rows[i] has sequence number first_seq + i."""

    strategy_id: int
    strategy_name: str
    kind: str
    feed: str
    symbol: str
    execution_id: str
    names: tuple[str, ...]
    first_seq: int
    rows: list[OutputRow]

    def output(self, index: int) -> StrategyOutput:
        row = self.rows[index]
        return StrategyOutput(
            output_id=output_id(self.execution_id, self.first_seq + index),
            strategy_id=self.strategy_id,
            strategy_name=self.strategy_name,
            kind=self.kind,
            feed=self.feed,
            symbol=self.symbol,
            time_ns=row[0],
            occurrence_ns=row[1],
            values=dict(zip(self.names, row[2:])),
        )

    def outputs(self) -> Iterator[StrategyOutput]:
        for index in range(len(self.rows)):
            yield self.output(index)

    def last(self) -> StrategyOutput:
        return self.output(len(self.rows) - 1)
