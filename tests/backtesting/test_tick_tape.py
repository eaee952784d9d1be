"""Backtests over a tick tape give exactly what the straightforward replay gives.

The straightforward path is the live Processor fed MarketData batches and a simulated
account offered every tick; the tape path folds columns and offers the account only
the ticks of an instrument with a working order or armed exit levels. Random tapes
(several instruments, equal times, thin volumes that fill in parts, latency, limit
orders, both reversal rules, exit levels and account limits) must give the same trades, outcomes, ledger and report, and the columnar
reader must read a file into the ticks the line reader reads.
"""

from __future__ import annotations

import random
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from backtesting.runner import run_filled_backtest, run_filled_tape
from backtesting.simulated_account import SimulatedSettings
from backtesting.tape_replay import run_tape_backtest
from backtesting.tick_tape import TickTape, read_tick_tape, tape_from_batches
from feeds.market import parse_fixed
from feeds.venues.tick_csv import TickFileError, read_tick_csv
from orders.brokers.paper import PaperFees
from orders.models.accounts import Reversal
from orders.models.lifecycle import OrderType
from orders.risk_limits import AccountLimits, ExitLevels
from processor.backtest import BACKTEST_FEED, JsonLinesWriter, run_backtest
from processor.strategies import clean_params
from tests.processor.test_strategy_plugins import plugin  # noqa: F401  (a fixture)

T0_MS = 1_764_460_800_000
EMA = {"timeframe_s": 5, "fast": 2, "slow": 5}
BREAKOUT = {"bar_volume": "6", "lookback": 3, "hold_bars": 2, "cooldown_bars": 1}


def random_csv(path: Path, *, seed: int, count: int, symbols: tuple[str, ...]) -> Path:
    rng = random.Random(seed)
    prices = dict.fromkeys(symbols, 100.0)
    ts = T0_MS
    lines = ["ts_ms,symbol,price,volume"]
    for _ in range(count):
        symbol = rng.choice(symbols)
        prices[symbol] *= 1 + rng.gauss(0, 0.004)
        ts += rng.choice((0, 0, 1, 50, 700, 3_000))  # equal times are common on ms stamps
        volume = rng.choice(("0", "0.3", "0.7", "1", "2.5", "4"))  # thin ticks fill an order in parts
        lines.append(f"{ts},{symbol},{prices[symbol]:.2f},{volume}")
    path.write_text("\n".join(lines) + "\n")
    return path


def settings(**terms: object) -> SimulatedSettings:
    # A quantity at most the thinnest traded tick's: an entry mostly fills whole; the
    # cases with a larger quantity fill in parts, and an exit then cancels the rest.
    base = {"capital": parse_fixed("100"), "quantity": parse_fixed("0.3"), "fees": PaperFees(taker_bps=7, maker_bps=3)}
    return SimulatedSettings(**(base | terms))  # type: ignore[arg-type]


async def both_ways(kind: str, params: dict, tape: TickTape, terms: SimulatedSettings, batch_ticks: int = 256):
    straight = await run_filled_backtest(
        kind=kind, params=params, batches=tape.batches(batch_ticks), settings=terms, close_at_end=True
    )
    fast = await run_filled_tape(kind=kind, params=params, tape=tape, settings=terms, batch_ticks=batch_ticks)
    return straight, fast


def assert_same(straight, fast) -> None:
    a, b = straight.account, fast.account
    assert b.closed == a.closed
    assert b.outcomes == a.outcomes
    assert b.risk_events == a.risk_events
    assert (b.realized, b.fills, b.reserved_for_orders, b.reserved_for_positions) == (
        a.realized,
        a.fills,
        a.reserved_for_orders,
        a.reserved_for_positions,
    )
    assert fast.report == straight.report
    assert (fast.summary.ticks, fast.summary.signals, fast.summary.outputs) == (
        straight.summary.ticks,
        straight.summary.signals,
        straight.summary.outputs,
    )


CASES = [
    ("ema", EMA, {}),
    ("ema", EMA | {"bucket_close_only": True}, {"latency_ns": 900_000_000}),
    ("ema", EMA | {"long_only": True}, {"order_type": OrderType.LIMIT}),
    ("ema", EMA, {"reversal": Reversal.REFUSE}),
    ("volume_breakout", BREAKOUT, {}),
    ("volume_breakout", BREAKOUT, {"quantity": parse_fixed("2"), "capital": parse_fixed("1000")}),
    ("volume_breakout", BREAKOUT, {"latency_ns": 2_000_000_000, "order_type": OrderType.LIMIT}),
    # Exit levels watch every tick of an open position, so the tape path offers those too;
    # account limits refuse entries (the thin ticks fill entries in parts, exits cancel the rest).
    ("ema", EMA, {"exit_levels": ExitLevels(stop_loss=Decimal("0.004"), take_profit=Decimal("0.006"))}),
    ("ema", EMA, {"exit_levels": ExitLevels(trailing_stop=Decimal("0.003")), "latency_ns": 900_000_000}),
    (
        "volume_breakout",
        BREAKOUT,
        {
            "quantity": parse_fixed("2"),
            "capital": parse_fixed("1000"),
            "exit_levels": ExitLevels(stop_loss=Decimal("0.002"), trailing_stop=Decimal("0.004")),
            "limits": AccountLimits(max_open_positions=2, daily_loss_limit=parse_fixed("0.5")),
        },
    ),
    (
        "ema",
        EMA | {"long_only": True},
        {
            "order_type": OrderType.LIMIT,
            "exit_levels": ExitLevels(take_profit=Decimal("0.003")),
            "limits": AccountLimits(max_open_positions=1, daily_loss_limit=None),
        },
    ),
]


@pytest.mark.parametrize("symbols", [("BTC",), ("BTC", "ETH", "SOL")])
@pytest.mark.parametrize(("kind", "params", "terms"), CASES)
async def test_the_tape_path_trades_exactly_as_the_straightforward_path(tmp_path, symbols, kind, params, terms) -> None:
    for seed in range(3):
        path = random_csv(tmp_path / f"t{seed}.csv", seed=seed, count=1_500, symbols=symbols)
        tape = read_tick_tape(path, feed=BACKTEST_FEED)
        straight, fast = await both_ways(kind, params, tape, settings(**terms), batch_ticks=(256, 100, 7)[seed])
        assert straight.report.trades > 0
        assert_same(straight, fast)
        events = {e.event for e in straight.account.risk_events}
        if "exit_levels" in terms:
            assert events & {"risk.stop_loss", "risk.take_profit", "risk.trailing_stop"}, events
        if "limits" in terms:
            assert "halted" in events, events


async def test_a_tape_whose_times_go_backwards_takes_the_straightforward_path(tmp_path) -> None:
    path = random_csv(tmp_path / "t.csv", seed=4, count=800, symbols=("BTC",))
    lines = path.read_text().splitlines()
    lines[300], lines[301] = lines[301], lines[300]  # one tick out of order
    lines[400:400] = [f"{T0_MS},BTC,99.5,1"]  # one far in the past
    path.write_text("\n".join(lines) + "\n")
    tape = read_tick_tape(path, feed=BACKTEST_FEED)
    assert not tape.in_time_order()
    straight, fast = await both_ways("ema", EMA, tape, settings())
    assert_same(straight, fast)


@pytest.mark.parametrize("symbols", [("BTC",), ("ETH", "BTC"), ("SOL", "BTC", "ETH")])
@pytest.mark.parametrize(
    ("kind", "params"),
    [("ema", EMA), ("volume_breakout", BREAKOUT), ("tick_ema", EMA)],  # tick_ema: a plug-in, no column fold
)
async def test_signals_only_over_a_tape_writes_the_processor_replay_lines(
    request, tmp_path, symbols, kind, params
) -> None:
    if kind == "tick_ema":
        request.getfixturevalue("plugin")  # loaded through the plug-in point
    # Equal times across symbols are common here: their lines keep the replay's order.
    path = random_csv(tmp_path / "t.csv", seed=5, count=2_000 * len(symbols), symbols=symbols)
    params = clean_params(kind, params)
    expected: list[str] = []
    await run_backtest(
        kind=kind,
        params=params,
        batches=read_tick_csv(path, feed=BACKTEST_FEED),
        writer=JsonLinesWriter(expected.append, kind=kind, signals_only=True),
    )
    written: list[str] = []
    summary = run_tape_backtest(
        kind=kind,
        params=params,
        tape=read_tick_tape(path, feed=BACKTEST_FEED),
        writer=JsonLinesWriter(written.append, kind=kind, signals_only=True),
    )
    assert "".join(written) == "".join(expected) and summary.signals > 0
    assert summary.outputs == 2_000 * len(symbols)


def test_a_signals_only_tape_run_refuses_several_symbols_whose_times_go_backwards(tmp_path) -> None:
    path = tmp_path / "back.csv"
    path.write_text(f"ts_ms,symbol,price,volume\n{T0_MS + 5},BTC,100,1\n{T0_MS},ETH,10,1\n")
    writer = JsonLinesWriter(lambda line: None, kind="ema", signals_only=True)
    with pytest.raises(ValueError, match="replayed"):
        run_tape_backtest(kind="ema", params=EMA, tape=read_tick_tape(path, feed=BACKTEST_FEED), writer=writer)


def test_the_columnar_reader_reads_what_the_line_reader_reads(tmp_path) -> None:
    path = random_csv(tmp_path / "t.csv", seed=6, count=3_000, symbols=("ETH", "BTC"))
    tape = read_tick_tape(path, feed=BACKTEST_FEED)
    lines = tape_from_batches(read_tick_csv(path, feed=BACKTEST_FEED), feed=BACKTEST_FEED)
    assert tape.symbols == lines.symbols == ["ETH", "BTC"]
    assert (tape.symbol_ids, tape.times, tape.prices, tape.volumes) == (
        lines.symbol_ids,
        lines.times,
        lines.prices,
        lines.volumes,
    )
    # Every column of an export, and numbers past 2**64 at 12 places (a meme token's volume).
    export = tmp_path / "export.csv"
    export.write_text(
        "ts_ms,symbol,price,volume,trade_id,side,ts_ns\n"
        f"{T0_MS},PEPE,0.000001234567,987654321098.5,7,buy,{T0_MS * 1_000_000 + 123}\n"
        f"{T0_MS + 1},PEPE,0.000001234568,12.000000000001,,sell,\n"
        f"{T0_MS + 2},PEPE,1.5,0,9,,\n"
    )
    tape = read_tick_tape(export, feed=BACKTEST_FEED)
    ticks = [t for batch in read_tick_csv(export, feed=BACKTEST_FEED) for t in batch.events]
    assert [tape.tick(i) for i in range(len(tape))] == [replace(t, ts_recv=tape.received_ns) for t in ticks]
    assert tape.volumes[0] == parse_fixed("987654321098.5") > 2**64


def test_a_file_outside_the_plain_form_is_read_or_refused_by_the_line_reader(tmp_path) -> None:
    odd = tmp_path / "odd.csv"
    odd.write_text(f"ts_ms,symbol,price,volume\n{T0_MS},BTC,+100.50,1.\n\n{T0_MS + 5},BTC,0100,2\n")
    tape = read_tick_tape(odd, feed=BACKTEST_FEED)
    assert tape.prices == [parse_fixed("100.5"), parse_fixed("100")] and tape.volumes == [
        parse_fixed("1"),
        parse_fixed("2"),
    ]
    bad = tmp_path / "bad.csv"
    bad.write_text(f"ts_ms,symbol,price,volume\n{T0_MS},BTC,100,1\n{T0_MS},BTC,-1,1\n")
    with pytest.raises(TickFileError, match="line 3"):
        read_tick_tape(bad, feed=BACKTEST_FEED)
    header = tmp_path / "header.csv"
    header.write_text("time,price\n1,2\n")
    with pytest.raises(TickFileError, match="line 1"):
        read_tick_tape(header, feed=BACKTEST_FEED)


@pytest.mark.parametrize(
    "number",
    [".5", "5.", "1.1234567890120000", "0000000000000000000012.5", "999999999999999999.999999999999", "007"]
    + ["1e5", "+1", "-1", " 1", "1 ", "1.2.3", ".", "١", "1_0", "0x10", "1.1234567890123", "1" * 19, "0" * 40 + "1"],
)
def test_the_columnar_reader_agrees_with_the_line_reader_on_every_number_form(tmp_path, number) -> None:
    path = tmp_path / "n.csv"
    path.write_text(f"ts_ms,symbol,price,volume\n{T0_MS},BTC,100.25,{number}\n{T0_MS + 1},BTC,{number},2\n", "utf-8")
    try:
        lines = tape_from_batches(read_tick_csv(path, feed=BACKTEST_FEED), feed=BACKTEST_FEED)
    except TickFileError as refused:
        with pytest.raises(TickFileError) as columnar:
            read_tick_tape(path, feed=BACKTEST_FEED)
        assert str(columnar.value) == str(refused)  # the same line named, the same reason
        return
    tape = read_tick_tape(path, feed=BACKTEST_FEED)
    assert (tape.times, tape.prices, tape.volumes) == (lines.times, lines.prices, lines.volumes)


def test_a_tape_keeps_int64_arrays_only_for_columns_that_fit(tmp_path) -> None:
    plain = tmp_path / "plain.csv"
    plain.write_text(f"ts_ms,symbol,price,volume\n{T0_MS},BTC,100.25,1.5\n{T0_MS + 7},BTC,9000000.5,2\n")
    arrays = read_tick_tape(plain, feed=BACKTEST_FEED).arrays()
    assert arrays is not None and [column.tolist() for column in arrays] == [
        [T0_MS * 1_000_000, (T0_MS + 7) * 1_000_000],
        [parse_fixed("100.25"), parse_fixed("9000000.5")],
        [parse_fixed("1.5"), parse_fixed("2")],
    ]
    huge = tmp_path / "huge.csv"  # 2**63 and past at 12 places: exact Python ints, no array
    huge.write_text(f"ts_ms,symbol,price,volume\n{T0_MS},BTC,100,9223372.036854775808\n")
    tape = read_tick_tape(huge, feed=BACKTEST_FEED)
    assert tape.volumes == [2**63] and tape.arrays() is not None and tape.arrays()[2] is None
    wide = tmp_path / "wide.csv"
    wide.write_text(f"ts_ms,symbol,price,volume\n{T0_MS},BTC,9223372.036854775808,1\n")
    tape = read_tick_tape(wide, feed=BACKTEST_FEED)
    assert tape.prices == [2**63] and tape.arrays() is None


_ALPHABET = "0123456789.,+-eE _x\\\"'\u0661\u00a0\r\t/"


def _mutated_csv(rng: random.Random, columns: int) -> str:
    header = ["ts_ms", "symbol", "price", "volume", "trade_id", "side", "ts_ns"][:columns]
    rows = []
    ts = T0_MS
    for _ in range(rng.randint(1, 30)):
        ts += rng.choice((0, 1, 250))
        fields = [
            str(ts),
            rng.choice(("BTC", "ETH-USD")),
            f"{rng.uniform(0.0001, 90_000):.{rng.choice((0, 1, 2, 5, 8, 12, 12, 13))}f}",
        ]
        fields.append(rng.choice(("0", "1", "0.25", "12.000000000001", "987654321098.5")))
        fields += [str(rng.randint(1, 9)), rng.choice(("buy", "sell", "")), rng.choice(("", str(ts * 1_000_000 + 7)))]
        rows.append(fields[:columns])
    for _ in range(rng.randint(0, 3)):  # edits: a character, a whole field, a line
        row = rng.choice(rows)
        at = rng.randrange(len(row))
        text = row[at]
        choice = rng.random()
        if choice < 0.5 and text:
            spot = rng.randrange(len(text) + 1)
            row[at] = text[:spot] + rng.choice(_ALPHABET) + text[spot + 1 :]
        elif choice < 0.8:
            row[at] = rng.choice(("", ".", "-0", "1e3", "0" * 40 + "5", "9" * 19, "1.5.", " 7", "nan", "inf"))
        else:
            row.insert(at, "extra")
    return ",".join(header) + "\n" + "".join(",".join(row) + "\n" for row in rows)


@pytest.mark.parametrize("seed", range(12))
def test_mutated_files_read_alike_by_both_readers(tmp_path, seed) -> None:
    rng = random.Random(seed)
    path = tmp_path / "m.csv"
    for case in range(60):
        path.write_text(_mutated_csv(rng, rng.choice((4, 5, 6, 7))), "utf-8")
        try:
            lines = tape_from_batches(read_tick_csv(path, feed=BACKTEST_FEED), feed=BACKTEST_FEED)
        except TickFileError as refused:
            with pytest.raises(TickFileError) as columnar:
                read_tick_tape(path, feed=BACKTEST_FEED)
            assert str(columnar.value) == str(refused), (seed, case)
            continue
        tape = read_tick_tape(path, feed=BACKTEST_FEED)
        assert [tape.tick(i) for i in range(len(tape))] == [
            replace(lines.tick(i), ts_recv=tape.received_ns) for i in range(len(lines))
        ], (seed, case)
