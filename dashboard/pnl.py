"""Unrealized P&L of a position, exactly, in fixed point (core.fixed_point.SCALE)."""

from __future__ import annotations

from core.fixed_point import SCALE
from orders.money import notional


def unrealized_pnl(
    *, side: str, quantity: int, cost: int, last_price: int | None, multiplier: int = SCALE
) -> int | None:
    """Return the mark-to-market P&L of an open position at `last_price`; None without a price.

    Fixed-point integers throughout: `cost` is the entry notional of the open quantity
    as the orders app keeps it, and the mark value uses the same `notional` rounding.
    """
    if last_price is None:
        return None
    if quantity == 0:
        return 0
    pnl = notional(quantity, last_price, multiplier) - cost
    return pnl if side.upper() == "LONG" else -pnl
