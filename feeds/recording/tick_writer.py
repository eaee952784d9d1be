"""Batch writers of recorded ticks: COPY on PostgreSQL, bulk_create elsewhere.

A writer writes one batch of ticks plus the persisted checkpoints they advance in one
transaction, so a crash never leaves a checkpoint ahead of the ticks it stands for.
Rows the database refuses are set aside with a reason and the rest of the batch is
written (feeds.recording.tick_refusals); the writer returns the refusals.

A tick whose (instrument, trade id) is already recorded is skipped and counted, never
a failure: two processes briefly overlap when a standby takes a feed over, and a
recovered gap may repeat the last trades before it. The batch is written the fast way
first (COPY into the tick table); only when the unique index refuses it is the batch
written again through a staging table with INSERT ... ON CONFLICT DO NOTHING.
The recorder drives a PipelinedWriter: on PostgreSQL a writer process
(feeds.recording.copy_process), else a synchronous writer run in the database thread;
feeds.recording.database_writer picks one for the default database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import psycopg
from django.db import DataError, IntegrityError, connection, transaction

from feeds.models import StreamCheckpoint, Tick
from feeds.recording.tick_refusals import PYTHON_ROW_ERRORS, Refusal, write_batch
from feeds.recording.tick_rows import CheckpointRow, TickRow, WriteResult, WriteSkipped, copy_skipping_recorded

log = logging.getLogger(__name__)

# What the database (or the driver, converting a value) says about one row rather than
# about the connection: such a row is refused, the rest of its batch written.
ROW_ERRORS: tuple[type[Exception], ...] = (
    DataError,
    IntegrityError,
    psycopg.DataError,
    psycopg.IntegrityError,
    *PYTHON_ROW_ERRORS,
)

TICK_COLUMNS = (
    "instrument_id",
    "ts_event",
    "ts_recv",
    "price",
    "volume",
    "duration_since_last_ns",
    "trade_id",
    "side",
)
# price and volume are numeric(38,0) (core.fixed_point_field); binary COPY needs
# each column's own type, and psycopg writes a Python int as binary numeric.
COPY_TYPES = ["int8", "int8", "int8", "numeric", "numeric", "int8", "text", "text"]


class TickWriter(Protocol):
    def write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> Sequence[Refusal] | None:
        """Persist `rows` and upsert `checkpoints` in one transaction; return the refused rows."""
        ...


class PipelinedWriter(Protocol):
    """Batches written in submission order, each in its own transaction, while later
    ones are already on their way. After a failed batch every later one fails with
    WriteSkipped, unwritten, until `reset()`: a checkpoint never passes missing ticks."""

    def submit(
        self,
        rows: Sequence[TickRow],
        checkpoints: Sequence[CheckpointRow],
    ) -> asyncio.Future[Sequence[Refusal] | None]: ...

    def reset(self) -> None: ...

    async def close(self) -> None: ...


WriteFunction = Callable[[Sequence[TickRow], Sequence[CheckpointRow]], "Sequence[Refusal] | None"]
RunSync = Callable[[WriteFunction, Sequence[TickRow], Sequence[CheckpointRow]], Awaitable["Sequence[Refusal] | None"]]


async def run_in_db_thread(
    write: WriteFunction,
    rows: Sequence[TickRow],
    checkpoints: Sequence[CheckpointRow],
) -> Sequence[Refusal] | None:
    from channels.db import database_sync_to_async

    return await database_sync_to_async(write)(rows, checkpoints)


class InOrderWriter:
    """A synchronous TickWriter as a PipelinedWriter: one write at a time, in order."""

    def __init__(self, writer: TickWriter, run_sync: RunSync = run_in_db_thread) -> None:
        self._writer = writer
        self._run_sync = run_sync
        self._lock = asyncio.Lock()  # FIFO: writes start in submission order
        self._broken = False

    def submit(
        self,
        rows: Sequence[TickRow],
        checkpoints: Sequence[CheckpointRow],
    ) -> asyncio.Future[Sequence[Refusal] | None]:
        return asyncio.ensure_future(self._write(rows, checkpoints))

    async def _write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> Sequence[Refusal] | None:
        async with self._lock:
            if self._broken:
                raise WriteSkipped("skipped: an earlier batch failed")
            try:
                return await self._run_sync(self._writer.write, rows, checkpoints)
            except Exception:
                self._broken = True
                raise

    def reset(self) -> None:
        self._broken = False

    async def close(self) -> None:
        return None


def _upsert_checkpoints(checkpoints: Sequence[CheckpointRow]) -> None:
    if not checkpoints:
        return
    now_fields = ["trade_id", "ts_event", "price", "volume", "side", "updated_at"]
    StreamCheckpoint.objects.bulk_create(
        [
            StreamCheckpoint(
                feed_id=c.feed_id,
                venue_symbol=c.venue_symbol,
                trade_id=c.trade_id,
                ts_event=c.ts_event,
                price=c.price,
                volume=c.volume,
                side=c.side,
            )
            for c in checkpoints
        ],
        update_conflicts=True,
        unique_fields=["feed", "venue_symbol"],
        update_fields=now_fields,
    )


def copy_statement(table: str | None = None) -> str:
    """The binary COPY into the tick table (or `table`), columns in TickRow order."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(name) for name in TICK_COLUMNS)
    return f"COPY {quote(table or Tick._meta.db_table)} ({columns}) FROM STDIN (FORMAT BINARY)"


# A session's own table (TEMP): the rows of a batch the unique index refused, on their way
# into the tick table with ON CONFLICT DO NOTHING.
STAGING_TABLE = "feeds_tick_staging"


def staging_statements() -> list[str]:
    """PostgreSQL: create the staging table, COPY into it, move its new rows into the tick
    table (skipping those already recorded), empty it. Run in that order for one chunk."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(name) for name in TICK_COLUMNS)
    typed = ", ".join(f"{quote(name)} {kind}" for name, kind in zip(TICK_COLUMNS, COPY_TYPES, strict=True))
    staging = quote(STAGING_TABLE)
    return [
        f"CREATE TEMP TABLE IF NOT EXISTS {staging} ({typed})",
        copy_statement(STAGING_TABLE),
        f"INSERT INTO {quote(Tick._meta.db_table)} ({columns}) SELECT {columns} FROM {staging} ON CONFLICT DO NOTHING",
        f"TRUNCATE {staging}",
    ]


def insert_skipping_recorded_statement() -> str:
    """INSERT of one tick row that skips a tick already recorded (any database)."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(name) for name in TICK_COLUMNS)
    values = ", ".join(["%s"] * len(TICK_COLUMNS))
    return f"INSERT INTO {quote(Tick._meta.db_table)} ({columns}) VALUES ({values}) ON CONFLICT DO NOTHING"


def is_duplicate_tick(exc: BaseException) -> bool:
    """Whether a refused write broke a unique index (a tick recorded already), not a row's value."""
    cause = exc.__cause__ if type(exc).__module__.startswith("django") and exc.__cause__ else exc
    if isinstance(cause, psycopg.errors.UniqueViolation):
        return True
    return type(cause).__name__ == "IntegrityError" and "UNIQUE constraint failed" in str(cause)  # sqlite3


def checkpoint_upsert_statement() -> str:
    """PostgreSQL upsert of one checkpoint, parameters in CheckpointRow field order."""
    quote = connection.ops.quote_name
    fields: dict[str, str] = {f.name: f.column for f in StreamCheckpoint._meta.fields}  # type: ignore[misc]
    names = ["feed", "venue_symbol", "trade_id", "ts_event", "price", "volume", "side"]
    columns = [fields[name] for name in names]
    updated = [quote(column) for column in columns[2:]] + [quote(fields["updated_at"])]
    return (
        f"INSERT INTO {quote(StreamCheckpoint._meta.db_table)} "
        f"({', '.join(quote(c) for c in columns)}, {quote(fields['updated_at'])}) "
        f"VALUES ({', '.join(['%s'] * len(columns))}, now()) "
        f"ON CONFLICT ({quote(columns[0])}, {quote(columns[1])}) DO UPDATE SET "
        + ", ".join(f"{column} = EXCLUDED.{column}" for column in updated)
    )


def postgres_conninfo() -> str:
    """The default database's libpq connection string (for a process without Django)."""
    from psycopg.conninfo import make_conninfo

    params = connection.get_connection_params()
    return make_conninfo(
        "", **{k: v for k, v in params.items() if isinstance(v, (str, int)) and k != "prepare_threshold"}
    )


def _checkpoint_refused(checkpoint: CheckpointRow, reason: str) -> None:
    log.warning(
        "recorder: checkpoint of %s not advanced to trade %r, refused by the database (%s)",
        checkpoint.venue_symbol,
        checkpoint.trade_id,
        reason,
    )


# Foreign keys are checked at commit by default, too late to tell which row broke one.
SET_CONSTRAINTS_IMMEDIATE = "SET CONSTRAINTS ALL IMMEDIATE"


class PostgresCopyWriter:
    """Binary COPY into the tick table through Django's own psycopg connection."""

    def __init__(self) -> None:
        self._statement = copy_statement()
        self._staging = staging_statements()

    def write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> WriteResult:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(SET_CONSTRAINTS_IMMEDIATE)
            # Django's wrapper hides psycopg's copy(); `.cursor` is the raw cursor.
            raw = cursor.cursor

            def copy_rows(chunk: Sequence[TickRow]) -> int:
                return copy_skipping_recorded(
                    raw,
                    chunk,
                    copy_sql=self._statement,
                    staging=self._staging,
                    types=COPY_TYPES,
                    savepoint=transaction.atomic,
                )

            return write_batch(
                rows,
                checkpoints,
                write_rows=copy_rows,
                write_checkpoints=_upsert_checkpoints,
                savepoint=transaction.atomic,
                row_errors=ROW_ERRORS,
                on_checkpoint_refused=_checkpoint_refused,
            )


class BulkInsertWriter:
    """bulk_create in batches: SQLite (the embedded default) has no COPY."""

    def __init__(self, *, batch_size: int = 2000) -> None:
        self._batch_size = batch_size

    def write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> WriteResult:
        def insert_rows(chunk: Sequence[TickRow]) -> int:
            ticks = [Tick(**dict(zip(TICK_COLUMNS, row))) for row in chunk]
            try:
                with transaction.atomic():
                    Tick.objects.bulk_create(ticks, batch_size=self._batch_size)
                return 0
            except IntegrityError as exc:
                if not is_duplicate_tick(exc):
                    raise
            return len(chunk) - _insert_skipping_recorded(ticks)

        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(SET_CONSTRAINTS_IMMEDIATE)
            return write_batch(
                rows,
                checkpoints,
                write_rows=insert_rows,
                write_checkpoints=_upsert_checkpoints,
                savepoint=transaction.atomic,
                row_errors=ROW_ERRORS,
                on_checkpoint_refused=_checkpoint_refused,
            )


def _insert_skipping_recorded(ticks: Sequence[Tick]) -> int:
    """Insert `ticks` one statement each, skipping those already recorded; return how many went in."""
    by_column = {field.attname: field for field in Tick._meta.concrete_fields}
    fields = [by_column[name] for name in TICK_COLUMNS]
    params = [[field.get_db_prep_save(getattr(tick, field.attname), connection) for field in fields] for tick in ticks]
    with connection.cursor() as cursor:
        cursor.executemany(insert_skipping_recorded_statement(), params)
        return max(cursor.rowcount, 0)


def as_pipelined(writer: TickWriter | PipelinedWriter, run_sync: RunSync = run_in_db_thread) -> PipelinedWriter:
    """Return `writer` itself when it is pipelined, else an InOrderWriter around it."""
    if hasattr(writer, "submit"):
        return writer  # type: ignore[return-value]
    return InOrderWriter(writer, run_sync)
