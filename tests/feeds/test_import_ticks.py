"""Importing Binance's aggTrades archives: the tick CSV the backtest reads, or a feed's recorded ticks."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from feeds.market import Side, parse_fixed
from feeds.models import Tick
from feeds.venues.base import ParseError
from feeds.venues.binance_archive import parse_agg_trade_row
from feeds.venues.tick_csv import read_tick_csv
from tests.feeds.factories import make_feed

FUTURES_HEADER = "agg_trade_id,price,quantity,first_trade_id,last_trade_id,transact_time,is_buyer_maker"
FUTURES_ROWS = [
    "2435013397,96712.40,0.015,5001,5003,1732924800123,true",
    "2435013398,96712.50,0.004,5004,5004,1732924800348,false",
    "2435013399,0.000000000012,12000000,5005,5009,1732924801000,false",
]
SPOT_ROW_US = "3321,96712.40000000,0.01500000,9001,9002,1735689600123456,True,True"


def write_zip(path: Path, member: str, lines: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, "\n".join(lines) + "\n")
    return path


def run(*args: str) -> str:
    err = io.StringIO()
    call_command("importticks", *args, "--no-progress", stderr=err)
    return err.getvalue()


def test_rows_of_both_layouts_parse_exactly() -> None:
    sell = parse_agg_trade_row(FUTURES_ROWS[0].encode(), "BTC-USDT", 7)
    assert (sell.price, sell.volume, sell.trade_id, sell.side) == (
        parse_fixed("96712.4"),
        parse_fixed("0.015"),
        "2435013397",
        Side.SELL,
    )
    assert sell.ts_event == 1732924800123 * 1_000_000 and sell.ts_recv == 7
    tiny = parse_agg_trade_row(FUTURES_ROWS[2].encode(), "BTC-USDT", 7)
    assert tiny.price == parse_fixed("0.000000000012") and tiny.side == Side.BUY
    spot = parse_agg_trade_row(SPOT_ROW_US.encode(), "BTC-USDT", 7)
    assert spot.ts_event == 1735689600123456 * 1_000 and spot.side == Side.SELL


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("1,0,1,1,1,1732924800123,true", "price"),
        ("1,-5,1,1,1,1732924800123,true", "price"),
        ("1,5,0,1,1,1732924800123,true", "size"),
        ("1,5,-1,1,1,1732924800123,true", "size"),
        ("1,5,1,1,1,1732924800123,maybe", "schema"),
        ("1,5,1,1,1,99,true", "value"),
        ("x,5,1,1,1,1732924800123,true", "schema"),
        ("1,5,1", "schema"),
        ("1,1e3,1,1,1,1732924800123,true", "number"),
        ("1,5,1,1,1,1732924800123,tr\xffue", "utf8"),
    ],
)
def test_a_bad_row_is_a_named_refusal(row: str, reason: str) -> None:
    data = row.encode("latin-1") if "\xff" in row else row.encode()
    with pytest.raises(ParseError) as refused:
        parse_agg_trade_row(data, "BTC-USDT", 0)
    assert refused.value.reason == reason


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120))
def test_any_bytes_parse_or_are_refused(data: bytes) -> None:
    try:
        trade = parse_agg_trade_row(data, "BTC-USDT", 0)
    except ParseError:
        return
    assert trade.price > 0 and trade.volume > 0


def test_an_archive_becomes_a_tick_csv_the_backtest_reads(tmp_path: Path) -> None:
    archive = write_zip(
        tmp_path / "BTCUSDT-aggTrades-2024-11-30.zip",
        "BTCUSDT-aggTrades-2024-11-30.csv",
        [FUTURES_HEADER, *FUTURES_ROWS],
    )
    out = tmp_path / "ticks.csv"
    summary = run(str(archive), "--symbol", "BTC-USDT", "--output", str(out))
    assert "3 trades imported" in summary
    ticks = [t for batch in read_tick_csv(out, feed="backtest") for t in batch.events]
    assert [t.trade_id for t in ticks] == ["2435013397", "2435013398", "2435013399"]
    assert ticks[2].price == parse_fixed("0.000000000012")
    assert ticks[0].ts_event == 1732924800123 * 1_000_000 and ticks[0].side == Side.SELL


def test_refused_rows_are_counted_named_and_the_rest_imported(tmp_path: Path) -> None:
    lines = [FUTURES_ROWS[0], "1,-1,1,1,1,1732924800200,true", "garbage", FUTURES_ROWS[1]]
    archive = write_zip(tmp_path / "a.zip", "a.csv", lines)  # an older file: no header
    summary = run(str(archive), "--symbol", "BTC-USDT", "--output", str(tmp_path / "t.csv"))
    assert "2 trades imported" in summary
    assert "2 rows refused (price 1, schema 1)" in summary
    assert "a.zip:a.csv: line 2: refused (price)" in summary


@pytest.mark.django_db
def test_into_a_feed_reimport_records_each_trade_once(tmp_path: Path) -> None:
    make_feed("binance", ("BTCUSDT",), venue="binance_usdm")
    first = write_zip(tmp_path / "d1.zip", "d1.csv", [FUTURES_HEADER, *FUTURES_ROWS[:2]])
    second = tmp_path / "d2.csv"
    second.write_text("\n".join([FUTURES_HEADER, *FUTURES_ROWS[1:]]) + "\n")
    assert "2 trades imported" in run(str(first), "--symbol", "BTCUSDT", "--feed", "binance")
    summary = run(str(first), str(second), "--symbol", "BTCUSDT", "--feed", "binance")
    imported = 1 if connection.vendor == "postgresql" else 0
    assert f"{imported} trades imported" in summary and "3 already recorded (skipped)" in summary
    rows = list(Tick.objects.order_by("ts_event").values_list("trade_id", "price", "side", "duration_since_last_ns"))
    if connection.vendor == "postgresql":
        assert [r[0] for r in rows] == ["2435013397", "2435013398", "2435013399"]
        assert rows[2][1] == parse_fixed("0.000000000012")
    else:  # 12,000,000 is beyond SQLite's exact range: refused by name, the rest imported
        assert "rows refused (storage_range 1)" in summary
        assert [r[0] for r in rows] == ["2435013397", "2435013398"]
    assert rows[0][1] == parse_fixed("96712.4") and rows[0][2] == "sell"
    assert rows[1][3] == (1732924800348 - 1732924800123) * 1_000_000


@pytest.mark.django_db
def test_bad_arguments_are_command_errors(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        run(str(tmp_path / "missing.zip"), "--symbol", "X", "--output", str(tmp_path / "o.csv"))
    present = tmp_path / "p.csv"
    present.write_text(FUTURES_ROWS[0] + "\n")
    with pytest.raises(CommandError, match="no instrument"):
        run(str(present), "--symbol", "NOPE", "--feed", "none")
