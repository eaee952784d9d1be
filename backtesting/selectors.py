"""Read paths of backtest runs, scoped to the requesting user (a superuser sees every run)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from backtesting.models import BacktestRun, BacktestSweep
from core.fixed_point import SCALE

User = AbstractBaseUser | AnonymousUser
MAX_CANDLES = 600
# Candle widths the chart picks from: the smallest that keeps a run's range under MAX_CANDLES.
_WIDTHS_S = (1, 5, 15, 60, 300, 900, 3_600, 14_400, 86_400)
# A candle chart of a long, busy range reads at most this many ticks (the rest of the range is not drawn).
MAX_CANDLE_TICKS = 500_000


def runs_for_user(user: User) -> QuerySet[BacktestRun]:
    if not user.is_authenticated:
        return BacktestRun.objects.none()
    runs = BacktestRun.objects.select_related("owner")
    if getattr(user, "is_superuser", False):
        return runs
    return runs.filter(owner_id=user.pk)


def candle_width_s(start_ns: int, end_ns: int) -> int:
    span_s = max((end_ns - start_ns) // 1_000_000_000, 1)
    for width in _WIDTHS_S:
        if span_s / width <= MAX_CANDLES:
            return width
    return _WIDTHS_S[-1]


def run_candles(run: BacktestRun, symbol: str) -> list[dict[str, Any]]:
    """OHLC candles of `symbol`'s recorded ticks over the run's range, times in UTC seconds.

    Prices are floats for drawing only; the report keeps the exact figures.
    """
    from feeds.recording.tick_selectors import InstrumentNotFound, find_instrument, ticks_in_order

    try:
        instrument = find_instrument(symbol, run.feed)
    except InstrumentNotFound:
        return []
    width_ns = candle_width_s(run.start_ns, run.end_ns) * 1_000_000_000
    ticks = (
        ticks_in_order(instrument, run.start_ns, run.end_ns)
        .values_list("ts_event", "price")[:MAX_CANDLE_TICKS]
        .iterator(chunk_size=10_000)
    )
    candles: list[dict[str, Any]] = []
    bucket = None
    for ts_event, price in ticks:
        at = ts_event - ts_event % width_ns
        value = int(price) / SCALE
        if at != bucket:
            bucket = at
            candles.append({"time": at // 1_000_000_000, "open": value, "high": value, "low": value, "close": value})
        else:
            candle = candles[-1]
            candle["high"] = max(candle["high"], value)
            candle["low"] = min(candle["low"], value)
            candle["close"] = value
    return candles


def sweeps_for_user(user: User) -> QuerySet[BacktestSweep]:
    if not user.is_authenticated:
        return BacktestSweep.objects.none()
    sweeps = BacktestSweep.objects.select_related("owner")
    if getattr(user, "is_superuser", False):
        return sweeps
    return sweeps.filter(owner_id=user.pk)


# The columns of a sweep's table, in the order shown.
SWEEP_COLUMNS = ("trades", "pnl", "pnl_pct", "fees", "win_rate", "profit_factor", "max_drawdown", "sharpe", "calmar")


def sweep_rows(sweep: BacktestSweep) -> list[dict[str, Any]]:
    """The stored results, best first, with the figures in SWEEP_COLUMNS order (None: not defined)."""
    return [
        {
            "rank": rank,
            "index": row["index"],
            "params": row["params"],
            "refused": row["refused"],
            "cells": [(name, row["figures"].get(name)) for name in SWEEP_COLUMNS],
            "value": row["figures"].get(sweep.metric),
        }
        for rank, row in enumerate(sweep.results or [], start=1)
    ]
