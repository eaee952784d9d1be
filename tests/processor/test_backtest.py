"""`manage.py backtest`: the live processor code over a CSV, JSON lines on stdout."""

from __future__ import annotations

import io
import json
import random

import orjson
import pytest
from django.core.management import CommandError, call_command

from processor import backtest as backtest_module
from processor.backtest import signal_line_document
from processor.signals import Signal, SignalKind

EMA = '{"timeframe_s": 10, "fast": 1, "slow": 3}'
# Tick files hold exchange times from 2000 on (a time before is a unit mistake): rows
# are written relative to T0, a whole number of 10 s bars.
T0 = 1_700_000_000_000


def write_csv(path, rows, header="ts_ms,symbol,price,volume"):
    """Write `rows` ("ms,symbol,price,volume", ms counted from T0) as a tick file."""
    rows = [f"{T0 + int(ms)},{rest}" for ms, rest in (row.split(",", 1) for row in rows)]
    path.write_text(header + "\n" + "".join(f"{r}\n" for r in rows))
    return str(path)


def backtest(*args, **options):
    out, err = io.StringIO(), io.StringIO()
    call_command("backtest", *args, stdout=out, stderr=err, **options)
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


@pytest.fixture
def ema_csv(tmp_path):
    return write_csv(
        tmp_path / "ticks.csv",
        [
            "1000,BTC-USD,100,1",
            "11000,BTC-USD,101,1",
            "21000,BTC-USD,102,1",
            "31000,BTC-USD,103,0.5",
            "33000,BTC-USD,90.5,2",
        ],
    )


def test_writes_every_output_then_each_signal_after_the_output_of_its_tick(ema_csv):
    lines, summary = backtest("--strategy", "ema", "--params", EMA, "--ticks", ema_csv)
    assert [line["type"] for line in lines] == ["output"] * 4 + ["signal"] + ["output", "signal", "signal"]
    assert lines[0] == {
        "type": "output",
        "symbol": "BTC-USD",
        "time_ms": T0,
        "occurrence_time_ms": T0 + 1000,
        "values": {"fast": 100.0, "slow": 100.0},
    }
    assert lines[3]["time_ms"] == T0 + 30000 and lines[3]["occurrence_time_ms"] == T0 + 31000
    assert lines[4] == {
        "type": "signal",
        "symbol": "BTC-USD",
        "kind": "ENTRY_LONG",
        "occurrence_time_ms": T0 + 31000,
        "price": "103",
    }
    assert [(line["kind"], line["price"]) for line in lines[6:]] == [("EXIT_LONG", "90.5"), ("ENTRY_SHORT", "90.5")]
    assert "5 ticks" in summary and "3 signals" in summary and "ticks/s" in summary


def test_signals_only_writes_only_signal_lines(ema_csv):
    lines, _ = backtest("--strategy", "ema", "--params", EMA, "--ticks", ema_csv, "--signals-only")
    assert [line["kind"] for line in lines] == ["ENTRY_LONG", "EXIT_LONG", "ENTRY_SHORT"]


def test_volume_bars_are_exact_decimal_strings_per_symbol(tmp_path):
    path = write_csv(
        tmp_path / "t.csv",
        [
            "1000,A,10.1,0.1",
            "2000,B,5,1",
            "3000,A,10.3,0.2",
            "4000,A,9.95,0.3",
        ],
    )
    params = '{"bar_volume": "0.3", "lookback": 1, "hold_bars": 1, "cooldown_bars": 0}'
    lines, _ = backtest("--strategy", "volume_breakout", "--params", params, "--ticks", path)
    a = [line for line in lines if line["symbol"] == "A"]
    assert a[1]["values"] == {"open": "10.1", "high": "10.3", "low": "10.1", "close": "10.3", "volume": "0.3"}
    assert a[1]["time_ms"] == T0 + 1000 and a[1]["occurrence_time_ms"] == T0 + 3000
    assert a[2]["values"]["open"] == "9.95" and a[2]["time_ms"] == T0 + 4000
    assert [line["kind"] for line in lines if line["type"] == "signal"] == ["ENTRY_SHORT"]


def test_invalid_params_name_the_field(ema_csv):
    with pytest.raises(CommandError, match="slow"):
        backtest("--strategy", "ema", "--params", '{"timeframe_s": 10, "fast": 5, "slow": 3}', "--ticks", ema_csv)
    with pytest.raises(CommandError, match="unknown strategy kind"):
        backtest("--strategy", "nope", "--params", "{}", "--ticks", ema_csv)


def test_a_malformed_row_names_its_line(tmp_path):
    path = write_csv(tmp_path / "bad.csv", ["1000,A,10,1", "2000,A,ten,1"])
    with pytest.raises(CommandError, match="line 3"):
        backtest("--strategy", "ema", "--params", EMA, "--ticks", path)
    with pytest.raises(CommandError, match="header"):
        backtest("--strategy", "ema", "--params", EMA, "--ticks", write_csv(tmp_path / "h.csv", [], header="a,b"))


def test_needs_a_tick_source():
    with pytest.raises(CommandError, match="--ticks"):
        backtest("--strategy", "ema", "--params", EMA)


def random_walk_csv(path, *, symbols, ticks, seed=12):
    """`ticks` trades spread over `symbols`, each a seeded random walk with random sizes."""
    import random

    rng = random.Random(seed)
    prices = dict.fromkeys(symbols, 100.0)
    rows = []
    for index in range(ticks):
        symbol = symbols[rng.randrange(len(symbols))]
        prices[symbol] = max(1.0, prices[symbol] * (1 + rng.uniform(-0.004, 0.004)))
        rows.append(f"{1_000 + index * 10},{symbol},{prices[symbol]:.2f},{rng.uniform(0.1, 3):.3f}")
    return write_csv(path, rows)


def test_every_counted_signal_is_written_right_after_the_output_of_its_tick(tmp_path):
    # Thousands of lines: the writer flushes its blocks many times, mid-batch and between symbols.
    path = random_walk_csv(tmp_path / "walk.csv", symbols=["A", "B", "C"], ticks=30_000)
    params = '{"bar_volume": "20", "lookback": 3, "hold_bars": 2, "cooldown_bars": 0}'
    lines, summary = backtest("--strategy", "volume_breakout", "--params", params, "--ticks", path)
    signals = [line for line in lines if line["type"] == "signal"]
    assert len(signals) > 400
    assert f"{len(signals)} signals" in summary
    assert f"{len(lines) - len(signals)} outputs" in summary
    # In exchange-time order across symbols, as the ticks happened.
    times = [line["occurrence_time_ms"] for line in lines]
    assert times == sorted(times)
    position: dict[str, str] = {}
    for previous, line in zip([None, *lines], lines):
        symbol = line["symbol"]
        if line["type"] == "output":
            continue
        # A signal follows the output of its tick (or the signal before it on that tick).
        assert previous is not None and previous["symbol"] == symbol
        assert previous["occurrence_time_ms"] == line["occurrence_time_ms"]
        # And the symbol's signals alternate entry and exit: none is missing.
        kind = line["kind"]
        if kind.startswith("ENTRY"):
            assert symbol not in position, (symbol, kind, position)
            position[symbol] = kind.removeprefix("ENTRY_")
        else:
            assert position.pop(symbol, None) == kind.removeprefix("EXIT_"), (symbol, kind)


def test_signals_only_holds_every_counted_signal(tmp_path):
    path = random_walk_csv(tmp_path / "walk.csv", symbols=["A", "B", "C"], ticks=30_000, seed=5)
    params = '{"bar_volume": "20", "lookback": 3, "hold_bars": 2, "cooldown_bars": 0}'
    lines, summary = backtest("--strategy", "volume_breakout", "--params", params, "--ticks", path, "--signals-only")
    assert len(lines) > 400 and all(line["type"] == "signal" for line in lines)
    assert f"{len(lines)} signals" in summary
    times = [line["occurrence_time_ms"] for line in lines]
    assert times == sorted(times)


def test_a_signal_line_is_the_documents_json_byte_for_byte(monkeypatch):
    monkeypatch.setattr(backtest_module, "_LINE_CACHE_SIZE", 5)  # the bounded caches empty and refill
    rng = random.Random(4)
    symbols = ["BTC-USD", 'q"uote', "back\\slash", "ünï", "tab\there", "\u2028"]
    for n in range(3_000):
        signal = Signal(
            strategy_id=1,
            strategy_name="s",
            feed="f",
            symbol=rng.choice(symbols),
            kind=rng.choice(list(SignalKind)),
            price=rng.choice((1, 10**12, 123_456_789, 2**70, rng.randrange(1, 10**20))),
            emitted_ns=0,
            occurrence_ns=rng.randrange(0, 2**62),
            output_id=str(n),
        )
        assert backtest_module._signal_line(signal) == orjson.dumps(signal_line_document(signal)).decode()
        assert backtest_module.signal_line(signal.symbol, signal.kind, signal.occurrence_ns, signal.price) == (
            backtest_module._signal_line(signal)
        )


def report(*args):
    out = io.StringIO()
    call_command("backtest", *args, "--report", "json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


@pytest.mark.parametrize("symbols", [("BTC",), ("ETH", "BTC")])
def test_a_csv_backtest_reads_a_tape_with_the_replays_results(tmp_path, monkeypatch, symbols):
    from backtesting.management.commands import backtest as command
    from tests.backtesting.test_tick_tape import random_csv

    path = str(random_csv(tmp_path / "t.csv", seed=5, count=4_000, symbols=symbols))
    args = ("--strategy", "ema", "--params", '{"timeframe_s": 5, "fast": 2, "slow": 5}', "--ticks", path)
    read = []
    original = command.Command._tape
    monkeypatch.setattr(command.Command, "_tape", lambda self, options: read.append(1) or original(self, options))
    tape_lines, _ = backtest(*args, "--signals-only")
    tape_report = report(*args, "--taker-bps", "7")
    assert len(read) == 2  # both read the file as a tape
    if len(symbols) > 1:  # and the lines were folded from it, not replayed
        with monkeypatch.context() as no_replay:
            no_replay.setattr(command, "run_backtest", None)
            assert backtest(*args, "--signals-only")[0] == tape_lines
    monkeypatch.setattr(command.Command, "_tape", lambda self, options: None)  # the replay, for the comparison
    replay_lines, _ = backtest(*args, "--signals-only")
    assert tape_lines == replay_lines and len(tape_lines) > 10
    assert report(*args, "--taker-bps", "7") == tape_report and tape_report["trades"] > 0


def test_a_bad_csv_is_a_command_error_naming_the_line_on_the_tape_path_too(tmp_path):
    path = write_csv(tmp_path / "bad.csv", ["1000,BTC,100,1", "2000,BTC,-1,1"])
    for extra in (("--signals-only",), ("--report", "json")):
        with pytest.raises(CommandError, match="line 3"):
            backtest("--strategy", "ema", "--params", EMA, "--ticks", path, *extra)


def test_json_is_the_short_form_of_report_json(ema_csv):
    args = ("--strategy", "ema", "--params", EMA, "--ticks", ema_csv)
    assert report(*args) == json.loads(_stdout("backtest", *args, "--json"))
    with pytest.raises(CommandError, match="--json"):
        call_command("backtest", *args, "--json", "--report", "text", stdout=io.StringIO(), stderr=io.StringIO())


def _stdout(*args):
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()
