"""Recorded ticks are unique per (instrument, trade id): a repeat is skipped and counted.

Two processes overlap for a moment when a standby takes a feed over, and a recovered
gap may repeat trades already recorded; the writer must neither fail nor double them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from django.db import IntegrityError, transaction

from feeds.market import FeedData, MarketData
from feeds.metrics import RECORDER_DUPLICATES
from feeds.models import StreamCheckpoint, Tick
from feeds.recording.database_writer import pipelined_writer_for_database
from feeds.recording.recorder import TickRecorder
from feeds.recording.tick_selectors import tick_addresses
from feeds.recording.tick_writer import BulkInsertWriter, PipelinedWriter, PostgresCopyWriter, TickWriter
from tests.feeds.factories import make_feed, trade

pytestmark = pytest.mark.django_db(transaction=True)


def _record_twice(writer_factory: Callable[[], TickWriter | PipelinedWriter]) -> tuple[TickRecorder, TickRecorder]:
    """Record trades 1..6, then 4..9 (an overlap of three) and two trades without ids twice."""
    feed = make_feed("f", ("BTCUSDT", "ETHUSDT"))
    keys = tick_addresses(["f"])
    no_id = MarketData("ETHUSDT", 10**12, 10**12, 1_764_460_800_000_000_000, 1_764_460_800_000_000_001)

    def run(events: list[MarketData]) -> TickRecorder:
        async def go() -> TickRecorder:
            recorder = TickRecorder(writer_factory(), keys, batch_size=4)
            recorder.offer(FeedData("f", tuple(events)))
            await recorder.close()
            return recorder

        return asyncio.run(go())

    first = run([trade(i) for i in range(1, 7)] + [no_id])
    second = run([trade(i) for i in range(4, 10)] + [no_id, trade(2, symbol="ETHUSDT")])
    btc = list(
        Tick.objects.filter(instrument__venue_symbol="BTCUSDT").order_by("pk").values_list("trade_id", flat=True)
    )
    assert btc == [str(i) for i in range(1, 10)]  # each trade once, in order
    eth = list(Tick.objects.filter(instrument__venue_symbol="ETHUSDT").values_list("trade_id", flat=True))
    assert sorted(eth) == ["", "", "2"]  # trades without an id are not constrained
    assert StreamCheckpoint.objects.get(feed=feed, venue_symbol="BTCUSDT").trade_id == "9"
    return first, second


def test_bulk_insert_writer_skips_and_counts_ticks_already_recorded() -> None:
    before = RECORDER_DUPLICATES._value.get()
    first, second = _record_twice(BulkInsertWriter)
    assert (first.stats.recorded, first.stats.duplicates) == (7, 0)
    assert (second.stats.recorded, second.stats.duplicates) == (5, 3)
    assert RECORDER_DUPLICATES._value.get() - before == 3


@pytest.mark.needs_postgres
def test_postgres_copy_writer_skips_and_counts_ticks_already_recorded() -> None:
    first, second = _record_twice(PostgresCopyWriter)
    assert (second.stats.recorded, second.stats.duplicates, second.stats.write_failures) == (5, 3, 0)


@pytest.mark.needs_postgres
def test_the_copy_writer_process_skips_and_counts_ticks_already_recorded() -> None:
    first, second = _record_twice(pipelined_writer_for_database)
    assert (second.stats.recorded, second.stats.duplicates, second.stats.write_failures) == (5, 3, 0)


def test_the_database_refuses_a_second_tick_with_the_same_trade_id() -> None:
    """The constraint itself, not only the writers' care: a plain insert of a repeat fails."""
    make_feed("f", ("BTCUSDT",))
    instrument_id = tick_addresses(["f"])[("f", "BTCUSDT")].instrument_id
    row = {"instrument_id": instrument_id, "ts_event": 1, "ts_recv": 1, "price": 1, "volume": 1, "side": ""}
    Tick.objects.create(**row, trade_id="7")
    Tick.objects.create(**row, trade_id="")
    Tick.objects.create(**row, trade_id="")
    with pytest.raises(IntegrityError), transaction.atomic():
        Tick.objects.create(**row, trade_id="7")
