"""Rows of a tick batch the database refuses: found, set aside with a reason, the rest written.

A batch that fails as a whole on one bad row would fail again on every retry, and the
recorder would stall behind it forever. So when the database refuses a write for a
reason that belongs to a row (a value outside the signed 64-bit columns, a NUL or an
overlong trade id, a vanished instrument: a data or integrity error, never a lost
connection), the writer writes halves of the batch in savepoints until the rows it
refuses stand alone, and reports each with a reason.

Pure Python without Django: the COPY worker process uses it as well as the in-process
writers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from feeds.recording.tick_rows import WriteResult

# (index of the row in its batch, reason): what a writer reports for each refused row.
Refusal = tuple[int, str]

# Python-side failures of turning a value into its column type (an int beyond 64 bits,
# a lone surrogate in a text); the database's own row-level refusals are added by each
# writer (psycopg's or Django's DataError and IntegrityError).
PYTHON_ROW_ERRORS: tuple[type[Exception], ...] = (OverflowError, ValueError, TypeError)


def refusal_reason(exc: Exception) -> str:
    """Name a row-level refusal: a metric label, stable across occurrences."""
    if isinstance(exc, OverflowError):
        return "out_of_range"
    if isinstance(exc, UnicodeError):
        return "not_utf8"
    if isinstance(exc, (ValueError, TypeError)):
        return f"value:{type(exc).__name__}"
    # psycopg names the SQLSTATE (NumericValueOutOfRange, CharacterNotInRepertoire,
    # StringDataRightTruncation, ForeignKeyViolation); Django's wrapper keeps the cause.
    cause = exc.__cause__ if type(exc).__module__.startswith("django") and exc.__cause__ else exc
    if type(cause).__name__ == "NumericValueOutOfRange":
        return "out_of_range"  # the same refusal as a value Python finds too wide
    return f"database:{type(cause).__name__}"


def write_isolating(
    rows: Sequence[Any],
    indexes: Sequence[int],
    write: Callable[[Sequence[Any]], int | None],
    savepoint: Callable[[], AbstractContextManager[Any]],
    row_errors: tuple[type[Exception], ...],
) -> WriteResult:
    """Write `rows`; when the database refuses the write with a row-level error, write
    halves in savepoints down to the single rows it refuses. Return those, by index,
    with the rows `write` skipped as already recorded (its return value, summed).

    Any other error (a lost connection) propagates: the batch is then retried whole.
    """
    refused = WriteResult()

    def attempt(start: int, end: int) -> None:
        try:
            with savepoint():
                skipped = write(rows[start:end])
            refused.duplicates += skipped or 0
        except row_errors as exc:
            if end - start == 1:
                refused.append((indexes[start], refusal_reason(exc)))
                return
            middle = (start + end) // 2
            attempt(start, middle)
            attempt(middle, end)

    if rows:
        attempt(0, len(rows))
    return refused


def write_batch(
    rows: Sequence[Any],
    checkpoints: Sequence[Any],
    *,
    write_rows: Callable[[Sequence[Any]], int | None],
    write_checkpoints: Callable[[Sequence[Any]], None],
    savepoint: Callable[[], AbstractContextManager[Any]],
    row_errors: tuple[type[Exception], ...],
    on_checkpoint_refused: Callable[[Any, str], None] = lambda checkpoint, reason: None,
) -> WriteResult:
    """Write a batch inside the caller's transaction, refusing bad rows; return the refusals
    and the count of rows skipped as already recorded.

    The whole batch goes first, in one savepoint: a batch without bad rows costs one
    statement more than before, nothing per row. A checkpoint whose values the database
    refuses is not advanced (it stays at the previous trade, so gap recovery starts a
    little earlier); it never fails the batch.
    """
    refused = write_isolating(rows, range(len(rows)), write_rows, savepoint, row_errors)
    if checkpoints:
        try:
            with savepoint():
                write_checkpoints(checkpoints)
        except row_errors:
            for checkpoint in checkpoints:
                try:
                    with savepoint():
                        write_checkpoints([checkpoint])
                except row_errors as exc:
                    on_checkpoint_refused(checkpoint, refusal_reason(exc))
    return refused
