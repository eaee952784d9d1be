"""The minute candle rollup: kept by the tick writers' own statements, equal to the raw tick aggregation.

Ticks go through the recorder's production writer (COPY on PostgreSQL, bulk_create on
SQLite) in shuffled batches, so minutes fill out of order, with repeated trade ids
(skipped, never counted) and ties of exchange time; the candles' bars must then be the
bars the raw ticks give for every whole-minute timeframe and for an `end` inside a minute.
"""

from __future__ import annotations

import random
from io import StringIO

import pytest
from django.core.management import call_command

from feeds.market import parse_fixed
from feeds.models import Instrument, MinuteCandle, Tick
from feeds.recording.chart_bars import chart_bars
from feeds.recording.database_writer import writer_for_database
from feeds.recording.minute_candles import NS_PER_MINUTE, recompute_minutes
from feeds.recording.tick_bars import tick_bars
from feeds.recording.tick_rows import TickRow
from tests.feeds.factories import make_feed

pytestmark = pytest.mark.django_db

S = 1_000_000_000
BASE = 1_764_460_800 * S  # 2025-11-30T00:00:00Z, on an hour boundary
SPAN_MINUTES = 130  # crosses two hour bars and many 5 / 15 minute bars


def _tape(instrument_id: int, rng: random.Random) -> list[TickRow]:
    rows: list[TickRow] = []
    for trade_id in range(1, 601):
        offset = rng.randrange(SPAN_MINUTES * 60) * S
        if rng.random() < 0.2 and rows:
            offset = rows[-1][1] - BASE  # a tie of exchange time with the previous trade
        if rng.random() < 0.05:
            offset = rng.randrange(3) * NS_PER_MINUTE  # on a minute boundary
        price = parse_fixed(f"{rng.randrange(9_000, 11_000)}.{rng.randrange(100):02d}")
        volume = parse_fixed(f"0.{rng.randrange(1, 10**6):06d}")
        # Every tenth trade carries no id (some venues give none): not unique, ties by insertion.
        tid = "" if trade_id % 10 == 0 else str(trade_id)
        rows.append((instrument_id, BASE + offset, BASE + offset + 1, price, volume, None, tid, "buy"))
    return rows


def _record(rows: list[TickRow], rng: random.Random) -> None:
    """Write `rows` in shuffled batches through the recorder's writer, repeating some recorded trades."""
    rows = rows[:]
    rng.shuffle(rows)
    writer = writer_for_database()
    written: list[TickRow] = []
    while rows:
        size = rng.randrange(1, 120)
        batch, rows = rows[:size], rows[size:]
        # A takeover's overlap: trades recorded already, with another price and volume, must be skipped.
        repeats = [
            (r[0], r[1], r[2], r[3] + 1, r[4] * 7, r[5], r[6], r[7])
            for r in rng.sample(written, min(len(written), rng.randrange(4)))
            if r[6]
        ]
        refused = writer.write([*batch, *repeats], [])
        assert not refused
        written.extend(batch)


@pytest.fixture
def recorded() -> list[Instrument]:
    feed = make_feed("sim", ("BTCUSDT", "ETHUSDT"))
    instruments = list(feed.instruments.order_by("pk"))
    rng = random.Random(7)
    tapes = [row for instrument in instruments for row in _tape(instrument.pk, rng)]
    _record(tapes, rng)
    return instruments


@pytest.mark.parametrize("timeframe_s", [60, 300, 900, 3600])
@pytest.mark.parametrize("end_offset_ns", [SPAN_MINUTES * NS_PER_MINUTE, 47 * NS_PER_MINUTE + 17 * S + 3, 2 * S])
def test_candle_bars_equal_the_raw_tick_aggregation(
    recorded: list[Instrument], timeframe_s: int, end_offset_ns: int
) -> None:
    bucket_ns = timeframe_s * S
    for instrument in recorded:
        for start_ns in (BASE, BASE + bucket_ns):
            args = {
                "instrument_id": instrument.pk,
                "bucket_ns": bucket_ns,
                "start_ns": start_ns,
                "end_ns": BASE + end_offset_ns,
            }
            assert chart_bars(**args) == tick_bars(**args)


def test_repeated_trades_are_counted_once(recorded: list[Instrument]) -> None:
    for instrument in recorded:
        ticks = Tick.objects.filter(instrument=instrument).count()
        candles = MinuteCandle.objects.filter(instrument=instrument)
        assert sum(candles.values_list("trades", flat=True)) == ticks
        assert ticks == 600  # every repeat skipped


def _candles(instrument: Instrument) -> list[tuple[object, ...]]:
    return list(
        MinuteCandle.objects.filter(instrument=instrument)
        .order_by("minute")
        .values_list("minute", "open", "high", "low", "close", "volume", "trades", "open_tick_id", "close_tick_id")
    )


def test_a_recompute_from_the_ticks_gives_the_live_candles(recorded: list[Instrument]) -> None:
    instrument = recorded[0]
    live = _candles(instrument)
    rebuilt = recompute_minutes(instrument_id=instrument.pk, start_ns=BASE, end_ns=BASE + SPAN_MINUTES * NS_PER_MINUTE)
    assert rebuilt == len(live)
    assert _candles(instrument) == live


def test_a_deleted_tick_has_its_minute_recomputed(recorded: list[Instrument]) -> None:
    instrument = recorded[0]
    first = Tick.objects.filter(instrument=instrument).order_by("ts_event", "id").first()
    assert first is not None
    Tick.objects.filter(pk=first.pk).delete()
    args = {"instrument_id": instrument.pk, "bucket_ns": NS_PER_MINUTE, "start_ns": BASE, "end_ns": BASE + 3 * 3600 * S}
    assert chart_bars(**args) == tick_bars(**args)
    Tick.objects.filter(instrument=instrument, ts_event__lt=BASE + 10 * NS_PER_MINUTE).delete()
    assert not MinuteCandle.objects.filter(instrument=instrument, minute__lt=BASE // NS_PER_MINUTE + 10).exists()
    assert chart_bars(**args) == tick_bars(**args)


def test_sub_minute_bars_read_the_ticks(recorded: list[Instrument]) -> None:
    args = {"instrument_id": recorded[1].pk, "bucket_ns": 5 * S, "start_ns": BASE, "end_ns": BASE + 600 * S}
    assert chart_bars(**args) == tick_bars(**args)


def test_the_backfill_command_rebuilds_lost_candles(recorded: list[Instrument]) -> None:
    live = [_candles(instrument) for instrument in recorded]
    MinuteCandle.objects.all().delete()
    out = StringIO()
    call_command("backfill_candles", stdout=out)
    assert [_candles(instrument) for instrument in recorded] == live
    assert "BTCUSDT" in out.getvalue()
