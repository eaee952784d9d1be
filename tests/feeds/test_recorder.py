"""The tick recorder: every MarketData persisted exactly, in batches, with its checkpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from channels.db import database_sync_to_async

from core.health import HealthBoard, Status
from feeds.distribution.fanout import FeedFanout, drain
from feeds.market import FeedData, Side
from feeds.models import StreamCheckpoint, Tick
from feeds.recording.database_writer import pipelined_writer_for_database, writer_for_database
from feeds.recording.recorder import TickRecorder
from feeds.recording.tick_address import TickAddress
from feeds.recording.tick_selectors import tick_addresses
from feeds.recording.tick_writer import BulkInsertWriter, CheckpointRow, PostgresCopyWriter, TickRow
from tests.feeds.factories import make_feed, trade
from tests.helpers import async_eventually


class ListWriter:
    """Records what it was asked to write; can be told to fail."""

    def __init__(self) -> None:
        self.rows: list[TickRow] = []
        self.checkpoints: list[CheckpointRow] = []
        self.fail = False
        self.calls = 0

    def write(self, rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> None:
        self.calls += 1
        if self.fail:
            raise OSError("database is down")
        self.rows.extend(rows)
        self.checkpoints.extend(checkpoints)


async def _direct(write, rows, checkpoints) -> None:  # type: ignore[no-untyped-def]
    write(rows, checkpoints)


KEYS = {("f", "BTCUSDT"): TickAddress(11, 1), ("f", "ETHUSDT"): TickAddress(12, 1)}


async def test_batch_is_written_when_it_reaches_batch_size() -> None:
    writer = ListWriter()
    recorder = TickRecorder(writer, KEYS, batch_size=3, flush_interval_s=60, run_sync=_direct)
    task = asyncio.create_task(recorder.run())
    try:
        recorder.offer(FeedData("f", (trade(1), trade(2))))
        await asyncio.sleep(0)
        assert writer.rows == []
        recorder.offer(FeedData("f", (trade(3),)))
        await async_eventually(lambda: _async(len(writer.rows) == 3))
    finally:
        task.cancel()
    assert [row[6] for row in writer.rows] == ["1", "2", "3"]
    assert recorder.stats.recorded == 3 and recorder.buffered == 0


async def test_partial_batch_is_written_after_the_flush_interval() -> None:
    writer = ListWriter()
    recorder = TickRecorder(writer, KEYS, batch_size=1000, flush_interval_s=0.01, run_sync=_direct)
    task = asyncio.create_task(recorder.run())
    try:
        recorder.offer(FeedData("f", (trade(1),)))
        await async_eventually(lambda: _async(len(writer.rows) == 1))
    finally:
        task.cancel()


async def test_close_writes_everything_still_buffered() -> None:
    writer = ListWriter()
    recorder = TickRecorder(writer, KEYS, batch_size=1000, flush_interval_s=60, run_sync=_direct)
    recorder.offer(FeedData("f", tuple(trade(i) for i in range(1, 11))))
    await recorder.close()
    assert len(writer.rows) == 10 and recorder.buffered == 0


async def test_full_buffer_drops_whole_batches_counts_them_and_reports_degraded() -> None:
    health = HealthBoard()
    writer = ListWriter()
    recorder = TickRecorder(
        writer, KEYS, batch_size=2, capacity=4, flush_interval_s=60, health=health, run_sync=_direct
    )
    recorder.offer(FeedData("f", (trade(1), trade(2), trade(3))))
    recorder.offer(FeedData("f", (trade(4), trade(5))))  # 3 + 2 > 4: dropped
    assert recorder.stats.overflow == 2
    assert health.get("recorder").status is Status.DEGRADED  # type: ignore[union-attr]
    await recorder.close()
    assert [row[6] for row in writer.rows] == ["1", "2", "3"]


async def test_failed_write_keeps_rows_and_retries_in_order() -> None:
    health = HealthBoard()
    writer = ListWriter()
    writer.fail = True
    recorder = TickRecorder(writer, KEYS, batch_size=1, flush_interval_s=60, health=health, run_sync=_direct)
    recorder.offer(FeedData("f", (trade(1),)))
    recorder.offer(FeedData("f", (trade(2),)))
    assert await recorder.flush() is False
    assert health.get("recorder").status is Status.DEGRADED  # type: ignore[union-attr]
    writer.fail = False
    assert await recorder.flush() is True
    assert [row[6] for row in writer.rows] == ["1", "2"]
    assert health.get("recorder").status is Status.HEALTHY  # type: ignore[union-attr]
    assert recorder.stats.write_failures == 1


async def test_ticks_of_unknown_symbols_are_counted_not_written() -> None:
    writer = ListWriter()
    recorder = TickRecorder(writer, KEYS, batch_size=10, run_sync=_direct)
    recorder.offer(FeedData("f", (trade(1, symbol="DOGEUSDT"), trade(2))))
    await recorder.close()
    assert recorder.stats.unknown_symbol == 1 and len(writer.rows) == 1


async def test_checkpoint_per_symbol_is_the_last_tick_of_the_batch() -> None:
    writer = ListWriter()
    recorder = TickRecorder(writer, KEYS, batch_size=10, run_sync=_direct)
    recorder.offer(FeedData("f", (trade(1), trade(7, symbol="ETHUSDT"), trade(2), trade(8, symbol="ETHUSDT"))))
    await recorder.close()
    assert {(c.venue_symbol, c.trade_id) for c in writer.checkpoints} == {("BTCUSDT", "2"), ("ETHUSDT", "8")}


async def _async(value: bool) -> bool:
    return value


def _record_through_database(writer_factory) -> None:  # type: ignore[no-untyped-def]
    feed = make_feed("f", ("BTCUSDT", "ETHUSDT"))
    keys = tick_addresses(["f"])
    events = (
        trade(1, price=6_400_012_345_678, volume=1, side=Side.SELL),
        trade(2, price=1, volume=99_999_999_999, side=None, duration_ns=1_000_000),
        trade(3, symbol="ETHUSDT", price=340_000_000_000, volume=10**17, side=Side.BUY),
    )

    async def go() -> None:
        recorder = TickRecorder(writer_factory(), keys, batch_size=2)
        recorder.offer(FeedData("f", events))
        await recorder.close()

    asyncio.run(go())
    stored = list(
        Tick.objects.order_by("pk").values_list(
            "instrument__venue_symbol",
            "ts_event",
            "ts_recv",
            "price",
            "volume",
            "duration_since_last_ns",
            "trade_id",
            "side",
        )
    )
    assert stored == [
        (
            e.symbol,
            e.ts_event,
            e.ts_recv,
            e.price,
            e.volume,
            e.duration_since_last_ns,
            e.trade_id,
            e.side.value if e.side else "",
        )
        for e in events
    ]
    checkpoints = {c.venue_symbol: c.trade_id for c in StreamCheckpoint.objects.filter(feed=feed)}
    assert checkpoints == {"BTCUSDT": "2", "ETHUSDT": "3"}


@pytest.mark.django_db(transaction=True)
def test_bulk_insert_writer_stores_exact_integers() -> None:
    _record_through_database(BulkInsertWriter)


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_copy_writer_stores_exact_integers() -> None:
    _record_through_database(PostgresCopyWriter)
    assert isinstance(writer_for_database(), PostgresCopyWriter)


@pytest.mark.django_db(transaction=True)
async def test_recorder_as_fanout_consumer_records_every_published_tick() -> None:
    await database_sync_to_async(make_feed)("f", ("BTCUSDT",))
    keys = await database_sync_to_async(tick_addresses)(["f"])
    recorder = TickRecorder(
        await database_sync_to_async(writer_for_database)(), keys, batch_size=50, flush_interval_s=0.01
    )
    fanout = FeedFanout()
    queue = fanout.subscribe("recorder")
    tasks = [asyncio.create_task(drain("recorder", queue, recorder.consume)), asyncio.create_task(recorder.run())]
    try:
        for start in range(1, 1001, 10):
            fanout.publish(FeedData("f", tuple(trade(i) for i in range(start, start + 10))))
        count = database_sync_to_async(Tick.objects.count)

        async def all_written() -> bool:
            return await count() == 1000

        await async_eventually(all_written)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    ids = await database_sync_to_async(lambda: list(Tick.objects.order_by("pk").values_list("trade_id", flat=True)))()
    assert ids == [str(i) for i in range(1, 1001)]


async def test_events_that_are_not_trades_are_not_recorded() -> None:
    from feeds.market import MarkPrice

    writer = ListWriter()
    recorder = TickRecorder(writer, KEYS, batch_size=10, run_sync=_direct)
    mark = MarkPrice(symbol="BTCUSDT", mark_price=10**8, ts_event=1, ts_recv=2)
    recorder.offer(FeedData("f", (mark, trade(1))))
    await recorder.close()
    assert [row[6] for row in writer.rows] == ["1"] and recorder.stats.unknown_symbol == 0


async def test_a_failed_batch_stops_the_later_ones_and_all_are_retried_in_order() -> None:
    writer = ListWriter()
    failures = iter([False, True])  # the second write fails once

    def write(rows: Sequence[TickRow], checkpoints: Sequence[CheckpointRow]) -> None:
        writer.fail = next(failures, False)
        ListWriter.write(writer, rows, checkpoints)

    writer.write = write  # type: ignore[method-assign]
    recorder = TickRecorder(writer, KEYS, batch_size=1, flush_interval_s=60, run_sync=_direct)
    for trade_id in (1, 2, 3):
        recorder.offer(FeedData("f", (trade(trade_id),)))
    assert await recorder.flush() is False
    # The third batch was submitted with the others but refused unwritten: its
    # checkpoint must not pass the missing second batch.
    assert [row[6] for row in writer.rows] == ["1"]
    assert [c.trade_id for c in writer.checkpoints] == ["1"]
    assert recorder.buffered == 2
    assert await recorder.flush() is True
    assert [row[6] for row in writer.rows] == ["1", "2", "3"]
    assert recorder.stats.recorded == 3 and recorder.stats.write_failures == 1


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_copy_process_writer_stores_exact_integers() -> None:
    from feeds.recording.copy_process import CopyProcessWriter

    _record_through_database(pipelined_writer_for_database)
    assert isinstance(pipelined_writer_for_database(), CopyProcessWriter)
