"""Candles of recorded ticks, bucketed by the database: checked against bars computed by hand."""

from __future__ import annotations

import pytest
from django.db import connection

from core.fixed_point_field import max_abs_for
from feeds.market import parse_fixed
from feeds.models import Instrument, Tick
from feeds.recording.tick_bars import TickBar, tick_bars
from tests.feeds.factories import make_feed

pytestmark = pytest.mark.django_db

S = 1_000_000_000  # ns per second
BASE = 1_764_460_800 * S  # 2025-11-30T00:00:00Z, on a minute (and hour) boundary
MINUTE = 60 * S


def add_ticks(instrument: Instrument, rows: list[tuple[int, str, str, str]]) -> None:
    """(ns after BASE, price, volume, trade id) per tick."""
    Tick.objects.bulk_create(
        Tick(
            instrument=instrument,
            ts_event=BASE + offset,
            ts_recv=BASE + offset + 1,
            price=parse_fixed(price),
            volume=parse_fixed(volume),
            trade_id=trade_id,
        )
        for offset, price, volume, trade_id in rows
    )


@pytest.fixture
def instrument() -> Instrument:
    feed = make_feed("sim", ("BTCUSDT", "ETHUSDT"))
    btc = feed.instruments.get(symbol="BTCUSDT")
    eth = feed.instruments.get(symbol="ETHUSDT")
    add_ticks(
        btc,
        [
            (-1, "1.00", "7", "0"),  # before the range
            # minute 0
            (S // 2, "100.00", "1", "1"),
            (10 * S, "101.50", "2", "2"),
            (30 * S, "99.25", "0.5", "3"),
            (MINUTE - 1, "100.75", "1.5", "4"),
            # minute 1 has no trades; minute 2 opens and closes on ties of exchange time
            (2 * MINUTE, "102.00", "0.1", "5"),
            (2 * MINUTE, "98.00", "0.2", "11"),  # same time, later trade id (11 > 5 numerically)
            (2 * MINUTE + 10 * S, "104.00", "0.3", "9"),
            (2 * MINUTE + 10 * S, "103.00", "0.4", "10"),  # 10 after 9: the close
            (3 * MINUTE, "500.00", "9", "12"),  # at the end bound: excluded
        ],
    )
    add_ticks(eth, [(5 * S, "3000", "1", "1")])  # another instrument
    return btc


def bar(start_ns: int, o: str, h: str, lo: str, c: str, v: str, trades: int) -> TickBar:
    return TickBar(start_ns, parse_fixed(o), parse_fixed(h), parse_fixed(lo), parse_fixed(c), parse_fixed(v), trades)


def test_minute_bars_match_the_hand_computed_candles(instrument: Instrument) -> None:
    bars = tick_bars(instrument_id=instrument.pk, bucket_ns=MINUTE, start_ns=BASE, end_ns=BASE + 3 * MINUTE)
    assert bars == [
        bar(BASE, "100.00", "101.50", "99.25", "100.75", "5", 4),
        bar(BASE + 2 * MINUTE, "102.00", "104.00", "98.00", "103.00", "1.0", 4),
    ]


def test_five_second_bars_split_the_same_ticks(instrument: Instrument) -> None:
    bars = tick_bars(instrument_id=instrument.pk, bucket_ns=5 * S, start_ns=BASE, end_ns=BASE + 3 * MINUTE)
    assert bars == [
        bar(BASE, "100.00", "100.00", "100.00", "100.00", "1", 1),
        bar(BASE + 10 * S, "101.50", "101.50", "101.50", "101.50", "2", 1),
        bar(BASE + 30 * S, "99.25", "99.25", "99.25", "99.25", "0.5", 1),
        bar(BASE + 55 * S, "100.75", "100.75", "100.75", "100.75", "1.5", 1),
        bar(BASE + 2 * MINUTE, "102.00", "102.00", "98.00", "98.00", "0.3", 2),
        bar(BASE + 2 * MINUTE + 10 * S, "104.00", "104.00", "103.00", "103.00", "0.7", 2),
    ]


def test_an_hour_bar_holds_every_tick_of_the_range(instrument: Instrument) -> None:
    (only,) = tick_bars(instrument_id=instrument.pk, bucket_ns=3600 * S, start_ns=BASE, end_ns=BASE + 3600 * S)
    assert only == bar(BASE, "100.00", "500.00", "98.00", "500.00", "15", 9)


def test_a_range_is_start_inclusive_and_end_exclusive(instrument: Instrument) -> None:
    bars = tick_bars(instrument_id=instrument.pk, bucket_ns=MINUTE, start_ns=BASE + 10 * S, end_ns=BASE + MINUTE - 1)
    assert bars == [bar(BASE, "101.50", "101.50", "99.25", "99.25", "2.5", 2)]
    assert tick_bars(instrument_id=instrument.pk, bucket_ns=MINUTE, start_ns=BASE, end_ns=BASE) == []


def test_prices_keep_every_fixed_point_digit() -> None:
    instrument = make_feed("sim", ("BTCUSDT",)).instruments.get()
    add_ticks(instrument, [(0, "64000.123456789012", "0.000000000001", "1"), (1, "64000.123456789013", "1", "2")])
    (only,) = tick_bars(instrument_id=instrument.pk, bucket_ns=S, start_ns=BASE, end_ns=BASE + S)
    assert (only.open, only.close, only.volume) == (
        parse_fixed("64000.123456789012"),
        parse_fixed("64000.123456789013"),
        parse_fixed("1.000000000001"),
    )


def test_a_bucket_volume_beyond_the_integer_column_still_draws() -> None:
    instrument = make_feed("sim", ("BTCUSDT",)).instruments.get()
    biggest = max_abs_for(connection)
    Tick.objects.bulk_create(
        Tick(
            instrument=instrument,
            ts_event=BASE + n,
            ts_recv=BASE,
            price=parse_fixed("1"),
            volume=biggest,
            trade_id=str(n),
        )
        for n in (1, 2)
    )
    (only,) = tick_bars(instrument_id=instrument.pk, bucket_ns=S, start_ns=BASE, end_ns=BASE + S)
    if connection.vendor == "postgresql":
        assert only.volume == 2 * biggest  # numeric sums exactly
    else:
        assert only.volume == pytest.approx(2 * biggest, rel=1e-12)  # SQLite's float total()
    assert only.trades == 2


def test_a_bucket_length_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        tick_bars(instrument_id=1, bucket_ns=0, start_ns=0, end_ns=1)
