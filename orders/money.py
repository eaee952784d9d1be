"""Exact order arithmetic on fixed-point integers (core.fixed_point.SCALE).

Pure functions on Python integers (never float, and no Decimal context precision to
overflow): rounding to an instrument's tick and lot, notional values, fees, and the
pro-rata shares that keep a ledger exact (the released parts always add up to the
whole, so nothing is lost to rounding).
"""

from __future__ import annotations

from decimal import Decimal
from enum import Enum

from core.fixed_point import SCALE
from feeds.market import fixed_from_decimal

BPS = 10_000


class Rounding(Enum):
    DOWN = "down"  # toward zero for the non-negative values used here
    UP = "up"
    HALF_EVEN = "half_even"


def divide(numerator: int, denominator: int, rounding: Rounding) -> int:
    """Return numerator / denominator (denominator > 0, numerator >= 0) as an integer."""
    if denominator <= 0 or numerator < 0:
        raise ValueError("divide() takes a non-negative numerator and a positive denominator")
    quotient, remainder = divmod(numerator, denominator)
    if remainder == 0 or rounding is Rounding.DOWN:
        return quotient
    if rounding is Rounding.UP:
        return quotient + 1
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2 == 1):
        return quotient + 1
    return quotient


def round_to_step(value: int, step: int, *, up: bool = False) -> int:
    """Round a non-negative fixed-point `value` down (or up) to a multiple of `step`."""
    if step <= 0:
        raise ValueError(f"step must be positive, got {step}")
    return divide(value, step, Rounding.UP if up else Rounding.DOWN) * step


def to_fixed(value: Decimal) -> int:
    """Return an exact Decimal (at most SCALE_DIGITS places, inside FIXED_MAX_ABS) as fixed point."""
    return fixed_from_decimal(value)


def notional(quantity: int, price: int, multiplier: int = SCALE, *, rounding: Rounding = Rounding.HALF_EVEN) -> int:
    """Return quantity * price * multiplier in fixed point, rounded once at the end."""
    return divide(quantity * price * multiplier, SCALE * SCALE, rounding)


def bps_of(amount: int, bps: int, *, rounding: Rounding = Rounding.UP) -> int:
    """Return `bps` basis points of a non-negative fixed-point `amount`."""
    return divide(amount * bps, BPS, rounding)


def entry_reservation(quantity: int, price: int, multiplier: int, *, buffer_bps: int, fee_bps: int) -> int:
    """Return the capital to reserve before an entry: notional, plus a price buffer, plus the fee; rounded up.

    The buffer covers a market order filling worse than the signal price, so that a
    fill's cost plus fee fits inside what was reserved and `available` does not drop
    below what it was before the entry.
    """
    base = notional(quantity, price, multiplier, rounding=Rounding.UP)
    buffered = base + bps_of(base, buffer_bps)
    return buffered + bps_of(buffered, fee_bps)


def pro_rata(total: int, part: int, whole: int) -> int:
    """Return floor(total * part / whole): the share of `total` that `part` of `whole` carries.

    Releasing `pro_rata(total, after, whole) - pro_rata(total, before, whole)` at each
    step releases exactly `total` once `after == whole`.
    """
    if whole <= 0:
        raise ValueError("whole must be positive")
    if not 0 <= part <= whole:
        raise ValueError(f"part {part} outside 0..{whole}")
    return divide(total * part, whole, Rounding.DOWN)
