"""Performance of a set of closed trades, computed by the database in exact numbers.

Two reads of the trades, both from the closed-trade index (orders'
`position_closed_trades`, covering what they read): one aggregate (counts, sums,
conditional sums, maximum and minimum P&L) per exit day, per instrument, per strategy,
per account and in total (see `_totals`), from which the weekly and monthly P&L are
merged exactly (partial sums of disjoint groups add up); and the maximum drawdown, with
window functions over the trades in exit order (running sum, running maximum). Python
only adds partial integers and divides exact totals (win rate, profit factor, averages).
The ledger's realized P&L (the sum of its journal) stands beside the trades' for
comparison.

Money is fixed point (value x core.fixed_point.SCALE); ratios are Decimals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from decimal import Decimal, localcontext
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import Count, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncDay

from core.fixed_point import SCALE_DIGITS, fixed_to_str
from dashboard.selectors import accounts_for_user
from dashboard.trade_filters import TradeFilter
from feeds.models import Instrument
from orders.models import Account, CapitalLedger, Position
from processor.models import Strategy

RATIO_PLACES = Decimal("0.0001")
PERCENT_PLACES = Decimal("0.01")
MONEY_PLACES = Decimal(1).scaleb(-SCALE_DIGITS)


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


def _extreme(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return pick(a, b)


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

    def __add__(self, other: TradeStats) -> TradeStats:
        """The stats of two disjoint groups of trades together."""
        return TradeStats(
            trades=self.trades + other.trades,
            wins=self.wins + other.wins,
            losses=self.losses + other.losses,
            net_pnl=self.net_pnl + other.net_pnl,
            gross_profit=self.gross_profit + other.gross_profit,
            gross_loss=self.gross_loss + other.gross_loss,
            fees=self.fees + other.fees,
            best=_extreme(max, self.best, other.best),
            worst=_extreme(min, self.worst, other.worst),
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
    ledger_realized_pnl: int
    by_instrument: list[GroupStats] = field(default_factory=list)
    by_strategy: list[GroupStats] = field(default_factory=list)
    by_account: list[GroupStats] = field(default_factory=list)
    periods: dict[str, list[PeriodPnl]] = field(default_factory=dict)
    equity_curve: list[EquityPoint] = field(default_factory=list)


_FINE = ("day", "instrument_id", "strategy_id", "account_id")


@dataclass(frozen=True)
class _Totals:
    """The trades' stats per exit day, per instrument, per strategy, per account, and all together."""

    days: dict[date, TradeStats]
    instruments: dict[int, TradeStats]
    strategies: dict[int | None, TradeStats]
    accounts: dict[int, TradeStats]
    summary: TradeStats


def _totals(trades: QuerySet[Position], zone: tzinfo) -> _Totals:
    """The one scan of the trades behind every figure but the drawdown.

    PostgreSQL groups them by each dimension at once (GROUPING SETS: a few hundred rows
    for years of trades). SQLite has no grouping sets: it aggregates per (exit day,
    instrument, strategy, account), and the counts, sums, maxima and minima of those
    disjoint groups are added up exactly into each dimension here.
    """
    fine = trades.annotate(day=TruncDay("exit_at", tzinfo=zone))
    if connection.vendor == "postgresql":
        return _grouping_sets(fine.values(*_FINE, "realized_pnl", "fees").order_by())
    rows = [
        (_as_date(row["day"]), row["instrument_id"], row["strategy_id"], row["account_id"], TradeStats.from_row(row))
        for row in fine.values(*_FINE).annotate(**_aggregates()).order_by()
    ]
    return _Totals(
        days=_merge((row[0], row[4]) for row in rows),
        instruments=_merge((row[1], row[4]) for row in rows),
        strategies=_merge((row[2], row[4]) for row in rows),
        accounts=_merge((row[3], row[4]) for row in rows),
        summary=sum((row[4] for row in rows), TradeStats()),
    )


# Numeric aggregates once per trade, per (day, instrument, strategy, account); the
# grouping sets then only add up those few rows (the net P&L is gains + losses: a
# break-even trade adds 0).
_GROUPING_SETS_SQL = """
WITH f AS (
  SELECT day, instrument_id, strategy_id, account_id, COUNT(*) AS n,
    COUNT(*) FILTER (WHERE realized_pnl > 0) AS wins, COUNT(*) FILTER (WHERE realized_pnl < 0) AS losses,
    SUM(realized_pnl) FILTER (WHERE realized_pnl > 0) AS gains, SUM(realized_pnl) FILTER (WHERE realized_pnl < 0) AS lost,
    SUM(fees) AS fees, MAX(realized_pnl) AS best, MIN(realized_pnl) AS worst
  FROM ({trades}) t
  GROUP BY day, instrument_id, strategy_id, account_id
)
SELECT GROUPING(day, instrument_id, strategy_id, account_id), day, instrument_id, strategy_id, account_id,
  SUM(n), SUM(wins), SUM(losses), COALESCE(SUM(gains), 0) + COALESCE(SUM(lost), 0), SUM(gains), SUM(lost),
  SUM(fees), MAX(best), MIN(worst)
FROM f
GROUP BY GROUPING SETS ((day), (instrument_id), (strategy_id), (account_id), ())
"""
# GROUPING() sets a bit (first argument highest) for each column a row is not grouped by.
_BY_DAY, _BY_INSTRUMENT, _BY_STRATEGY, _BY_ACCOUNT, _ALL = 0b0111, 0b1011, 0b1101, 0b1110, 0b1111
_STAT_NAMES = ("trades", "wins", "losses", "net_pnl", "gross_profit", "gross_loss", "fees", "best", "worst")


def _grouping_sets(trades: QuerySet[Any]) -> _Totals:
    totals = _Totals(days={}, instruments={}, strategies={}, accounts={}, summary=TradeStats())
    try:
        sql, params = trades.query.sql_with_params()
    except EmptyResultSet:  # no accounts at all: nothing to read
        return totals
    with connection.cursor() as cursor:
        cursor.execute(_GROUPING_SETS_SQL.format(trades=sql), params)
        rows = cursor.fetchall()
    summary = TradeStats()
    for grouping, day, instrument_id, strategy_id, account_id, *figures in rows:
        stats = TradeStats.from_row(dict(zip(_STAT_NAMES, figures, strict=True)))
        if grouping == _BY_DAY:
            totals.days[_as_date(day)] = stats
        elif grouping == _BY_INSTRUMENT:
            totals.instruments[instrument_id] = stats
        elif grouping == _BY_STRATEGY:
            totals.strategies[strategy_id] = stats
        elif grouping == _BY_ACCOUNT:
            totals.accounts[account_id] = stats
        elif grouping == _ALL:
            summary = stats
    return _Totals(totals.days, totals.instruments, totals.strategies, totals.accounts, summary)


def _merge(pairs: Iterable[tuple[Any, TradeStats]]) -> dict[Any, TradeStats]:
    merged: dict[Any, TradeStats] = {}
    for key, stats in pairs:
        merged[key] = merged[key] + stats if key in merged else stats
    return merged


def _grouped(merged: dict[Any, TradeStats], labels: dict[Any, str]) -> list[GroupStats]:
    groups = [GroupStats(key=key, label=labels.get(key, "–"), stats=stats) for key, stats in merged.items()]
    return sorted(groups, key=lambda group: (-group.stats.net_pnl, group.label, group.key or 0))


def _labels(totals: _Totals) -> tuple[dict[Any, str], ...]:
    instruments = set(totals.instruments)
    strategies = {key for key in totals.strategies if key is not None}
    accounts = set(totals.accounts)
    return (
        {
            pk: f"{feed} / {symbol}"
            for pk, symbol, feed in Instrument.objects.filter(pk__in=instruments).values_list(
                "pk", "symbol", "feed__name"
            )
        },
        dict(Strategy.objects.filter(pk__in=strategies).values_list("pk", "name")),
        dict(Account.objects.filter(pk__in=accounts).values_list("pk", "name")),
    )


def _periods(days: dict[date, TradeStats]) -> dict[str, list[PeriodPnl]]:
    starts: dict[str, Callable[[date], date]] = {
        "day": lambda day: day,
        "week": lambda day: day - timedelta(days=day.weekday()),  # ISO weeks, from Monday
        "month": lambda day: day.replace(day=1),
    }
    result: dict[str, list[PeriodPnl]] = {}
    for name, start in starts.items():
        merged = _merge((start(day), stats) for day, stats in days.items())
        result[name] = [
            PeriodPnl(start=key, trades=merged[key].trades, pnl=merged[key].net_pnl) for key in sorted(merged)
        ]
    return result


def _as_date(value: datetime | date) -> date:
    return value.date() if isinstance(value, datetime) else value


_DRAWDOWN_SQL = """
WITH t AS ({trades}),
c AS (
  SELECT id, exit_at,
         CAST(SUM({pnl}) OVER (ORDER BY exit_at, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS {total})
           AS pnl
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


# Below this sum of |P&L| every running total fits a 64-bit integer.
_INT64_LIMIT = 2**63


def _drawdown(trades: QuerySet[Position], capital: int, *, total_abs_pnl: int) -> Drawdown:
    """Peak-to-trough of capital + cumulative P&L (the start, before any trade, is a peak).

    `total_abs_pnl` (the sum of |P&L|) bounds every running total: below 2**63 the P&L
    is summed as bigint, exactly, which PostgreSQL does far faster than numeric.
    """
    try:
        sql, params = trades.order_by().values("id", "exit_at", "realized_pnl").query.sql_with_params()
    except EmptyResultSet:  # no accounts at all: the query has nothing to read
        return Drawdown(peak_equity=capital)
    with connection.cursor() as cursor:
        # Bounded, the running total is bigint all the way (sum, running maximum, the gap).
        summed = "CAST(realized_pnl AS bigint)" if total_abs_pnl < _INT64_LIMIT else "realized_pnl"
        total = "bigint" if total_abs_pnl < _INT64_LIMIT else "numeric"
        cursor.execute(_DRAWDOWN_SQL.format(trades=sql, pnl=summed, total=total), params)
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


def ledger_realized_pnl(account_ids: QuerySet[Any]) -> int:
    """Realized P&L of the accounts as their ledgers hold it: the sum of their journal's
    realized deltas (the ledger watchdog checks the two agree), entry fees of open
    positions included."""
    total = CapitalLedger.objects.filter(account_id__in=account_ids).aggregate(s=Sum("realized_pnl"))["s"]
    return _money(total)


def performance_report(
    trades: QuerySet[Position], *, capital: int, zone: tzinfo, account_ids: QuerySet[Any]
) -> PerformanceReport:
    """The figures of `trades` (already scoped and filtered); `capital` starts the equity curve."""
    with transaction.atomic():
        _sort_in_memory()
        return _report(trades.order_by(), capital=capital, zone=zone, account_ids=account_ids)


# Enough for the aggregate's hash table and the drawdown's window over a few hundred
# thousand trades: below it PostgreSQL sorts them through temporary files.
REPORT_WORK_MEM = "64MB"


def _sort_in_memory() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL work_mem = '{REPORT_WORK_MEM}'")
            cursor.execute("SET LOCAL jit = off")


def _report(trades: QuerySet[Position], *, capital: int, zone: tzinfo, account_ids: QuerySet[Any]) -> PerformanceReport:
    totals = _totals(trades, zone)
    instruments, strategies, accounts = _labels(totals)
    periods = _periods(totals.days)
    summary = totals.summary
    return PerformanceReport(
        capital=capital,
        summary=summary,
        drawdown=_drawdown(trades, capital, total_abs_pnl=summary.gross_profit - summary.gross_loss),
        ledger_realized_pnl=ledger_realized_pnl(account_ids),
        by_instrument=_grouped(dict(totals.instruments), instruments),
        by_strategy=_grouped(dict(totals.strategies), strategies),
        by_account=_grouped(dict(totals.accounts), accounts),
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
        "ledger_realized_pnl": fixed_to_str(report.ledger_realized_pnl),
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
