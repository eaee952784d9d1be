"""Fixed-point columns hold every value exactly: 12 places, the documented range on
PostgreSQL (numeric(38,0)), int64 on SQLite with anything wider refused cleanly; the
tick recorder's writers store them; the scale migration rescales existing rows exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Sum

from core.fixed_point import FIXED_MAX_ABS, SCALE, SQLITE_FIXED_MAX_ABS
from core.fixed_point_field import FixedPointRangeError, max_abs_for
from core.fixed_point_rescale import RescaleRefused
from feeds.market import FeedData, Side, parse_fixed
from feeds.models import StreamCheckpoint, Tick
from feeds.recording.database_writer import pipelined_writer_for_database
from feeds.recording.recorder import TickRecorder
from feeds.recording.tick_selectors import tick_addresses
from feeds.recording.tick_writer import BulkInsertWriter, PostgresCopyWriter
from tests.feeds.factories import make_feed, trade

pytestmark = pytest.mark.django_db(transaction=True)

TINY = parse_fixed("0.000000000012")
BTC_JPY = parse_fixed("15000000.123456789012")  # beyond int64 at 12 places


def _tick(instrument: Any, n: int, price: int, volume: int) -> Tick:
    return Tick.objects.create(
        instrument=instrument, ts_event=n, ts_recv=n, price=price, volume=volume, trade_id=str(n)
    )


def test_twelve_places_round_trip_and_sum_exactly() -> None:
    instrument = make_feed("f", ("PEPEUSDT",)).instruments.get()
    for n in range(1, 4):
        _tick(instrument, n, TINY, parse_fixed("1234567.000000000001"))
    assert list(Tick.objects.order_by("pk").values_list("price", flat=True)) == [TINY] * 3
    totals = Tick.objects.aggregate(price=Sum("price"), volume=Sum("volume"))
    assert totals == {"price": 3 * TINY, "volume": parse_fixed("3703701.000000000003")}
    assert Tick.objects.filter(price__lt=parse_fixed("0.000000000013")).count() == 3


def test_a_value_the_database_cannot_hold_is_refused_before_it_is_written() -> None:
    instrument = make_feed("f", ("BTC_JPY",)).instruments.get()
    limit = max_abs_for(connection)
    with pytest.raises(FixedPointRangeError, match="outside the range"):
        _tick(instrument, 1, limit + 1, SCALE)
    with pytest.raises(FixedPointRangeError):
        Tick.objects.bulk_create([Tick(instrument=instrument, ts_event=2, ts_recv=2, price=SCALE, volume=-limit - 1)])
    assert not Tick.objects.exists()
    _tick(instrument, 3, limit, -limit)  # the edge itself is inside
    assert Tick.objects.values_list("price", "volume").get() == (limit, -limit)


def test_the_sqlite_range_is_int64_and_postgresql_holds_the_documented_range() -> None:
    expected = FIXED_MAX_ABS if connection.vendor == "postgresql" else SQLITE_FIXED_MAX_ABS
    assert max_abs_for(connection) == expected


@pytest.mark.needs_postgres
def test_postgresql_stores_sums_and_filters_values_beyond_int64_exactly() -> None:
    instrument = make_feed("f", ("BTC_JPY",)).instruments.get()
    _tick(instrument, 1, BTC_JPY, FIXED_MAX_ABS)
    _tick(instrument, 2, BTC_JPY + 1, FIXED_MAX_ABS)
    assert list(Tick.objects.order_by("pk").values_list("price", "volume")) == [
        (BTC_JPY, FIXED_MAX_ABS),
        (BTC_JPY + 1, FIXED_MAX_ABS),
    ]
    assert (
        Tick.objects.aggregate(v=Sum("volume"))["v"] == 2 * FIXED_MAX_ABS
    )  # past numeric(38,0)'s column width is fine in SUM
    assert Tick.objects.filter(price__gt=BTC_JPY).get().ts_event == 2
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT data_type, numeric_precision, numeric_scale FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = 'price'",
            [Tick._meta.db_table],
        )
        assert cursor.fetchone() == ("numeric", 38, 0)


def _record(writer_factory: Callable[[], Any], events: tuple[Any, ...]) -> list[tuple[int, int]]:
    make_feed("f", ("BTCUSDT",))
    keys = tick_addresses(["f"])

    async def go() -> None:
        recorder = TickRecorder(writer_factory(), keys, batch_size=2)
        recorder.offer(FeedData("f", events))
        await recorder.close()

    asyncio.run(go())
    return list(Tick.objects.order_by("pk").values_list("price", "volume"))


def _events(*pairs: tuple[int, int]) -> tuple[Any, ...]:
    return tuple(trade(n, price=price, volume=volume, side=Side.BUY) for n, (price, volume) in enumerate(pairs, 1))


def test_the_sqlite_writer_records_twelve_places() -> None:
    events = _events((TINY, parse_fixed("9000000.000000000001")), (parse_fixed("64000.000000000001"), 1))
    assert _record(BulkInsertWriter, events) == [(e.price, e.volume) for e in events]
    assert StreamCheckpoint.objects.get().price == parse_fixed("64000.000000000001")


@pytest.mark.needs_postgres
@pytest.mark.parametrize("writer", ["copy", "copy-process"])
def test_the_postgresql_writers_record_twelve_places_and_values_beyond_int64(writer: str) -> None:
    from feeds.recording.copy_process import CopyProcessWriter

    factory = PostgresCopyWriter if writer == "copy" else pipelined_writer_for_database
    assert writer == "copy" or isinstance(pipelined_writer_for_database(), CopyProcessWriter)
    events = _events((TINY, parse_fixed("1000000000")), (BTC_JPY, FIXED_MAX_ABS), (FIXED_MAX_ABS, 1))
    assert _record(factory, events) == [(e.price, e.volume) for e in events]
    assert StreamCheckpoint.objects.get().price == FIXED_MAX_ABS


# --- the migration from 8 to 12 places ------------------------------------------------

SCALE_MIGRATION = "numbers_fixed_point_12"


def _scale_migrations() -> list[tuple[str, str]]:
    graph = MigrationExecutor(connection).loader.graph
    return sorted(key for key in graph.nodes if key[1].endswith(SCALE_MIGRATION))


def _before_scale_migrations() -> list[tuple[str, str]]:
    """Each app's migration just before the one that moved it to 12 places."""
    graph = MigrationExecutor(connection).loader.graph
    return [
        next(parent for parent in graph.node_map[key].parents if parent.key[0] == key[0]).key
        for key in _scale_migrations()
    ]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _latest() -> list[tuple[str, str]]:
    return list(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.fixture
def old_scale_apps() -> Any:
    """The schema as it was at 8 places; the latest schema is restored afterwards."""
    assert {app for app, _ in _scale_migrations()} == {"feeds", "processor", "orders"}
    apps = _migrate(_before_scale_migrations())
    yield apps
    _migrate(_latest())


def test_the_migration_multiplies_stored_values_by_10_000_exactly(old_scale_apps: Any) -> None:
    apps = old_scale_apps
    Feed, Instrument, OldTick = (apps.get_model("feeds", name) for name in ("Feed", "Instrument", "Tick"))
    feed = Feed.objects.create(name="old", venue="simulated", market_type="simulated")
    instrument = Instrument.objects.create(
        feed=feed, symbol="BTC", venue_symbol="BTC", tick_size="0.1", lot_size="0.001"
    )
    # At 8 places: 64000.12345678 and 0.00000001, and the largest an int64 holds after x 10**4.
    OldTick.objects.create(instrument=instrument, ts_event=1, ts_recv=1, price=6_400_012_345_678, volume=1)
    OldTick.objects.create(instrument=instrument, ts_event=2, ts_recv=2, price=SQLITE_FIXED_MAX_ABS // 10**4, volume=-3)
    User = apps.get_model("auth", "User")
    Account, Ledger, Entry = (apps.get_model("orders", name) for name in ("Account", "CapitalLedger", "LedgerEntry"))
    account = Account.objects.create(owner=User.objects.create(username="u"), name="a", allocated_capital="1000.5")
    Ledger.objects.create(
        account=account,
        allocated_capital=100_050_000_000,
        reserved_for_orders=7,
        reserved_for_positions=5,
        realized_pnl=-3,
    )
    Entry.objects.create(account=account, kind="allocate", delta_allocated=100_050_000_000)

    _migrate(_latest())

    assert list(Tick.objects.order_by("ts_event").values_list("price", "volume")) == [
        (parse_fixed("64000.12345678"), parse_fixed("0.00000001")),
        (SQLITE_FIXED_MAX_ABS // 10**4 * 10**4, -parse_fixed("0.00000003")),
    ]
    from orders.models import CapitalLedger, LedgerEntry

    ledger = CapitalLedger.objects.get()
    assert (
        ledger.allocated_capital,
        ledger.reserved_for_orders,
        ledger.reserved_for_positions,
        ledger.realized_pnl,
    ) == (
        parse_fixed("1000.5"),
        parse_fixed("0.00000007"),
        parse_fixed("0.00000005"),
        -parse_fixed("0.00000003"),
    )
    assert LedgerEntry.objects.get().delta_allocated == parse_fixed("1000.5")


@pytest.mark.skipif("connection.vendor == 'postgresql'")
def test_on_sqlite_the_migration_refuses_a_value_that_would_overflow_and_changes_nothing(old_scale_apps: Any) -> None:
    apps = old_scale_apps
    Feed, Instrument, OldTick = (apps.get_model("feeds", name) for name in ("Feed", "Instrument", "Tick"))
    feed = Feed.objects.create(name="old", venue="simulated", market_type="simulated")
    instrument = Instrument.objects.create(
        feed=feed, symbol="BTC", venue_symbol="BTC", tick_size="0.1", lot_size="0.001"
    )
    too_wide = SQLITE_FIXED_MAX_ABS // 10**4 + 1  # 922,337,203,685,478 at 8 places: fine then, not at 12
    OldTick.objects.create(instrument=instrument, ts_event=1, ts_recv=1, price=too_wide, volume=1)
    OldTick.objects.create(instrument=instrument, ts_event=2, ts_recv=2, price=5, volume=1)
    [feeds_scale] = [key for key in _scale_migrations() if key[0] == "feeds"]
    with pytest.raises(RescaleRefused, match="1 row"):
        _migrate([feeds_scale])
    assert sorted(OldTick.objects.values_list("price", flat=True)) == [5, too_wide]
    OldTick.objects.filter(price=too_wide).delete()
