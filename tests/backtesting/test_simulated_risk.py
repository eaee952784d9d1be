"""The simulated account's risk limits against figures computed by hand: exit levels, open positions, daily loss."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from backtesting.simulated_account import DAY_NS, SimulatedAccount, SimulatedSettings
from feeds.market import MarketData, parse_fixed
from orders.brokers.paper import PaperFees
from orders.risk_limits import AccountLimits, ExitLevels
from processor.signals import Signal, SignalKind

T0 = 1_764_460_800_000_000_000  # 00:00 UTC
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


def account(
    *, sl: str | None = None, tp: str | None = None, trail: str | None = None, **overrides: object
) -> SimulatedAccount:
    levels = ExitLevels.from_percent(*(None if v is None else Decimal(v) for v in (sl, tp, trail)))
    terms = {
        "capital": d("1000"),
        "quantity": d("2"),
        "fees": PaperFees(taker_bps=10, maker_bps=5),
        "exit_levels": levels,
    } | overrides
    return SimulatedAccount(SimulatedSettings(**terms))  # type: ignore[arg-type]


def long_at_100(acc: SimulatedAccount) -> None:
    acc.tick(tick(0, "100"))
    assert acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100")) == "placed"
    acc.tick(tick(1, "100"))  # fills 2 @ 100: fee 0.2


def test_a_stop_loss_fires_at_the_first_tick_at_its_level_and_fills_on_the_next() -> None:
    acc = account(sl="5")
    long_at_100(acc)
    for ms, price in ((2, "96"), (3, "95.01")):
        acc.tick(tick(ms, price))
    assert not acc.risk_events and acc.open_positions == 1
    acc.tick(tick(4, "95"))  # 95 <= 100 * (1 - 5%): the exit is sent, not yet filled
    assert [(e.event, e.at_ns) for e in acc.risk_events] == [("risk.stop_loss", T0 + 4 * MS)]
    assert "stop loss at 95 (entry 100, best 100)" in acc.risk_events[0].message
    assert not acc.closed
    acc.tick(tick(5, "94"))  # the market exit fills at the next tick's price
    (trade,) = acc.closed
    assert (trade.exit_reason, trade.exit_price, trade.exit_time_ns) == ("stop_loss", d("94"), T0 + 5 * MS)
    # (94 - 100) * 2 = -12; fees 0.2 + 0.188.
    assert trade.pnl == d("-12.388") and acc.realized == d("-12.388")
    assert acc.outcomes == {"placed": 2}  # the entry and the watcher's exit


def test_a_short_stop_loss_mirrors_the_long() -> None:
    acc = account(sl="5")
    acc.tick(tick(0, "100"))
    acc.signal(signal(SignalKind.ENTRY_SHORT, 0, "100"))
    acc.tick(tick(1, "100"))
    acc.tick(tick(2, "104.99"))
    assert not acc.risk_events
    acc.tick(tick(3, "105"))
    acc.tick(tick(4, "106"))
    (trade,) = acc.closed
    assert (trade.side, trade.exit_reason, trade.exit_price) == ("short", "stop_loss", d("106"))


def test_a_take_profit_fires_at_its_level() -> None:
    acc = account(sl="5", tp="10")
    long_at_100(acc)
    acc.tick(tick(2, "109.99"))
    assert not acc.risk_events
    acc.tick(tick(3, "110"))
    acc.tick(tick(4, "111"))
    (trade,) = acc.closed
    assert (trade.exit_reason, trade.exit_price) == ("take_profit", d("111"))
    # 22 gain; fees 0.2 + 0.222.
    assert trade.pnl == d("21.578")


def test_a_trailing_stop_follows_the_high() -> None:
    acc = account(trail="5")
    long_at_100(acc)
    for ms, price in ((2, "104"), (3, "110"), (4, "105"), (5, "108")):
        acc.tick(tick(ms, price))
    assert not acc.risk_events  # 105 is above 110 * 95% = 104.5
    acc.tick(tick(6, "104.5"))
    (event,) = acc.risk_events
    assert event.event == "risk.trailing_stop" and "(entry 100, best 110)" in event.message
    acc.tick(tick(7, "104"))
    (trade,) = acc.closed
    assert (trade.exit_reason, trade.exit_price) == ("trailing_stop", d("104"))


def test_the_fill_tick_does_not_fire_and_a_signal_exit_disarms_the_levels() -> None:
    acc = account(sl="5")
    acc.tick(tick(0, "100"))
    acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    acc.tick(tick(1, "100"))
    acc.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    assert not acc.works_on("ETH") and acc.working
    acc.tick(tick(2, "90"))  # fills the signal's exit; the level is not fired at a closing position
    assert not acc.risk_events
    (trade,) = acc.closed
    assert trade.exit_reason == "EXIT_LONG" and not acc.working


def test_max_open_positions_refuses_an_entry_with_the_live_reason() -> None:
    acc = account(limits=AccountLimits(max_open_positions=1, daily_loss_limit=None))
    acc.tick(tick(0, "100"))
    assert acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100")) == "placed"
    # A working entry counts as an open position, as the live gate counts a pending one.
    assert acc.signal(signal(SignalKind.ENTRY_LONG, 0, "50", symbol="ETH")) == "halted"
    (event,) = acc.risk_events
    assert (event.event, event.symbol) == ("halted", "ETH")
    assert event.message == "risk limit: 1 positions open, the account's maximum is 1"
    acc.tick(tick(1, "100"))
    acc.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    acc.tick(tick(2, "100"))
    assert acc.signal(signal(SignalKind.ENTRY_LONG, 2, "50", symbol="ETH")) == "placed"


def test_the_daily_loss_limit_halts_entries_for_the_rest_of_the_utc_day() -> None:
    acc = account(sl="5", limits=AccountLimits(max_open_positions=None, daily_loss_limit=d("10")))
    long_at_100(acc)
    acc.tick(tick(2, "95"))
    acc.tick(tick(3, "94"))  # realized -12.388 since 00:00 UTC: the limit of 10 is reached
    reason = "daily loss limit: realized -12.388 since 00:00 UTC reaches the limit of 10"
    assert [(e.event, e.at_ns, e.message) for e in acc.risk_events][-1] == (
        "risk.daily_loss_limit",
        T0 + 3 * MS,
        reason,
    )
    late = DAY_NS // MS - 1  # 23:59:59.999 the same day
    acc.tick(tick(late, "90"))
    assert acc.signal(signal(SignalKind.ENTRY_LONG, late, "90")) == "halted"
    assert acc.signal(signal(SignalKind.ENTRY_SHORT, late, "90", symbol="ETH")) == "halted"
    assert [e.message for e in acc.risk_events if e.event == "halted"] == [reason, reason]
    next_day = DAY_NS // MS
    acc.tick(tick(next_day, "90"))
    assert acc.signal(signal(SignalKind.ENTRY_LONG, next_day, "90")) == "placed"
    assert acc.outcomes == {"placed": 3, "halted": 2}


def test_the_daily_loss_counts_the_day_of_the_fills_only() -> None:
    acc = account(limits=AccountLimits(max_open_positions=None, daily_loss_limit=d("10")))
    long_at_100(acc)
    acc.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    end_of_day = DAY_NS // MS
    acc.tick(tick(end_of_day - 10, "96"))  # day one: -0.2 - 8 - 0.192 = -8.392
    acc.tick(tick(end_of_day, "96"))
    acc.signal(signal(SignalKind.ENTRY_LONG, end_of_day, "96"))
    acc.tick(tick(end_of_day + 1, "96"))
    acc.signal(signal(SignalKind.EXIT_LONG, end_of_day + 1, "96"))
    acc.tick(tick(end_of_day + 2, "93"))  # day two: -0.192 - 6 - 0.186 = -6.378; -14.77 over both
    assert acc.realized == d("-14.77") and not acc.risk_events
    assert acc.signal(signal(SignalKind.ENTRY_LONG, end_of_day + 3, "93")) == "placed"
    # A fee counts as soon as it is paid: the entry's 0.2 brings -10.19 to the limit.
    acc = account(limits=AccountLimits(max_open_positions=None, daily_loss_limit=d("10")))
    long_at_100(acc)
    acc.signal(signal(SignalKind.EXIT_LONG, 1, "100"))
    acc.tick(tick(2, "95"))  # -0.2 - 10 - 0.19 = -10.39
    assert acc.risk_events[-1].event == "risk.daily_loss_limit"


def test_an_exit_while_the_entry_is_partly_filled_closes_the_filled_part() -> None:
    acc = account()
    acc.tick(tick(0, "100"))
    acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    acc.tick(tick(1, "100", volume="0.5"))  # 0.5 of 2 filled, 1.5 still working
    assert acc.signal(signal(SignalKind.EXIT_LONG, 1, "100")) == "placed"
    assert acc.reserved_for_orders == 0  # the rest of the entry was cancelled
    acc.tick(tick(2, "102"))  # no KeyError: the exit closes the 0.5 that filled
    (trade,) = acc.closed
    assert trade.quantity == d("0.5") and trade.exit_price == d("102")
    assert acc.reserved_for_positions == 0 and acc.open_positions == 0 and not acc.working


def test_a_stop_loss_while_the_entry_is_partly_filled_cancels_the_rest() -> None:
    acc = account(sl="5")
    acc.tick(tick(0, "100"))
    acc.signal(signal(SignalKind.ENTRY_LONG, 0, "100"))
    acc.tick(tick(1, "100", volume="0.5"))
    acc.tick(tick(2, "95", volume="0"))  # a tick with no volume fills nothing but reaches the stop
    assert acc.risk_events[0].event == "risk.stop_loss" and acc.reserved_for_orders == 0
    acc.tick(tick(3, "94"))
    (trade,) = acc.closed
    assert (trade.quantity, trade.exit_reason) == (d("0.5"), "stop_loss")


T0_MS = T0 // MS


@pytest.mark.django_db
def test_the_command_takes_the_risk_options_and_reports_the_exit_reasons(tmp_path) -> None:
    # ema fast 1 / slow 2 on 10 s buckets: the rise enters long (filled at 103); a 1 % stop
    # fires at 101.9 on the tick that also crosses the averages, so the signal's exit is
    # already_closing and the trade's exit reason is the stop.
    rows = [(0, "100"), (10_000, "101"), (20_000, "103"), (21_000, "103"), (22_000, "101.9"), (23_000, "101")]
    path = tmp_path / "t.csv"
    path.write_text("ts_ms,symbol,price,volume\n" + "".join(f"{T0_MS + ms},BTC-USD,{p},5\n" for ms, p in rows))
    params = json.dumps({"timeframe_s": 10, "fast": 1, "slow": 2})
    base = ["backtest", "--strategy", "ema", "--params", params, "--ticks", str(path), "--quantity", "1"]
    out = io.StringIO()
    call_command(
        *base, "--report", "json", "--stop-loss-pct", "1", "--max-open-positions", "1", stdout=out, stderr=io.StringIO()
    )
    report = json.loads(out.getvalue())
    reasons = {row["key"] for row in report["per_exit_reason"]}
    assert "stop_loss" in reasons, report["per_exit_reason"]
    assert any(e["event"] == "risk.stop_loss" for e in report["risk_events"])
    text = io.StringIO()
    call_command(*base, "--report", "text", "--stop-loss-pct", "1", stdout=text, stderr=io.StringIO())
    assert "RISK" in text.getvalue() and "risk.stop_loss" in text.getvalue()
    for option, value in (("--stop-loss-pct", "100"), ("--trailing-stop-pct", "0"), ("--daily-loss-limit", "-1")):
        with pytest.raises(CommandError, match=option):
            call_command(*base, "--report", "text", option, value, stdout=io.StringIO())
