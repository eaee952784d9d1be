"""The figures a trader decides with, computed from a backtest's closed trades.

Money stays exact: every amount is a fixed-point integer (core.fixed_point.SCALE) and
sums are integer sums. Only the ratios (returns, Sharpe, Sortino, Calmar, win rate,
exposure) are floats, because they are statistics, not money.

Conventions, chosen to match what traders compare against (Freqtrade's report):
- A trade's `pnl` is its net result: exit value minus entry value minus both fees.
- The equity curve is realised equity: the starting capital plus the net P&L of every
  trade closed so far, one point at each exit (and one at the start of the range).
- A drawdown is measured on that curve, from a peak to the lowest point before the
  curve reaches the peak again; its duration runs from the peak to that recovery, or
  to the end of the range when the curve never recovers.
- Daily figures are per UTC calendar day of the exit. Sharpe and Sortino use the daily
  returns (the day's P&L over the equity at the day's start) of every day in the range,
  days without a trade counting as 0, annualised with the square root of 365 (crypto
  venues trade every day). Calmar is the annualised return over the maximum drawdown %,
  for a range of a day or more.
- Exposure is the share of the range during which at least one position was open.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from core.fixed_point import SCALE, fixed_to_str

NS_PER_S = 1_000_000_000
DAYS_PER_YEAR = 365


@dataclass(frozen=True)
class ClosedTrade:
    """One round trip: `quantity` entered at `entry_price` and closed at `exit_price`.

    Prices, quantity, fees and pnl are fixed-point integers; times are UTC nanoseconds.
    """

    instrument: str
    side: str  # "long" or "short"
    quantity: int
    entry_time_ns: int
    entry_price: int
    exit_time_ns: int
    exit_price: int
    fees: int
    pnl: int
    exit_reason: str
    strategy: str = ""

    @property
    def duration_ns(self) -> int:
        return self.exit_time_ns - self.entry_time_ns

    @property
    def entry_value(self) -> int:
        return self.quantity * self.entry_price // SCALE

    @property
    def pnl_pct(self) -> float:
        """Net P&L as a share of the entry value (0.0 for a zero-value entry)."""
        return self.pnl / self.entry_value if self.entry_value else 0.0


@dataclass(frozen=True)
class Drawdown:
    amount: int = 0
    pct: float = 0.0
    peak_ns: int | None = None
    trough_ns: int | None = None
    duration_ns: int = 0


@dataclass(frozen=True)
class Breakdown:
    """The trades that share a key (an instrument or an exit reason)."""

    key: str
    trades: int
    wins: int
    losses: int
    pnl: int
    fees: int

    @property
    def win_rate(self) -> float:
        return self.wins / self.trades if self.trades else 0.0


@dataclass(frozen=True)
class BacktestReport:
    start_ns: int
    end_ns: int
    starting_capital: int
    trades: int
    wins: int
    draws: int
    losses: int
    pnl: int
    fees: int
    gross_profit: int
    gross_loss: int
    final_equity: int
    drawdown: Drawdown
    sharpe: float | None
    sortino: float | None
    calmar: float | None
    exposure: float
    per_instrument: tuple[Breakdown, ...]
    per_exit_reason: tuple[Breakdown, ...]
    daily: tuple[tuple[date, int], ...]
    equity_curve: tuple[tuple[int, int], ...]
    closed: tuple[ClosedTrade, ...] = field(repr=False, default=())

    @property
    def pnl_pct(self) -> float:
        return self.pnl / self.starting_capital if self.starting_capital else 0.0

    @property
    def win_rate(self) -> float:
        return self.wins / self.trades if self.trades else 0.0

    @property
    def profit_factor(self) -> float | None:
        """Gross profit over gross loss; None when nothing lost (the ratio is unbounded)."""
        return self.gross_profit / -self.gross_loss if self.gross_loss else None

    @property
    def average_win(self) -> int | None:
        return self.gross_profit // self.wins if self.wins else None

    @property
    def average_loss(self) -> int | None:
        # Toward zero, as the average win: -7 // 2 would round away from it.
        return -(-self.gross_loss // self.losses) if self.losses else None


def build_report(trades: Iterable[ClosedTrade], *, starting_capital: int, start_ns: int, end_ns: int) -> BacktestReport:
    """Return the report of `trades` closed inside [start_ns, end_ns] from `starting_capital`."""
    if end_ns < start_ns:
        raise ValueError("the range ends before it starts")
    if starting_capital <= 0:
        raise ValueError("the starting capital must be positive")
    closed = tuple(sorted(trades, key=lambda t: (t.exit_time_ns, t.entry_time_ns)))
    wins = [t for t in closed if t.pnl > 0]
    losses = [t for t in closed if t.pnl < 0]
    curve = _equity_curve(closed, starting_capital, start_ns)
    daily = _daily_pnl(closed)
    returns = _daily_returns(daily, starting_capital, start_ns, end_ns)
    drawdown = _max_drawdown(curve, end_ns)
    pnl = sum(t.pnl for t in closed)
    return BacktestReport(
        start_ns=start_ns,
        end_ns=end_ns,
        starting_capital=starting_capital,
        trades=len(closed),
        wins=len(wins),
        draws=len(closed) - len(wins) - len(losses),
        losses=len(losses),
        pnl=pnl,
        fees=sum(t.fees for t in closed),
        gross_profit=sum(t.pnl for t in wins),
        gross_loss=sum(t.pnl for t in losses),
        final_equity=starting_capital + pnl,
        drawdown=drawdown,
        sharpe=_sharpe(returns),
        sortino=_sortino(returns),
        calmar=_calmar(pnl / starting_capital, end_ns - start_ns, drawdown.pct),
        exposure=_exposure(closed, start_ns, end_ns),
        per_instrument=_breakdown(closed, lambda t: t.instrument),
        per_exit_reason=_breakdown(closed, lambda t: t.exit_reason),
        daily=tuple(sorted(daily.items())),
        equity_curve=curve,
        closed=closed,
    )


def _equity_curve(closed: Sequence[ClosedTrade], capital: int, start_ns: int) -> tuple[tuple[int, int], ...]:
    points = [(start_ns, capital)]
    equity = capital
    for trade in closed:
        equity += trade.pnl
        points.append((trade.exit_time_ns, equity))
    return tuple(points)


def _max_drawdown(curve: Sequence[tuple[int, int]], end_ns: int) -> Drawdown:
    worst = Drawdown()
    peak_ns, peak = curve[0]
    trough_ns, trough = peak_ns, peak
    for at, equity in curve[1:]:
        if equity >= peak:
            worst = _deeper(worst, peak, peak_ns, trough, trough_ns, recovered_ns=at)
            peak_ns, peak, trough_ns, trough = at, equity, at, equity
        elif equity < trough:
            trough_ns, trough = at, equity
    return _deeper(worst, peak, peak_ns, trough, trough_ns, recovered_ns=end_ns)


def _deeper(worst: Drawdown, peak: int, peak_ns: int, trough: int, trough_ns: int, *, recovered_ns: int) -> Drawdown:
    amount = peak - trough
    if amount <= worst.amount:
        return worst
    return Drawdown(
        amount=amount,
        pct=amount / peak if peak > 0 else 1.0,
        peak_ns=peak_ns,
        trough_ns=trough_ns,
        duration_ns=recovered_ns - peak_ns,
    )


def utc_day(ns: int) -> date:
    return datetime.fromtimestamp(ns // NS_PER_S, tz=UTC).date()


def _daily_pnl(closed: Sequence[ClosedTrade]) -> dict[date, int]:
    days: dict[date, int] = {}
    for trade in closed:
        day = utc_day(trade.exit_time_ns)
        days[day] = days.get(day, 0) + trade.pnl
    return days


def _daily_returns(daily: dict[date, int], capital: int, start_ns: int, end_ns: int) -> list[float]:
    returns = []
    equity = capital
    # The range ends just before end_ns: a range ending at midnight has no day after it.
    day, last = utc_day(start_ns), utc_day(max(start_ns, end_ns - 1))
    while day <= last:
        pnl = daily.get(day, 0)
        returns.append(pnl / equity if equity > 0 else 0.0)
        equity += pnl
        day += timedelta(days=1)
    return returns


def _sharpe(returns: Sequence[float]) -> float | None:
    if len(returns) < 2:
        return None
    mean = sum(returns) / len(returns)
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / (len(returns) - 1))
    return mean / std * math.sqrt(DAYS_PER_YEAR) if std > 0 else None


def _sortino(returns: Sequence[float]) -> float | None:
    """Mean daily return over the downside deviation (losing days' squares over all days)."""
    if len(returns) < 2:
        return None
    mean = sum(returns) / len(returns)
    downside = math.sqrt(sum(min(r, 0.0) ** 2 for r in returns) / len(returns))
    return mean / downside * math.sqrt(DAYS_PER_YEAR) if downside > 0 else None


def _calmar(total_return: float, range_ns: int, drawdown_pct: float) -> float | None:
    # Annualising a return measured over minutes gives numbers in the hundreds of thousands
    # that say nothing: under a day, as Sharpe and Sortino under two, there is no figure.
    if drawdown_pct <= 0 or range_ns < 86_400 * NS_PER_S:
        return None
    years = range_ns / NS_PER_S / 86_400 / DAYS_PER_YEAR
    return (total_return / years) / drawdown_pct


def _exposure(closed: Sequence[ClosedTrade], start_ns: int, end_ns: int) -> float:
    """The share of the range covered by the union of the trades' open intervals."""
    if end_ns <= start_ns:
        return 0.0
    covered = 0
    reach = start_ns
    for trade in sorted(closed, key=lambda t: t.entry_time_ns):
        begin, end = max(trade.entry_time_ns, reach), min(trade.exit_time_ns, end_ns)
        if end > begin:
            covered += end - begin
            reach = end
    return covered / (end_ns - start_ns)


def _breakdown(closed: Sequence[ClosedTrade], key: Any) -> tuple[Breakdown, ...]:
    groups: dict[str, list[ClosedTrade]] = {}
    for trade in closed:
        groups.setdefault(key(trade), []).append(trade)
    rows = [
        Breakdown(
            key=name,
            trades=len(group),
            wins=sum(1 for t in group if t.pnl > 0),
            losses=sum(1 for t in group if t.pnl < 0),
            pnl=sum(t.pnl for t in group),
            fees=sum(t.fees for t in group),
        )
        for name, group in groups.items()
    ]
    return tuple(sorted(rows, key=lambda row: (-row.pnl, row.key)))


def _ratio(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def report_as_json(report: BacktestReport) -> dict[str, Any]:
    """The report as JSON-ready values: money as exact decimal strings, ratios as floats."""

    def money(value: int | None) -> str | None:
        return None if value is None else fixed_to_str(value)

    def rows(breakdowns: Sequence[Breakdown]) -> list[dict[str, Any]]:
        return [
            {
                "key": row.key,
                "trades": row.trades,
                "wins": row.wins,
                "losses": row.losses,
                "win_rate": _ratio(row.win_rate),
                "pnl": money(row.pnl),
                "fees": money(row.fees),
            }
            for row in breakdowns
        ]

    drawdown = report.drawdown
    return {
        "start_ns": report.start_ns,
        "end_ns": report.end_ns,
        "starting_capital": money(report.starting_capital),
        "final_equity": money(report.final_equity),
        "trades": report.trades,
        "wins": report.wins,
        "draws": report.draws,
        "losses": report.losses,
        "win_rate": _ratio(report.win_rate),
        "pnl": money(report.pnl),
        "pnl_pct": _ratio(report.pnl_pct),
        "fees": money(report.fees),
        "profit_factor": _ratio(report.profit_factor),
        "average_win": money(report.average_win),
        "average_loss": money(report.average_loss),
        "max_drawdown": {
            "amount": money(drawdown.amount),
            "pct": _ratio(drawdown.pct),
            "peak_ns": drawdown.peak_ns,
            "trough_ns": drawdown.trough_ns,
            "duration_s": drawdown.duration_ns / NS_PER_S,
        },
        "sharpe": _ratio(report.sharpe),
        "sortino": _ratio(report.sortino),
        "calmar": _ratio(report.calmar),
        "exposure": _ratio(report.exposure),
        "per_instrument": rows(report.per_instrument),
        "per_exit_reason": rows(report.per_exit_reason),
        "daily": [{"day": day.isoformat(), "pnl": money(pnl)} for day, pnl in report.daily],
        "equity_curve": [[at, money(equity)] for at, equity in report.equity_curve],
        "closed_trades": [
            {
                "instrument": t.instrument,
                "strategy": t.strategy,
                "side": t.side,
                "quantity": money(t.quantity),
                "entry_time_ns": t.entry_time_ns,
                "entry_price": money(t.entry_price),
                "exit_time_ns": t.exit_time_ns,
                "exit_price": money(t.exit_price),
                "duration_s": t.duration_ns / NS_PER_S,
                "fees": money(t.fees),
                "pnl": money(t.pnl),
                "pnl_pct": _ratio(t.pnl_pct),
                "exit_reason": t.exit_reason,
            }
            for t in report.closed
        ],
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.2f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *body, strict=False)]
    line = "  ".join(f"{{:>{w}}}" for w in widths)
    return [line.format(*header), "  ".join("-" * w for w in widths), *(line.format(*row) for row in body)]


def report_as_text(report: BacktestReport) -> str:
    """The report as the text tables the command line prints."""
    money = fixed_to_str
    drawdown = report.drawdown
    summary = [
        ("Trades", str(report.trades)),
        ("Win / draw / loss", f"{report.wins} / {report.draws} / {report.losses}"),
        ("Win rate", _pct(report.win_rate)),
        ("Net P&L", f"{money(report.pnl)} ({_pct(report.pnl_pct)})"),
        ("Fees", money(report.fees)),
        ("Final equity", money(report.final_equity)),
        ("Profit factor", _num(report.profit_factor)),
        ("Average win", "-" if report.average_win is None else money(report.average_win)),
        ("Average loss", "-" if report.average_loss is None else money(report.average_loss)),
        ("Max drawdown", f"{money(drawdown.amount)} ({_pct(drawdown.pct)})"),
        ("Drawdown duration", str(timedelta(seconds=drawdown.duration_ns // NS_PER_S))),
        ("Sharpe", _num(report.sharpe)),
        ("Sortino", _num(report.sortino)),
        ("Calmar", _num(report.calmar)),
        ("Exposure", _pct(report.exposure)),
    ]
    width = max(len(name) for name, _ in summary)
    lines = ["SUMMARY", *(f"{name:<{width}}  {value}" for name, value in summary)]
    for title, breakdown in (("PER INSTRUMENT", report.per_instrument), ("PER EXIT REASON", report.per_exit_reason)):
        lines += ["", title]
        lines += _table(
            ("key", "trades", "win rate", "pnl", "fees"),
            [(row.key, str(row.trades), _pct(row.win_rate), money(row.pnl), money(row.fees)) for row in breakdown],
        )
    lines += ["", "DAILY"]
    lines += _table(("day", "pnl"), [(day.isoformat(), money(pnl)) for day, pnl in report.daily])
    return "\n".join(lines) + "\n"
