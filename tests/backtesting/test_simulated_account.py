"""The simulated account against figures computed by hand: the executor's rules, the paper fills, exact money."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from backtesting.simulated_account import END_OF_BACKTEST, SimulatedAccount, SimulatedSettings
from feeds.market import MarketData, parse_fixed
from orders.brokers.paper import PaperFees
from orders.models.accounts import Reversal
from processor.signals import Signal, SignalKind

T0 = 1_764_460_800_000_000_000
MS = 1_000_000


def d(text: str) -> int:
    return parse_fixed(text)


def tick(ms: int, price: str, volume: str = "10", symbol: str = "BTC") -> MarketData:
    return MarketData(symbol=symbol, price=d(price), volume=d(volume), ts_event=T0 + ms * MS, ts_recv=T0 + ms * MS)


def signal(kind: SignalKind, ms: int, price: str, symbol: str = "BTC") -> Signal:
    return Signal(
        strategy_id=1,
        strategy_name="s",
        feed="backtest",
        symbol=symbol,
        kind=kind,
        price=d(price),
        emitted_ns=T0 + ms * MS,
        occurrence_ns=T0 + ms * MS,
        output_id=f"o{ms}",
    )


def account(**overrides: object) -> SimulatedAccount:
    terms = {"capital": d("1000"), "quantity": d("2"), "fees": PaperFees(taker_bps=10, maker_bps=5)} | overrides
    return SimulatedAccount(SimulatedSettings(**terms))  # type: ignore[arg-type]


def test_a_long_round_trip_books_exact_fees_and_pnl() -> None:
    acc = account()
    acc.tick(tick(0, "100"))
    assert acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100")) == "placed"
    # Reserved: 200 notional, +0.5% market buffer = 201, +0.1% fee reserve = 201.201.
    assert acc.reserved_for_orders == d("201.201")
    acc.tick(tick(1, "101"))  # fills 2 @ 101: fee 0.202
    assert acc.reserved_for_orders == 0 and acc.reserved_for_positions == d("202")
    acc.tick(tick(2, "110"))
    assert acc.signal(signal(SignalKind.EXIT_LONG, 2, "110")) == "placed"
    acc.tick(tick(3, "109"))  # fills 2 @ 109: fee 0.218, gain 16
    (trade,) = acc.closed
    assert (trade.entry_price, trade.exit_price, trade.quantity) == (d("101"), d("109"), d("2"))
    assert trade.fees == d("0.42") and trade.pnl == d("15.58")
    assert (trade.entry_time_ns, trade.exit_time_ns) == (T0 + MS, T0 + 3 * MS)
    assert acc.realized == d("15.58") and acc.available == d("1015.58")


def test_a_fill_is_at_most_the_tick_volume_and_a_short_gains_when_price_falls() -> None:
    acc = account()
    acc.tick(tick(0, "50"))
    acc.signal(signal(SignalKind.ENTRY_SHORT, 0, "50"))
    acc.tick(tick(1, "50", volume="0.5"))
    acc.tick(tick(2, "50", volume="1.5"))
    assert acc.fills == 2 and acc.reserved_for_positions == d("100")
    acc.signal(signal(SignalKind.EXIT_SHORT, 2, "40"))
    acc.tick(tick(3, "40"))
    (trade,) = acc.closed
    # 100 - 80 = 20 gain; fees 0.05 + 0.05 (entry, two fills) + 0.08 (exit).
    assert trade.pnl == d("19.82") and trade.fees == d("0.18") and trade.side == "short"


def test_refusals_name_their_reason() -> None:
    acc = account(capital=d("100"))
    acc.tick(tick(0, "100"))
    assert acc.signal(signal(SignalKind.EXIT_LONG, 0, "100")) == "no_position"
    assert acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100")) == "insufficient_capital"
    small = account(quantity=d("0.0004"))
    assert small.signal(signal(SignalKind.ENTRY_LONG, 0, "100")) == "quantity_zero"
    acc = account()
    acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    assert acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100")) == "position_open"
    acc.tick(tick(1, "100"))
    acc.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    assert acc.signal(signal(SignalKind.EXIT_LONG, 1, "100")) == "already_closing"
    assert dict(acc.outcomes) == {"placed": 2, "position_open": 1, "already_closing": 1}


def test_a_reversal_enters_the_other_side_once_the_exit_has_filled() -> None:
    acc = account()
    acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    acc.tick(tick(1, "100"))
    acc.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    assert acc.signal(signal(SignalKind.ENTRY_SHORT, 1, "100")) == "waiting_for_exit"
    acc.tick(tick(2, "105"))  # the exit fills; the short is placed at that fill
    assert len(acc.closed) == 1 and acc.open_positions == 1
    assert dict(acc.outcomes) == {"placed": 3}  # the waiting entry's outcome is replaced by its final one
    acc.tick(tick(3, "104"))  # the short fills
    acc.close_all()
    assert [t.side for t in acc.closed] == ["long", "short"]
    assert acc.closed[1].entry_price == d("104") and acc.closed[1].exit_reason == END_OF_BACKTEST
    refusing = account(reversal=Reversal.REFUSE)
    refusing.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    refusing.tick(tick(1, "100"))
    refusing.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    assert refusing.signal(signal(SignalKind.ENTRY_SHORT, 1, "100")) == "position_open"
    stopped = account()
    stopped.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    stopped.tick(tick(1, "100"))
    stopped.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    stopped.signal(signal(SignalKind.ENTRY_SHORT, 1, "100"))
    stopped.close_all()  # the run ends before the exit fills: the waiting entry never traded
    assert dict(stopped.outcomes) == {"placed": 2, "stopped": 1}


def test_an_exit_cancels_the_working_entry_and_closes_what_has_filled() -> None:
    # As the live exit flow: the unfilled rest of the entry is cancelled (its reservation
    # released), the filled part is closed; an entry with no fill leaves nothing to close.
    acc = account()
    acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    acc.tick(tick(1, "100", volume="0.5"))  # 0.5 of 2 filled
    assert acc.signal(signal(SignalKind.EXIT_LONG, 1, "100")) == "placed"
    assert acc.reserved_for_orders == 0
    acc.tick(tick(2, "110"))  # the exit fills 0.5; the entry's rest never does
    (trade,) = acc.closed
    assert trade.quantity == d("0.5") and trade.exit_reason == "EXIT_LONG"
    assert acc.open_positions == 0 and acc.reserved_for_positions == 0
    unfilled = account()
    unfilled.signal(signal(SignalKind.ENTRY_SHORT, 0, "100"))
    assert unfilled.signal(signal(SignalKind.EXIT_SHORT, 0, "100")) == "no_position"
    assert unfilled.reserved_for_orders == 0 and unfilled.open_positions == 0
    unfilled.tick(tick(1, "100"))
    assert unfilled.fills == 0
    assert unfilled.signal(signal(SignalKind.ENTRY_LONG, 1, "100")) == "placed"  # the instrument is free again


def test_latency_delays_the_first_fill() -> None:
    acc = account(latency_ns=5 * MS)
    acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    acc.tick(tick(3, "101"))
    assert acc.fills == 0
    acc.tick(tick(5, "102"))
    assert acc.fills == 1 and acc.reserved_for_positions == d("204")


T0_MS = T0 // MS


def write_csv(path, rows):
    path.write_text("ts_ms,symbol,price,volume\n" + "".join(f"{T0_MS + ms},BTC-USD,{price},5\n" for ms, price in rows))
    return str(path)


@pytest.mark.django_db
def test_the_command_trades_the_signals_and_prints_the_report(tmp_path) -> None:
    # ema fast 1 / slow 2 on 10 s buckets: the rise enters long, the fall exits.
    rows = [
        (0, "100"),
        (10_000, "101"),
        (20_000, "103"),
        (30_000, "104"),
        (40_000, "99"),
        (50_000, "95"),
        (60_000, "94"),
    ]
    path = write_csv(tmp_path / "t.csv", rows)
    params = json.dumps({"timeframe_s": 10, "fast": 1, "slow": 2})
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "backtest",
        "--strategy",
        "ema",
        "--params",
        params,
        "--ticks",
        path,
        "--report",
        "json",
        "--quantity",
        "1",
        stdout=out,
        stderr=err,
    )
    report = json.loads(out.getvalue())
    assert report["signals"] >= 1 and sum(report["outcomes"].values()) == report["signals"]
    assert report["trades"] == len(report["closed_trades"]) >= 1
    assert "trades" in err.getvalue() and "ticks/s" in err.getvalue()
    text = io.StringIO()
    call_command(
        "backtest",
        "--strategy",
        "ema",
        "--params",
        params,
        "--ticks",
        path,
        "--report",
        "text",
        stdout=text,
        stderr=io.StringIO(),
    )
    assert "SUMMARY" in text.getvalue() and "SIGNALS" in text.getvalue()
    with pytest.raises(CommandError, match="--capital"):
        call_command(
            "backtest",
            "--strategy",
            "ema",
            "--params",
            params,
            "--ticks",
            path,
            "--report",
            "text",
            "--capital",
            "-1",
            stdout=io.StringIO(),
        )
