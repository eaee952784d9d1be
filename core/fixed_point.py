"""The project's fixed-point numbers: the scale, the documented range, the range error.

Prices, quantities and money are integers: the value times SCALE (SCALE_DIGITS decimal
places). Parsing venue strings into them is the feed path's (feeds.market); storing
them is core.fixed_point_field's.
"""

from __future__ import annotations

SCALE_DIGITS = 12
SCALE = 10**SCALE_DIGITS
# The documented range of every fixed-point value: at most MAX_WHOLE_DIGITS digits before
# the point, i.e. |value| <= 999,999,999,999,999,999.999999999999. Every parser conversion
# refuses a number outside it (FixedPointError: a malformed frame), so nothing accepted
# can overflow later. 18 whole digits hold a BTC_JPY price, a meme token's day volume and
# any account's capital; 30 digits leave 8 of PostgreSQL's numeric(38,0) for notionals
# and sums. SQLite stores a signed 64-bit integer, so there a column holds the narrower
# SQLITE_FIXED_MAX_ABS (see core.fixed_point_field).
MAX_WHOLE_DIGITS = 18
FIXED_MAX_ABS = 10 ** (MAX_WHOLE_DIGITS + SCALE_DIGITS) - 1
SQLITE_FIXED_MAX_ABS = 2**63 - 1


class FixedPointError(ValueError):
    """A decimal string that is not a number, needs more than SCALE_DIGITS places or is
    outside the documented range (|value| <= FIXED_MAX_ABS)."""


def fixed_to_str(value: int) -> str:
    """Return a fixed-point integer as a plain decimal string ("0.5", "101", "-0.000000000001")."""
    sign = "-" if value < 0 else ""
    whole, frac = divmod(abs(value), SCALE)
    frac_text = str(frac).rjust(SCALE_DIGITS, "0").rstrip("0")
    return f"{sign}{whole}.{frac_text}" if frac_text else f"{sign}{whole}"
