"""Synchronous batch writers of recorded ticks: COPY on PostgreSQL, bulk_create elsewhere.

A writer is called from one thread at a time (the recorder's flush) and writes one
batch of ticks plus the persisted checkpoints they advance in one transaction, so a
crash never leaves a checkpoint ahead of the ticks it stands for.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from django.db import connection, transaction

from feeds.models import StreamCheckpoint, Tick

# instrument_id, ts_event, ts_recv, price, volume, duration_since_last_ns, trade_id, side
TickRow = tuple[int, int, int, int, int, int | None, str, str]
TICK_COLUMNS = (
    "instrument_id", "ts_event", "ts_recv", "price", "volume", "duration_since_last_ns", "trade_id", "side",
)
_COPY_TYPES = ["int8", "int8", "int8", "int8", "int8", "int8", "text", "text"]


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


class TickWriter(Protocol):
    def write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> None:
        """Persist `rows` and upsert `checkpoints` in one transaction."""
        ...


def _upsert_checkpoints(checkpoints: Sequence[CheckpointRow]) -> None:
    if not checkpoints:
        return
    now_fields = ["trade_id", "ts_event", "price", "volume", "side", "updated_at"]
    StreamCheckpoint.objects.bulk_create(
        [
            StreamCheckpoint(
                feed_id=c.feed_id, venue_symbol=c.venue_symbol, trade_id=c.trade_id,
                ts_event=c.ts_event, price=c.price, volume=c.volume, side=c.side,
            )
            for c in checkpoints
        ],
        update_conflicts=True,
        unique_fields=["feed", "venue_symbol"],
        update_fields=now_fields,
    )


class PostgresCopyWriter:
    """Binary COPY into the tick table through Django's own psycopg connection."""

    def __init__(self) -> None:
        quote = connection.ops.quote_name
        columns = ", ".join(quote(name) for name in TICK_COLUMNS)
        self._statement = f"COPY {quote(Tick._meta.db_table)} ({columns}) FROM STDIN (FORMAT BINARY)"

    def write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> None:
        with transaction.atomic():
            if rows:
                with connection.cursor() as cursor:
                    # Django's wrapper hides psycopg's copy(); `.cursor` is the raw cursor.
                    with cursor.cursor.copy(self._statement) as copy:
                        copy.set_types(_COPY_TYPES)
                        for row in rows:
                            copy.write_row(row)
            _upsert_checkpoints(checkpoints)


class BulkInsertWriter:
    """bulk_create in batches: SQLite (the embedded default) has no COPY."""

    def __init__(self, *, batch_size: int = 2000) -> None:
        self._batch_size = batch_size

    def write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> None:
        with transaction.atomic():
            Tick.objects.bulk_create(
                [Tick(**dict(zip(TICK_COLUMNS, row))) for row in rows], batch_size=self._batch_size
            )
            _upsert_checkpoints(checkpoints)


def writer_for_database() -> TickWriter:
    """Return the fastest writer the default database supports."""
    if connection.vendor == "postgresql":
        return PostgresCopyWriter()
    return BulkInsertWriter()
