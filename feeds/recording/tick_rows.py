"""What a tick writer is handed: rows of ticks, the checkpoints they advance, and its one refusal.

Shared by the in-process writers (feeds.recording.tick_writer) and the writer process's client
(feeds.recording.copy_process), neither of which should need the other to name a row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg

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


def copy_skipping_recorded(
    cursor: psycopg.Cursor[Any],
    chunk: Sequence[Any],
    *,
    copy_sql: str,
    staging: Sequence[str],
    types: Sequence[str],
    savepoint: Callable[[], AbstractContextManager[Any]],
) -> int:
    """COPY `chunk` into the tick table; return how many of its rows were already recorded.

    The plain COPY is tried first (under `savepoint`, so a refusal leaves the batch's
    transaction usable): a takeover's overlap is rare, and this keeps the usual batch at
    one statement. Only a batch the unique index refuses goes through the staging table
    (`staging`: create, COPY into it, move skipping recorded ticks, empty it).
    """

    def copy_into(statement: str) -> None:
        with cursor.copy(statement) as copy:
            copy.set_types(types)
            for row in chunk:
                copy.write_row(row)

    try:
        with savepoint():
            copy_into(copy_sql)
        return 0
    except psycopg.errors.UniqueViolation:
        create, copy_staging, move, clear = staging
        cursor.execute(create)
        copy_into(copy_staging)
        cursor.execute(move)
        inserted = cursor.rowcount
        cursor.execute(clear)
        return len(chunk) - inserted
