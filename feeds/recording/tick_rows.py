"""What a tick writer is handed: rows of ticks, the checkpoints they advance, and its one refusal.

Shared by the in-process writers (feeds.recording.tick_writer) and the writer process's client
(feeds.recording.copy_process), neither of which should need the other to name a row.
"""

from __future__ import annotations

from dataclasses import dataclass

# instrument_id, ts_event, ts_recv, price, volume, duration_since_last_ns, trade_id, side
TickRow = tuple[int, int, int, int, int, int | None, str, str]


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """The last tick of a (feed, venue symbol) in a batch."""

    feed_id: int
    venue_symbol: str
    trade_id: str
    ts_event: int
    price: int
    volume: int
    side: str


class WriteResult(list[tuple[int, str]]):
    """What a writer reports for one batch: the refused rows, as (index, reason), and how
    many rows it skipped as already recorded (the same instrument and trade id).

    A list of the refusals, so a caller that only reads those reads it as before.
    """

    def __init__(self, refused: list[tuple[int, str]] | None = None, duplicates: int = 0) -> None:
        super().__init__(refused or [])
        self.duplicates = duplicates


class WriteSkipped(RuntimeError):
    """A batch refused unwritten because an earlier one failed (see PipelinedWriter)."""
