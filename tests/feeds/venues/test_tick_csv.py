"""The tick CSV format has one reader: the replay venue and the backtest agree on every row.

Volume zero is a price print without traded volume: both play it (it moves the last
price, adds no volume); a negative volume is refused by both.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.health import HealthBoard
from feeds.market import FeedData, parse_fixed
from feeds.streams.local_streams import build_local_stream
from feeds.venues import replay
from feeds.venues.base import FeedSpec, InstrumentSpec
from feeds.venues.tick_csv import TickFileError, read_tick_csv

T0 = 1_700_000_000_000  # tick files hold exchange times from 2000 on
ROWS = [f"{T0 + 1000},BTC-USD,100,1", f"{T0 + 2000},BTC-USD,101,0", f"{T0 + 3000},BTC-USD,102,0.5"]


def tick_file(tmp_path: Path, rows: list[str], header: str = "ts_ms,symbol,price,volume") -> Path:
    path = tmp_path / "ticks.csv"
    path.write_text(header + "\n" + "".join(f"{row}\n" for row in rows))
    return path


async def replayed(path: Path) -> list:
    feed = FeedSpec("replayed", "replay", {"path": str(path)}, (InstrumentSpec("BTC-USD", "1", "0.1"),))
    delivered: list[FeedData] = []
    await build_local_stream(feed, replay.VENUE, publish=delivered.append, health=HealthBoard()).run()
    return [event for batch in delivered for event in batch.events]


async def test_a_zero_volume_tick_is_replayed_and_read_by_the_backtest_alike(tmp_path: Path) -> None:
    path = tick_file(tmp_path, ROWS)
    played = await replayed(path)
    read = [tick for batch in read_tick_csv(path, feed="backtest") for tick in batch.events]
    assert [(t.ts_event, t.price, t.volume) for t in played] == [(t.ts_event, t.price, t.volume) for t in read]
    assert [t.volume for t in read] == [parse_fixed("1"), 0, parse_fixed("0.5")]


def test_the_backtest_folds_a_zero_volume_tick_into_the_price_and_not_the_volume(tmp_path: Path) -> None:
    path = tick_file(tmp_path, [f"{T0 + 1000},A,10,0.1", f"{T0 + 2000},A,10.5,0", f"{T0 + 3000},A,10.2,0.2"])
    out = io.StringIO()
    params = '{"bar_volume": "0.3", "lookback": 1, "hold_bars": 1, "cooldown_bars": 0}'
    call_command(
        "backtest",
        "--strategy",
        "volume_breakout",
        "--params",
        params,
        "--ticks",
        str(path),
        stdout=out,
        stderr=io.StringIO(),
    )
    outputs = [line for line in map(json.loads, out.getvalue().splitlines()) if line["type"] == "output"]
    # One output per tick of the forming bar: the zero-volume tick moved the price only.
    assert [line["values"] for line in outputs] == [
        {"open": "10", "high": "10", "low": "10", "close": "10", "volume": "0.1"},
        {"open": "10", "high": "10.5", "low": "10", "close": "10.5", "volume": "0.1"},
        {"open": "10", "high": "10.5", "low": "10", "close": "10.2", "volume": "0.3"},
    ]


def test_the_backtest_refuses_a_negative_volume_naming_its_line(tmp_path: Path) -> None:
    path = tick_file(tmp_path, [f"{T0 + 1000},A,10,1", f"{T0 + 2000},A,10,-1"])
    with pytest.raises(TickFileError, match="line 3: size: volume negative"):
        list(read_tick_csv(path, feed="backtest"))
    with pytest.raises(CommandError, match="line 3"):
        call_command(
            "backtest",
            "--strategy",
            "ema",
            "--params",
            '{"timeframe_s": 10, "fast": 1, "slow": 3}',
            "--ticks",
            str(path),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )


async def test_the_replay_counts_a_negative_volume_as_malformed_and_goes_on(tmp_path: Path) -> None:
    path = tick_file(tmp_path, [f"{T0 + 1000},A,10,1", f"{T0 + 2000},A,10,-1"])
    feed = FeedSpec("replayed", "replay", {"path": str(path)}, (InstrumentSpec("A", "1", "1"),))
    stream = build_local_stream(feed, replay.VENUE, publish=lambda batch: None, health=HealthBoard())
    await stream.run()
    assert stream.stats.trades == 1 and dict(stream.stats.malformed) == {"size": 1}


@pytest.mark.parametrize("reader", ["replay", "backtest"])
async def test_both_readers_want_the_header_first(tmp_path: Path, reader: str) -> None:
    path = tick_file(tmp_path, ROWS, header="time,symbol,price,volume")
    with pytest.raises(TickFileError, match="line 1: expected header ts_ms,symbol,price,volume"):
        if reader == "replay":
            await replayed(path)
        else:
            list(read_tick_csv(path, feed="backtest"))


def test_the_optional_columns_are_read_by_the_backtest_too(tmp_path: Path) -> None:
    row = f"{T0 + 1000},A,10,1,77,sell,{(T0 + 1000) * 1_000_000 + 123}"
    path = tick_file(tmp_path, [row], header="ts_ms,symbol,price,volume,trade_id,side,ts_ns")
    ((tick,),) = [batch.events for batch in read_tick_csv(path, feed="backtest")]
    assert (tick.trade_id, tick.side.value, tick.ts_event) == ("77", "sell", (T0 + 1000) * 1_000_000 + 123)  # type: ignore[union-attr]


@pytest.mark.parametrize("reader", ["replay", "backtest"])
async def test_a_time_before_2000_is_a_unit_mistake_to_both_readers(tmp_path: Path, reader: str) -> None:
    path = tick_file(tmp_path, [f"{T0 // 1000},A,10,1"])  # seconds where milliseconds go
    if reader == "backtest":
        with pytest.raises(TickFileError, match=r"line 2: .*exchange time out of range"):
            list(read_tick_csv(path, feed="backtest"))
    else:
        feed = FeedSpec("replayed", "replay", {"path": str(path)}, (InstrumentSpec("A", "1", "1"),))
        stream = build_local_stream(feed, replay.VENUE, publish=lambda batch: None, health=HealthBoard())
        await stream.run()
        assert stream.stats.trades == 0 and sum(stream.stats.malformed.values()) == 1
