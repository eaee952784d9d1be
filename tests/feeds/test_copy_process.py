"""The recorder's writer process on PostgreSQL: pipelined, ordered, refuses after a failure, survives its worker dying."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from feeds.models import StreamCheckpoint, Tick
from feeds.recording.copy_process import CopyProcessWriter, WriterProcessError
from feeds.recording.copy_worker import APPLICATION_NAME
from feeds.recording.database_writer import pipelined_writer_for_database
from feeds.recording.tick_selectors import tick_addresses
from feeds.recording.tick_writer import CheckpointRow, TickRow, WriteSkipped
from tests.feeds.factories import make_feed
from tests.helpers import async_eventually

pytestmark = [pytest.mark.needs_postgres, pytest.mark.django_db(transaction=True)]


def _setup() -> tuple[int, int]:
    feed = make_feed("f", ("BTCUSDT",))
    key = tick_addresses(["f"])[("f", "BTCUSDT")]
    return key.instrument_id, feed.pk


def _row(instrument_id: int, trade_id: int) -> TickRow:
    ts = 1_764_460_800_000_000_000 + trade_id
    return (instrument_id, ts, ts + 5, 6_400_012_345_678, 1_234, None, str(trade_id), "buy")


def _checkpoint(feed_id: int, trade_id: int) -> CheckpointRow:
    return CheckpointRow(
        feed_id, "BTCUSDT", str(trade_id), 1_764_460_800_000_000_000 + trade_id, 6_400_012_345_678, 1_234, "buy"
    )


@database_sync_to_async
def _stored() -> tuple[list[str], list[str]]:
    ticks = list(Tick.objects.order_by("pk").values_list("trade_id", flat=True))
    checkpoints = list(StreamCheckpoint.objects.values_list("trade_id", flat=True))
    return ticks, checkpoints


async def _writer() -> CopyProcessWriter:
    writer = await database_sync_to_async(pipelined_writer_for_database)()
    assert isinstance(writer, CopyProcessWriter)
    return writer


async def test_batches_are_pipelined_and_committed_in_order_with_their_checkpoint() -> None:
    instrument, feed = await database_sync_to_async(_setup)()
    writer = await _writer()
    try:
        futures = [writer.submit([_row(instrument, n)], [_checkpoint(feed, n)]) for n in range(1, 21)]
        await asyncio.gather(*futures)
    finally:
        await writer.close()
    assert await _stored() == ([str(n) for n in range(1, 21)], ["20"])
    assert writer.starts == 1


@database_sync_to_async
def _cut_the_worker_connection() -> int:
    """Terminate the worker's database session, as a database restart would."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = %s",
            [APPLICATION_NAME],
        )
        return len(cursor.fetchall())


async def test_after_a_failed_batch_later_ones_are_refused_unwritten_until_reset() -> None:
    instrument, feed = await database_sync_to_async(_setup)()
    writer = await _writer()
    try:
        await writer.submit([_row(instrument, 1)], [_checkpoint(feed, 1)])
        assert await _cut_the_worker_connection() == 1
        lost = writer.submit([_row(instrument, 2)], [_checkpoint(feed, 2)])
        later = writer.submit([_row(instrument, 3)], [_checkpoint(feed, 3)])
        with pytest.raises(WriterProcessError, match=r"OperationalError|AdminShutdown"):
            await lost
        with pytest.raises(WriteSkipped):
            await later
        assert await _stored() == (["1"], ["1"])
        writer.reset()
        await writer.submit([_row(instrument, 2), _row(instrument, 3)], [_checkpoint(feed, 3)])
    finally:
        await writer.close()
    assert await _stored() == (["1", "2", "3"], ["3"])


async def test_a_row_the_database_refuses_is_reported_and_the_rest_of_its_batch_written() -> None:
    instrument, feed = await database_sync_to_async(_setup)()
    writer = await _writer()
    poison_rows = {
        1: (instrument, 1_764_460_800_000_000_001, 5, 10**38, 1_234, None, "1", "buy"),  # beyond numeric(38,0)
        3: _row(instrument + 999, 3),  # no such instrument
        5: (instrument, 1_764_460_800_000_000_005, 5, 1, 1, None, "5\x00", "buy"),  # NUL in text
    }
    rows = [poison_rows.get(n, _row(instrument, n)) for n in range(7)]
    try:
        refused = await writer.submit(rows, [_checkpoint(feed, 6)])
        after = await writer.submit([_row(instrument, 7)], [_checkpoint(feed, 7)])
    finally:
        await writer.close()
    assert refused == [
        (1, "out_of_range"),
        (3, "database:ForeignKeyViolation"),
        (5, "database:CharacterNotInRepertoire"),
    ]
    assert after == []
    assert await _stored() == (["0", "2", "4", "6", "7"], ["7"])


async def test_a_killed_worker_fails_what_it_held_and_the_next_batch_starts_another() -> None:
    instrument, feed = await database_sync_to_async(_setup)()
    writer = await _writer()
    try:
        await writer.submit([_row(instrument, 1)], [_checkpoint(feed, 1)])
        process = writer._process
        assert process is not None
        process.kill()
        await process.wait()

        async def idle() -> bool:
            return writer._io is None or writer._io.done()

        # Sent before the death is noticed, the batch fails (and the recorder would
        # resubmit it); sent after, it goes to a new worker.
        try:
            await writer.submit([_row(instrument, 2)], [_checkpoint(feed, 2)])
        except WriterProcessError:
            await async_eventually(idle)
            await writer.submit([_row(instrument, 2)], [_checkpoint(feed, 2)])
    finally:
        await writer.close()
    assert await _stored() == (["1", "2"], ["2"])
    assert writer.starts == 2
