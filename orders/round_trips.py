"""Several statements in one round trip to PostgreSQL, in the order they were written.

The trade path's transactions write many rows whose statements return nothing the
code needs (the journal, the intents, the outcomes, the audit). Inside
`statements_batched()` such a statement (`execute_later`) waits and travels with the
next statement of the connection, whatever issues it (this module, the ORM, a
savepoint), or with the block's end: one simple-query message holding all of them.
PostgreSQL runs the statements of one message one after another, each with its own
snapshot, exactly as if they had been sent apart, so a read after a lock in the same
message still sees everything committed before the lock was granted; only the waits
between them go. `fetch_together` sends several row-returning statements at once.

A statement that fails fails its transaction, as it would have on its own; the error
surfaces from the statement it travelled with. SQLite runs one statement per execute:
there every statement goes at once, as written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connection

Statement = tuple[str, Sequence[Any]]


class _Batch:
    def __init__(self) -> None:
        self.pending: list[tuple[str, Sequence[Any] | None]] = []

    def take(self) -> list[tuple[str, Sequence[Any] | None]]:
        pending, self.pending = self.pending, []
        return pending


_BATCH: ContextVar[_Batch | None] = ContextVar("orders_statement_batch", default=None)


def _combined(statements: Sequence[tuple[str, Sequence[Any] | None]]) -> tuple[str, list[Any]]:
    sqls: list[str] = []
    params: list[Any] = []
    for sql, values in statements:
        if values is None:
            # Sent without parameters it was never interpolated: its own % signs stay literal.
            sqls.append(sql.replace("%", "%%"))
        else:
            sqls.append(sql)
            params.extend(values)
    return "; ".join(sqls), params


def _with_pending(execute: Any, sql: Any, params: Any, many: bool, context: Mapping[str, Any]) -> Any:
    """Django execute wrapper: send the statements waiting in the batch in front of this one, in one message."""
    batch = _BATCH.get()
    if batch is None or not batch.pending:
        return execute(sql, params, many, context)
    if many or not isinstance(sql, str) or isinstance(params, Mapping):
        _flush(batch)
        return execute(sql, params, many, context)
    pending = batch.take()
    combined_sql, combined_params = _combined([*pending, (sql, params)])
    result = execute(combined_sql, combined_params, many, context)
    raw = context["cursor"].cursor
    for _ in pending:
        raw.nextset()  # the caller reads this statement's result, the last one
    return result


def _flush(batch: _Batch, *, commit: bool = False) -> None:
    pending = batch.take()
    if pending:
        if commit and _commits_next():
            # The transaction's COMMIT travels with its last writes. The server ends the
            # transaction here; the atomic block's own commit, which follows at once,
            # then finds no transaction open and sends nothing. A failure of the COMMIT
            # (a deferred constraint) raises here, inside the block, which rolls back.
            pending.append(("COMMIT", None))
        sql, params = _combined(pending)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def _commits_next() -> bool:
    """The block ends the outermost atomic block, which is about to commit (no savepoint, nothing marked for rollback)."""
    return (
        connection.in_atomic_block
        and len(connection.atomic_blocks) == 1
        and not connection.savepoint_ids
        and not connection.needs_rollback
        and not connection.closed_in_transaction
        and connection.commit_on_exit
    )


@contextmanager
def statements_batched(*, commit: bool = False) -> Iterator[None]:
    """Let `execute_later` statements of this block share round trips; everything is sent when the block ends.

    Open it inside the transaction (it must end before the commit). On an error the
    waiting statements are dropped with the transaction they belonged to.

    `commit`: the block is the last thing of a durable transaction
    (`with transaction.atomic(durable=True), statements_batched(commit=True):`), so
    its last message also carries the COMMIT: one round trip less per transaction. It
    does only when the atomic block is the outermost one and is going to commit;
    inside another (a test's transaction) the commit is left to the atomic block.
    """
    if connection.vendor != "postgresql" or _BATCH.get() is not None:
        yield
        return
    batch = _Batch()
    token = _BATCH.set(batch)
    try:
        with connection.execute_wrapper(_with_pending):
            yield
            _flush(batch, commit=commit)
    finally:
        _BATCH.reset(token)


def execute_later(sql: str, params: Sequence[Any]) -> None:
    """Run a statement whose result nobody reads: with the next round trip inside `statements_batched`, else now."""
    batch = _BATCH.get()
    if batch is not None:
        batch.pending.append((sql, list(params)))
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def fetch_together(statements: Sequence[Statement]) -> list[list[tuple[Any, ...]]]:
    """Run row-returning statements in order, in one round trip on PostgreSQL; return each one's rows."""
    if connection.vendor != "postgresql":
        results = []
        with connection.cursor() as cursor:
            for sql, params in statements:
                cursor.execute(sql, params)
                results.append(list(cursor.fetchall()))
        return results
    batch = _BATCH.get()
    pending = batch.take() if batch is not None else []
    sql, params = _combined([*pending, *statements])
    results = []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        raw = cursor.cursor
        for _ in pending:
            raw.nextset()
        for index in range(len(statements)):
            if index:
                raw.nextset()
            results.append(list(raw.fetchall()))
    return results
