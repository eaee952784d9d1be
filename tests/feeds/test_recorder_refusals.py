"""A row the database refuses never stalls the recorder: it is refused with a reason, the rest is written."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async

from core.health import HealthBoard, Status
from feeds.market import FeedData, MarketData
from feeds.models import KnownHole, StreamCheckpoint, Tick
from feeds.recording.database_writer import pipelined_writer_for_database, writer_for_database
from feeds.recording.recorder import TickRecorder
from feeds.recording.tick_selectors import tick_addresses
from feeds.recording.tick_writer import PipelinedWriter, TickWriter
from tests.feeds.factories import make_feed, trade
from tests.helpers import async_eventually

# Beyond what any database stores: 64-bit integers on SQLite, numeric(38,0) on PostgreSQL.
BEYOND_STORAGE = 10**38


def _poisoned(trade_id: int) -> MarketData:
    return trade(trade_id, price=BEYOND_STORAGE)


WRITERS: dict[str, Callable[[], TickWriter | PipelinedWriter]] = {
    "in-process writer": writer_for_database,  # bulk_create on SQLite, COPY on PostgreSQL
    "writer process": pipelined_writer_for_database,  # COPY in feeds.recording.copy_worker on PostgreSQL
}


@pytest.fixture(
    params=[
        pytest.param("in-process writer"),
        pytest.param("writer process", marks=pytest.mark.needs_postgres),
    ]
)
def writer_factory(request: pytest.FixtureRequest) -> Callable[[], TickWriter | PipelinedWriter]:
    return WRITERS[request.param]


def _stored() -> list[str]:
    return list(Tick.objects.order_by("pk").values_list("trade_id", flat=True))


@pytest.mark.django_db(transaction=True)
async def test_a_batch_with_one_poison_row_records_the_rest_and_later_batches_too(writer_factory) -> None:  # type: ignore[no-untyped-def]
    await database_sync_to_async(make_feed)("f", ("BTCUSDT",))
    keys = await database_sync_to_async(tick_addresses)(["f"])
    health = HealthBoard()
    recorder = TickRecorder(
        await database_sync_to_async(writer_factory)(),
        keys,
        batch_size=5,
        flush_interval_s=0.01,
        retry_delay_s=0.01,
        health=health,
    )
    task = asyncio.create_task(recorder.run())
    stored = database_sync_to_async(_stored)
    try:
        recorder.offer(FeedData("f", (trade(1), trade(2), _poisoned(3), trade(4), trade(5))))
        recorder.offer(FeedData("f", tuple(trade(n) for n in range(6, 11))))

        async def everything_but_the_poison_recorded() -> bool:
            return await stored() == [str(n) for n in range(1, 11) if n != 3]

        await async_eventually(everything_but_the_poison_recorded)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await recorder.close()

    assert recorder.stats.refused == {"out_of_range": 1}
    assert recorder.stats.recorded == 9 and recorder.buffered == 0
    assert recorder.stats.write_failures == 0  # refused, not retried: nothing to stall on
    report = health.get("recorder")
    assert report is not None and report.status is Status.DEGRADED
    assert "1 ticks refused by the database (out_of_range: 1)" in report.reason
    checkpoint = await database_sync_to_async(lambda: StreamCheckpoint.objects.get().trade_id)()
    assert checkpoint == "10"
    # The refused tick is written down where it was: the recording has a known hole there.
    holes = await database_sync_to_async(
        lambda: list(KnownHole.objects.values_list("feed__name", "venue_symbol", "start_ns", "end_ns", "reason"))
    )()
    poisoned_at = _poisoned(3).ts_event
    assert holes == [("f", "BTCUSDT", poisoned_at, poisoned_at, "tick refused by the database (out_of_range)")]


@pytest.mark.django_db(transaction=True)
async def test_a_poison_row_that_is_the_last_of_its_symbol_leaves_the_checkpoint_behind(writer_factory) -> None:  # type: ignore[no-untyped-def]
    await database_sync_to_async(make_feed)("f", ("BTCUSDT",))
    keys = await database_sync_to_async(tick_addresses)(["f"])
    recorder = TickRecorder(await database_sync_to_async(writer_factory)(), keys, batch_size=3)
    recorder.offer(FeedData("f", (trade(1), trade(2))))
    await recorder.close()
    recorder = TickRecorder(await database_sync_to_async(writer_factory)(), keys, batch_size=3)
    recorder.offer(FeedData("f", (trade(3), _poisoned(4))))
    await recorder.close()

    assert await database_sync_to_async(_stored)() == ["1", "2", "3"]
    assert recorder.stats.refused == {"out_of_range": 1}
    # The checkpoint never holds a value the database refuses: it stays at the batch before.
    checkpoint = await database_sync_to_async(lambda: StreamCheckpoint.objects.get().trade_id)()
    assert checkpoint == "2"
