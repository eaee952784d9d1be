"""The tick writer process: binary COPY of recorded ticks, outside the feed's process.

Run by `feeds.recording.copy_process.CopyProcessWriter` as `python -m feeds.recording.copy_worker`, with no
Django: it reads the connection string from the environment (never argv, so it stays
out of the process list), the SQL from its first frame, then one frame per batch.
Frames both ways are a 4-byte big-endian length and a msgpack body:

    parent -> worker   {"copy": sql, "types": [...], "upsert": sql, "staging": [sql, ...]}  once, first
                       ["batch", batch_id, rows, checkpoints]
                       ["reset"]
    worker -> parent   [batch_id, None, refused, duplicates]   committed, but for the refused rows
                       [batch_id, "reason", [], 0]             not written

`refused` lists [index in the batch, reason] for each row the database refused: the
rest of the batch is written without it (feeds.recording.tick_refusals); `duplicates`
counts the rows skipped as already recorded (the unique index on instrument and trade
id refused the COPY, so that chunk went through the staging statements). Each batch (ticks and the
checkpoints they advance) is one transaction, in the order received. After a failed
batch every later one is refused unwritten until "reset", so a checkpoint can never move
past ticks that are not in the database.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO

import msgspec
import psycopg

from feeds.recording.tick_refusals import PYTHON_ROW_ERRORS, write_batch
from feeds.recording.tick_rows import WriteResult, copy_skipping_recorded

CONNINFO_ENV = "TRADINGSITE_COPY_CONNINFO"
# msgpack integers stop at 64 bits; a fixed-point price or volume may be wider (up to
# core.fixed_point.FIXED_MAX_ABS), so such an int travels as this extension: its digits.
WIDE_INT_EXT = 1
SKIPPED = "skipped: an earlier batch failed"
# How the worker's session shows in pg_stat_activity.
APPLICATION_NAME = "tradingsite-tick-writer"
_LENGTH = struct.Struct(">I")
# What the database (or psycopg, converting a value) says about one row rather than
# about the connection.
ROW_ERRORS: tuple[type[Exception], ...] = (psycopg.DataError, psycopg.IntegrityError, *PYTHON_ROW_ERRORS)


def read_frame(stream: BinaryIO, decode: Any) -> Any | None:
    """Return the next decoded frame, or None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    body = stream.read(length)
    if len(body) < length:
        return None
    return decode(body)


def frame(body: bytes) -> bytes:
    return _LENGTH.pack(len(body)) + body


def wide_int(value: int) -> msgspec.msgpack.Ext:
    """Return an int too wide for msgpack as the WIDE_INT_EXT extension."""
    return msgspec.msgpack.Ext(WIDE_INT_EXT, str(value).encode("ascii"))


def decode_ext(code: int, data: memoryview) -> Any:
    if code == WIDE_INT_EXT:
        return int(bytes(data))
    raise ValueError(f"unknown msgpack extension {code}")


class _Worker:
    def __init__(self, conninfo: str, copy_sql: str, types: list[str], upsert_sql: str, staging: list[str]) -> None:
        self._conninfo = conninfo
        self._copy_sql = copy_sql
        self._staging = staging
        self._types = types
        self._upsert_sql = upsert_sql
        self._conn: psycopg.Connection[Any] | None = None
        self.broken = False

    def write(self, rows: list[list[Any]], checkpoints: list[list[Any]]) -> WriteResult:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._conninfo, application_name=APPLICATION_NAME)
        conn = self._conn
        with conn.transaction(), conn.cursor() as cursor:
            # Foreign keys are checked at commit by default, too late to tell which row broke one.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

            def copy_rows(chunk: Sequence[Any]) -> int:
                return copy_skipping_recorded(
                    cursor,
                    chunk,
                    copy_sql=self._copy_sql,
                    staging=self._staging,
                    types=self._types,
                    savepoint=conn.transaction,
                )

            def upsert(chunk: Sequence[Any]) -> None:
                cursor.executemany(self._upsert_sql, chunk)

            def refused_checkpoint(checkpoint: list[Any], reason: str) -> None:
                # stderr is the worker's log: the parent's process inherits it.
                print(
                    f"copy_worker: checkpoint of {checkpoint[1]} not advanced to trade {checkpoint[2]!r}, "
                    f"refused by the database ({reason})",
                    file=sys.stderr,
                    flush=True,
                )

            return write_batch(
                rows,
                checkpoints,
                write_rows=copy_rows,
                write_checkpoints=upsert,
                savepoint=conn.transaction,
                row_errors=ROW_ERRORS,
                on_checkpoint_refused=refused_checkpoint,
            )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def main() -> int:
    # Ctrl-C and a service manager's SIGTERM reach the whole process group; the parent
    # flushes on its way out, so the worker keeps going and stops at the end of stdin
    # (the parent closing it, or dying).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    decode = msgspec.msgpack.Decoder(ext_hook=decode_ext).decode
    encode = msgspec.msgpack.Encoder().encode
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    hello = read_frame(source, decode)
    if hello is None:
        return 0
    worker = _Worker(os.environ[CONNINFO_ENV], hello["copy"], hello["types"], hello["upsert"], hello["staging"])
    try:
        while (message := read_frame(source, decode)) is not None:
            if message[0] == "reset":
                worker.broken = False
                continue
            _, batch_id, rows, checkpoints = message
            error: str | None = SKIPPED if worker.broken else None
            result = WriteResult()
            if error is None:
                try:
                    result = worker.write(rows, checkpoints)
                except Exception as exc:  # reported to the recorder, which keeps the rows
                    worker.broken = True
                    error = f"{type(exc).__name__}: {exc}".strip()
            sink.write(frame(encode([batch_id, error, list(result), result.duplicates])))
            sink.flush()
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
