"""The backtest report's figures against a fixture computed by hand.

Capital 1,000 over three UTC days; four trades on two instruments:
  BTC long  1 @ 100 -> 110, fees 1: +9    (day 1, 01:00-02:00, signal)
  ETH short 2 @ 50  -> 60,  fees 2: -22   (day 1 03:00 - day 2 01:00, stop loss)
  BTC long  1 @ 100 -> 105, fees 1: +4    (day 2, 02:00-04:00, signal)
  BTC long  1 @ 100 -> 120, fees 2: +18   (day 3, 00:00-12:00, take profit)
Equity 1000 -> 1009 -> 987 -> 991 -> 1009: the drawdown is 22 from the 1009 peak
(day 1 02:00), recovered at day 3 12:00, so 58 hours. Open 1 + 22 + 2 + 12 = 37 of 72 hours.
"""

from __future__ import annotations

import math
import statistics
from datetime import UTC, date, datetime

import pytest

from core.fixed_point import SCALE
from processor.backtest_report import ClosedTrade, build_report, report_as_json, report_as_text

HOUR_NS = 3600 * 10**9
DAY1 = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp()) * 10**9


def at(hours: float) -> int:
    return DAY1 + int(hours * HOUR_NS)


def money(value: float) -> int:
    return int(round(value * SCALE))


def trade(
    instrument: str,
    side: str,
    qty: int,
    entry: tuple[float, int],
    exit_: tuple[float, int],
    fees: int,
    pnl: int,
    reason: str,
) -> ClosedTrade:
    return ClosedTrade(
        instrument=instrument,
        side=side,
        quantity=money(qty),
        entry_time_ns=at(entry[0]),
        entry_price=money(entry[1]),
        exit_time_ns=at(exit_[0]),
        exit_price=money(exit_[1]),
        fees=money(fees),
        pnl=money(pnl),
        exit_reason=reason,
    )


TRADES = [
    trade("ETH", "short", 2, (3, 50), (25, 60), 2, -22, "stop_loss"),
    trade("BTC", "long", 1, (1, 100), (2, 110), 1, 9, "signal"),
    trade("BTC", "long", 1, (26, 100), (28, 105), 1, 4, "signal"),
    trade("BTC", "long", 1, (48, 100), (60, 120), 2, 18, "take_profit"),
]


@pytest.fixture
def report():
    return build_report(TRADES, starting_capital=money(1000), start_ns=at(0), end_ns=at(72))


def test_totals_and_ratios(report) -> None:
    assert (report.trades, report.wins, report.draws, report.losses) == (4, 3, 0, 1)
    assert report.pnl == money(9) and report.fees == money(6)
    assert report.final_equity == money(1009)
    assert report.pnl_pct == pytest.approx(0.009)
    assert report.win_rate == 0.75
    assert report.profit_factor == pytest.approx(31 / 22)
    assert report.average_win == 31 * SCALE // 3
    assert report.average_loss == money(-22)


def test_equity_curve_and_drawdown(report) -> None:
    assert [equity for _, equity in report.equity_curve] == [money(v) for v in (1000, 1009, 987, 991, 1009)]
    assert report.equity_curve[0][0] == at(0)
    dd = report.drawdown
    assert dd.amount == money(22)
    assert dd.pct == pytest.approx(22 / 1009)
    assert (dd.peak_ns, dd.trough_ns) == (at(2), at(25))
    assert dd.duration_ns == 58 * HOUR_NS


def test_an_unrecovered_drawdown_lasts_to_the_end_of_the_range() -> None:
    report = build_report(TRADES[:2], starting_capital=money(1000), start_ns=at(0), end_ns=at(72))
    assert report.drawdown.amount == money(22)
    assert report.drawdown.duration_ns == 70 * HOUR_NS


def test_daily_pnl_and_risk_ratios(report) -> None:
    assert report.daily == ((date(2026, 3, 1), money(9)), (date(2026, 3, 2), money(-18)), (date(2026, 3, 3), money(18)))
    returns = [9 / 1000, -18 / 1009, 18 / 991]
    sharpe = statistics.mean(returns) / statistics.stdev(returns) * math.sqrt(365)
    sortino = statistics.mean(returns) / math.sqrt((18 / 1009) ** 2 / 3) * math.sqrt(365)
    calmar = (0.009 / (3 / 365)) / (22 / 1009)
    assert report.sharpe == pytest.approx(sharpe)
    assert report.sortino == pytest.approx(sortino)
    assert report.calmar == pytest.approx(calmar)
    assert report.exposure == pytest.approx(37 / 72)


def test_breakdowns(report) -> None:
    per_instrument = [(r.key, r.trades, r.wins, r.losses, r.pnl, r.fees) for r in report.per_instrument]
    assert per_instrument == [("BTC", 3, 3, 0, money(31), money(4)), ("ETH", 1, 0, 1, money(-22), money(2))]
    per_reason = [(r.key, r.trades, r.pnl) for r in report.per_exit_reason]
    assert per_reason == [("take_profit", 1, money(18)), ("signal", 2, money(13)), ("stop_loss", 1, money(-22))]


def test_json_is_exact_and_text_has_every_section(report) -> None:
    data = report_as_json(report)
    assert data["pnl"] == "9" and data["fees"] == "6" and data["max_drawdown"]["amount"] == "22"
    assert data["max_drawdown"]["duration_s"] == 58 * 3600
    assert data["average_win"] == "10.333333333333"
    assert [t["exit_reason"] for t in data["closed_trades"]] == ["signal", "stop_loss", "signal", "take_profit"]
    assert data["closed_trades"][1]["pnl_pct"] == pytest.approx(-0.22)
    text = report_as_text(report)
    for heading in ("SUMMARY", "PER INSTRUMENT", "PER EXIT REASON", "DAILY", "Sharpe", "Max drawdown"):
        assert heading in text
    assert "2 days, 10:00:00" in text  # the 58-hour drawdown


def test_no_trades_and_bad_ranges() -> None:
    empty = build_report([], starting_capital=money(1000), start_ns=at(0), end_ns=at(24))
    assert (empty.trades, empty.pnl, empty.drawdown.amount, empty.exposure) == (0, 0, 0, 0.0)
    assert empty.profit_factor is None and empty.sharpe is None and empty.calmar is None
    short = build_report(TRADES[:2], starting_capital=money(1000), start_ns=at(0), end_ns=at(23))
    assert short.drawdown.amount > 0 and short.calmar is None  # under a day: no annualised figure
    assert "SUMMARY" in report_as_text(empty)
    with pytest.raises(ValueError):
        build_report([], starting_capital=money(1000), start_ns=at(2), end_ns=at(1))
    with pytest.raises(ValueError):
        build_report([], starting_capital=0, start_ns=at(0), end_ns=at(1))
