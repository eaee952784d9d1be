"""Performance of a set of closed trades, computed by the database in exact numbers.

Every figure is an aggregate over the trades' positions (whose figures the fill handlers
keep from the fills) or over the ledger journal: sums, counts and conditional sums per
instrument, strategy, account and day/week/month; the maximum drawdown with window
functions over the trades in exit order. Python only divides the exact totals (win
rate, profit factor, averages) and adds up the daily totals into the equity curve.

Money is fixed point (value x core.fixed_point.SCALE); ratios are Decimals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from decimal import Decimal, localcontext
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncDay, TruncMonth, TruncWeek

from core.fixed_point import SCALE_DIGITS, fixed_to_str
from dashboard.selectors import accounts_for_user
from dashboard.trade_filters import TradeFilter
from orders.models import CapitalLedger, LedgerEntry, Position

RATIO_PLACES = Decimal("0.0001")
PERCENT_PLACES = Decimal("0.01")
MONEY_PLACES = Decimal(1).scaleb(-SCALE_DIGITS)
PERIODS = {"day": TruncDay, "week": TruncWeek, "month": TruncMonth}


def _aggregates() -> dict[str, Any]:
    won, lost = Q(realized_pnl__gt=0), Q(realized_pnl__lt=0)
    return {
        "trades": Count("id"),
        "wins": Count("id", filter=won),
        "losses": Count("id", filter=lost),
        "net_pnl": Sum("realized_pnl"),
        "gross_profit": Sum("realized_pnl", filter=won),
        "gross_loss": Sum("realized_pnl", filter=lost),
        "fees": Sum("fees"),
        "best": Max("realized_pnl"),
        "worst": Min("realized_pnl"),
    }


def _ratio(numerator: int, denominator: int, places: Decimal) -> Decimal | None:
    if not denominator:
        return None
    with localcontext() as context:
        context.prec = 60
        return (Decimal(numerator) / Decimal(denominator)).quantize(places)


def decimal_text(value: Decimal) -> str:
    """A Decimal without exponent or trailing zeros beyond the point ("12.5", "3", "-0.25")."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _money(value: Any) -> int:
    # PostgreSQL sums numeric to Decimal, SQLite bigint to int; both integral here.
    return 0 if value is None else int(value)


@dataclass(frozen=True)
class TradeStats:
    """Counts and money (fixed point) of a group of trades."""

    trades: int = 0
    wins: int = 0
    losses: int = 0
    net_pnl: int = 0
    gross_profit: int = 0
    gross_loss: int = 0  # negative or 0
    fees: int = 0
    best: int | None = None
    worst: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TradeStats:
        trades = int(row.get("trades") or 0)
        return cls(
            trades=trades,
            wins=int(row.get("wins") or 0),
            losses=int(row.get("losses") or 0),
            net_pnl=_money(row.get("net_pnl")),
            gross_profit=_money(row.get("gross_profit")),
            gross_loss=_money(row.get("gross_loss")),
            fees=_money(row.get("fees")),
            best=None if not trades else _money(row.get("best")),
            worst=None if not trades else _money(row.get("worst")),
        )

    @property
    def win_rate(self) -> Decimal | None:
        """Winning trades in percent of all trades."""
        return _ratio(self.wins * 100, self.trades, PERCENT_PLACES)

    @property
    def profit_factor(self) -> Decimal | None:
        """Gross profit / gross loss; None without a losing trade."""
        return _ratio(self.gross_profit, -self.gross_loss, RATIO_PLACES)

    @property
    def average_win(self) -> Decimal | None:
        return _ratio(self.gross_profit, self.wins * 10**SCALE_DIGITS, MONEY_PLACES)

    @property
    def average_loss(self) -> Decimal | None:
        return _ratio(self.gross_loss, self.losses * 10**SCALE_DIGITS, MONEY_PLACES)

    def as_json(self) -> dict[str, Any]:
        def text(value: Decimal | None) -> str | None:
            return None if value is None else decimal_text(value)

        return {
            "trades": self.trades,
            "wins": self.wins,
            "losses": self.losses,
            "net_pnl": fixed_to_str(self.net_pnl),
            "gross_profit": fixed_to_str(self.gross_profit),
            "gross_loss": fixed_to_str(self.gross_loss),
            "fees": fixed_to_str(self.fees),
            "best": None if self.best is None else fixed_to_str(self.best),
            "worst": None if self.worst is None else fixed_to_str(self.worst),
            "win_rate": text(self.win_rate),
            "profit_factor": text(self.profit_factor),
            "average_win": text(self.average_win),
            "average_loss": text(self.average_loss),
        }


@dataclass(frozen=True)
class GroupStats:
    key: int | None
    label: str
    stats: TradeStats


@dataclass(frozen=True)
class PeriodPnl:
    start: date
    trades: int
    pnl: int


@dataclass(frozen=True)
class EquityPoint:
    day: date
    equity: int


@dataclass(frozen=True)
class Drawdown:
    """The largest fall of equity from a running peak, over the trades in exit order."""

    amount: int = 0  # >= 0
    peak_equity: int = 0  # the equity (capital + cumulative P&L) at that peak
    percent: Decimal | None = None  # amount / peak equity x 100


@dataclass(frozen=True)
class PerformanceReport:
    capital: int
    summary: TradeStats
    drawdown: Drawdown
    journal_realized_pnl: int
    by_instrument: list[GroupStats] = field(default_factory=list)
    by_strategy: list[GroupStats] = field(default_factory=list)
    by_account: list[GroupStats] = field(default_factory=list)
    periods: dict[str, list[PeriodPnl]] = field(default_factory=dict)
    equity_curve: list[EquityPoint] = field(default_factory=list)


def _grouped(trades: QuerySet[Position], key: str, *label: str) -> list[GroupStats]:
    rows = trades.values(key, *label).annotate(**_aggregates()).order_by("-net_pnl", key)
    return [
        GroupStats(
            key=row[key],
            label=" / ".join(str(row[name] or "–") for name in reversed(label)),
            stats=TradeStats.from_row(row),
        )
        for row in rows
    ]


def _periods(trades: QuerySet[Position], zone: tzinfo) -> dict[str, list[PeriodPnl]]:
    result: dict[str, list[PeriodPnl]] = {}
    for name, trunc in PERIODS.items():
        rows = (
            trades.annotate(period=trunc("exit_at", tzinfo=zone))
            .values("period")
            .annotate(trades=Count("id"), pnl=Sum("realized_pnl"))
            .order_by("period")
        )
        result[name] = [
            PeriodPnl(start=_as_date(row["period"]), trades=row["trades"], pnl=_money(row["pnl"])) for row in rows
        ]
    return result


def _as_date(value: datetime | date) -> date:
    return value.date() if isinstance(value, datetime) else value


_DRAWDOWN_SQL = """
WITH t AS ({trades}),
c AS (
  SELECT id, exit_at,
         SUM(realized_pnl) OVER (ORDER BY exit_at, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS pnl
  FROM t
),
p AS (
  SELECT id, exit_at, pnl,
         MAX(pnl) OVER (ORDER BY exit_at, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS top
  FROM c
)
SELECT CASE WHEN top > 0 THEN top ELSE 0 END AS peak, pnl
FROM p
ORDER BY (CASE WHEN top > 0 THEN top ELSE 0 END) - pnl DESC, exit_at, id
LIMIT 1
"""


def _drawdown(trades: QuerySet[Position], capital: int) -> Drawdown:
    """Peak-to-trough of capital + cumulative P&L (the start, before any trade, is a peak)."""
    sql, params = trades.order_by().values("id", "exit_at", "realized_pnl").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(_DRAWDOWN_SQL.format(trades=sql), params)
        row = cursor.fetchone()
    if row is None:
        return Drawdown(peak_equity=capital)
    peak, pnl = _money(row[0]), _money(row[1])
    amount = max(peak - pnl, 0)
    peak_equity = capital + peak
    percent = _ratio(amount * 100, peak_equity, PERCENT_PLACES) if peak_equity > 0 else None
    return Drawdown(amount=amount, peak_equity=peak_equity, percent=percent)


def _equity_curve(daily: list[PeriodPnl], capital: int) -> list[EquityPoint]:
    equity = capital
    points = []
    for period in daily:
        equity += period.pnl
        points.append(EquityPoint(day=period.start, equity=equity))
    return points


def journal_realized_pnl(account_ids: QuerySet[Any]) -> int:
    """Realized P&L as the ledger journal has it (fees of open positions included)."""
    total = LedgerEntry.objects.filter(account_id__in=account_ids).aggregate(s=Sum("delta_realized_pnl"))["s"]
    return _money(total)


def performance_report(
    trades: QuerySet[Position], *, capital: int, zone: tzinfo, account_ids: QuerySet[Any]
) -> PerformanceReport:
    """The figures of `trades` (already scoped and filtered); `capital` starts the equity curve."""
    trades = trades.order_by()
    summary = TradeStats.from_row(trades.aggregate(**_aggregates()))
    periods = _periods(trades, zone)
    return PerformanceReport(
        capital=capital,
        summary=summary,
        drawdown=_drawdown(trades, capital),
        journal_realized_pnl=journal_realized_pnl(account_ids),
        by_instrument=_grouped(trades, "instrument_id", "instrument__symbol", "instrument__feed__name"),
        by_strategy=_grouped(trades, "strategy_id", "strategy__name"),
        by_account=_grouped(trades, "account_id", "account__name"),
        periods=periods,
        equity_curve=_equity_curve(periods["day"], capital),
    )


def report_for(filtered: TradeFilter) -> PerformanceReport:
    """The performance of a valid TradeFilter's trades; the capital is that of the accounts in scope."""
    user = filtered.request.user
    accounts = accounts_for_user(user)
    account = filtered.form.cleaned_data.get("account")
    if account is not None:
        accounts = accounts.filter(pk=account)
    account_ids = accounts.values("pk")
    capital = CapitalLedger.objects.filter(account_id__in=account_ids).aggregate(s=Sum("allocated_capital"))["s"]
    return performance_report(filtered.qs, capital=_money(capital), zone=filtered.zone, account_ids=account_ids)


def report_json(report: PerformanceReport) -> dict[str, Any]:
    """The report as the API sends it: money and ratios as exact decimal strings."""

    def groups(rows: list[GroupStats], key: str) -> list[dict[str, Any]]:
        return [{key: row.key, "name": row.label, **row.stats.as_json()} for row in rows]

    drawdown = report.drawdown
    return {
        "capital": fixed_to_str(report.capital),
        "summary": report.summary.as_json(),
        "max_drawdown": fixed_to_str(drawdown.amount),
        "max_drawdown_percent": None if drawdown.percent is None else decimal_text(drawdown.percent),
        "drawdown_peak_equity": fixed_to_str(drawdown.peak_equity),
        "journal_realized_pnl": fixed_to_str(report.journal_realized_pnl),
        "by_instrument": groups(report.by_instrument, "instrument"),
        "by_strategy": groups(report.by_strategy, "strategy"),
        "by_account": groups(report.by_account, "account"),
        **{
            name: [{"start": p.start.isoformat(), "trades": p.trades, "pnl": fixed_to_str(p.pnl)} for p in rows]
            for name, rows in (
                ("daily", report.periods.get("day", [])),
                ("weekly", report.periods.get("week", [])),
                ("monthly", report.periods.get("month", [])),
            )
        },
        "equity_curve": [{"day": p.day.isoformat(), "equity": fixed_to_str(p.equity)} for p in report.equity_curve],
    }
