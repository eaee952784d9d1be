"""Template filters of the backtest pages: exchange times and ratios, as people read them."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template

register = template.Library()


@register.filter
def ns_time(value: int | None) -> str:
    """UTC nanoseconds as "2026-12-01 19:00:00" (UTC)."""
    if value is None:
        return "-"
    return datetime.fromtimestamp(int(value) / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


@register.filter
def pct(value: float | None) -> str:
    """A ratio as a percentage with two decimals; "-" when there is none."""
    return "-" if value is None else f"{float(value) * 100:.2f}%"


@register.filter
def ratio(value: float | None) -> str:
    return "-" if value is None else f"{float(value):.3f}"


@register.filter
def sweep_cell(cell: tuple[str, object]) -> str:
    """One figure of a sweep's table: money as its exact string, shares as %, other ratios as `ratio`."""
    name, value = cell
    if value is None:
        return "-"
    if name in ("win_rate", "max_drawdown", "pnl_pct") and isinstance(value, int | float):
        return pct(value)
    if isinstance(value, float):
        return ratio(value)
    return str(value)
