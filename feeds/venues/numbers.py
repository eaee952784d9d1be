"""Exact number and time conversions shared by the venue parsers.

Venues send prices as decimal strings ("64012.5"), as JSON numbers (bitFlyer's
13633748.0, KuCoin's 0.001) or as ISO times with up to 9 fractional digits. Every
conversion here is exact or raises FixedPointError: nothing goes through float.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache

from core.fixed_point import MAX_WHOLE_DIGITS, SCALE, SCALE_DIGITS, FixedPointError
from feeds.market import fixed_from_decimal, fixed_from_whole, parse_fixed

# Every conversion here returns a value inside core.fixed_point.FIXED_MAX_ABS or raises
# FixedPointError: at most MAX_WHOLE_DIGITS digits before the point, SCALE_DIGITS after.
# A longer text is refused before it is parsed, so a hostile "1e999999999" or a
# 5000-digit string never becomes a huge integer.
_MAX_TEXT = 48
_NANOS_PER_DAY = 86_400 * 1_000_000_000


_FRACTION_SCALE = tuple(10 ** (SCALE_DIGITS - places) for places in range(SCALE_DIGITS + 1))


# Prices and sizes repeat a lot within a stream (a busy book trades at a handful of
# levels, sizes like "0.001" recur), and a hit in this bounded cache costs one dict
# lookup instead of a dozen interpreted steps. A plain dict emptied when full costs a
# miss far less than an LRU's bookkeeping (measured: 0.67 us against 1.31 us per fresh
# number). Rejected strings are never cached.
FIXED_CACHE_SIZE = 16_384
_fixed_cache: dict[str, int] = {}
_json_fixed_cache: dict[bytes, int] = {}


def clear_number_cache() -> None:
    """Forget every cached conversion (benchmarks start cold with it)."""
    _fixed_cache.clear()
    _json_fixed_cache.clear()


def fixed_uncached(text: str) -> int:
    """Return a venue's decimal string as fixed point (see `feeds.market.parse_fixed`).

    The hot path handles the plain unsigned form venues send ("96712.40", "100") with
    two int() calls; anything else (signs, long zero tails, leading zeros past the range
    check) goes to parse_fixed. At most MAX_WHOLE_DIGITS whole digits means the value is
    inside FIXED_MAX_ABS without comparing it.
    """
    whole, _, fraction = text.partition(".")
    if (
        len(fraction) <= SCALE_DIGITS
        and 0 < len(whole) <= MAX_WHOLE_DIGITS
        and text.isascii()
        and whole.isdigit()
        and (fraction.isdigit() or not fraction)
    ):
        # isascii + isdigit: only 0-9, so int() sees no sign, underscore or space.
        return int(whole) * SCALE + (int(fraction) * _FRACTION_SCALE[len(fraction)] if fraction else 0)
    if len(text) > _MAX_TEXT:
        raise FixedPointError(f"number too long: {text[:_MAX_TEXT]!r}...")
    return parse_fixed(text)


def fixed(text: str, _cached: Callable[[str], int | None] = _fixed_cache.get) -> int:
    """Return a venue's decimal string as fixed point, exactly; see `fixed_uncached`."""
    value = _cached(text)  # `_cached` is bound once, sparing the hot path a global lookup
    if value is None:
        value = fixed_uncached(text)
        if len(_fixed_cache) >= FIXED_CACHE_SIZE:
            _fixed_cache.clear()
        _fixed_cache[text] = value
    return value


def json_fixed(raw: bytes) -> int:
    """Return a raw JSON number or decimal string (msgspec.Raw) as fixed point, exactly.

    Plain decimals ("13633748.0", "0.01") take the fast path; exponent forms ("1e-8")
    go through Decimal, still without float.
    """
    data = bytes(raw)
    value = _json_fixed_cache.get(data)
    if value is None:
        value = _json_fixed_text(data)
        if len(_json_fixed_cache) >= FIXED_CACHE_SIZE:
            _json_fixed_cache.clear()
        _json_fixed_cache[data] = value
    return value


def _json_fixed_text(data: bytes) -> int:
    if len(data) > _MAX_TEXT + 2:  # also keeps long keys out of the cache
        raise FixedPointError(f"number too long: {data[:_MAX_TEXT]!r}...")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise FixedPointError(f"not a number: {data[:_MAX_TEXT]!r}") from None
    if text[:1] == '"':
        if len(text) < 2 or text[-1] != '"':
            raise FixedPointError(f"not a number: {text[:_MAX_TEXT]!r}")
        text = text[1:-1]
    if "e" in text or "E" in text:
        if "_" in text or not text.isprintable() or text != text.strip():
            # Decimal() reads "1_0e1" and " 1e5 "; a JSON number is neither.
            raise FixedPointError(f"not a number: {text[:_MAX_TEXT]!r}")
        try:
            return decimal_to_fixed(Decimal(text))
        except ArithmeticError:
            raise FixedPointError(f"not a number: {text[:_MAX_TEXT]!r}") from None
    return fixed(text)


def json_fixed_positive(raw: bytes) -> int:
    value = json_fixed(raw)
    if value <= 0:
        raise FixedPointError(f"not positive: {bytes(raw)[:_MAX_TEXT]!r}")
    return value


def fixed_positive(text: str) -> int:
    """Return a price or size that must be above zero."""
    value = fixed(text)
    if value <= 0:
        raise FixedPointError(f"not positive: {text!r}")
    return value


def decimal_to_fixed(value: Decimal) -> int:
    """Return an exactly decoded JSON number (msgspec Decimal) as fixed point."""
    return fixed_from_decimal(value)


def whole_to_fixed(units: int) -> int:
    """Return a venue's integer quantity (Upstox ltq, vtt) as fixed point, range-checked."""
    return fixed_from_whole(units)


def decimal_to_fixed_positive(value: Decimal) -> int:
    result = decimal_to_fixed(value)
    if result <= 0:
        raise FixedPointError(f"not positive: {value}")
    return result


@lru_cache(maxsize=64)
def _epoch_day_ns(date_text: str) -> int:
    # Days from the civil date (Howard Hinnant's algorithm), cached: a stream sees one
    # or two dates a day, so parsing a timestamp is mostly the time-of-day part.
    if len(date_text) != 10 or date_text[4] != "-" or date_text[7] != "-":
        raise ValueError(f"not a date: {date_text!r}")
    year, month, day = int(date_text[:4]), int(date_text[5:7]), int(date_text[8:10])
    if not (1970 <= year <= 9999 and 1 <= month <= 12 and 1 <= day <= 31):
        raise ValueError(f"date out of range: {date_text!r}")
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return (era * 146097 + doe - 719468) * _NANOS_PER_DAY


@lru_cache(maxsize=256)
def _minute_ns(prefix: str) -> int:
    # "2026-09-23T10:44": a stream sees one minute at a time, so this is mostly a hit.
    if len(prefix) != 16 or prefix[10] != "T" or prefix[13] != ":":
        raise ValueError(f"not an ISO UTC time: {prefix!r}")
    hours_text, minutes_text = prefix[11:13], prefix[14:16]
    if not (hours_text + minutes_text).isdigit() or not prefix.isascii():
        raise ValueError(f"not an ISO UTC time: {prefix!r}")
    hours, minutes = int(hours_text), int(minutes_text)
    if hours > 23 or minutes > 59:
        raise ValueError(f"time out of range: {prefix!r}")
    return _epoch_day_ns(prefix[:10]) + (hours * 60 + minutes) * 60_000_000_000


def iso_utc_to_ns(text: str) -> int:
    """Return "2026-09-23T10:44:33.5470000Z" (Z optional, up to 9 fraction digits) as UTC ns."""
    if text[-1:] == "Z":
        text = text[:-1]
    if len(text) < 19 or text[16] != ":":
        raise ValueError(f"not an ISO UTC time: {text!r}")
    seconds = text[17:19]
    if not seconds.isdigit() or not seconds.isascii() or seconds > "60":
        raise ValueError(f"bad seconds: {text!r}")
    ns = _minute_ns(text[:16]) + int(seconds) * 1_000_000_000
    if len(text) > 19:
        fraction = text[20:]
        if text[19] != "." or not fraction.isdigit() or len(fraction) > 9 or not fraction.isascii():
            raise ValueError(f"bad fraction of a second: {text!r}")
        ns += int(fraction) * _NANOS_SCALE[len(fraction)]
    return ns


_NANOS_SCALE = tuple(10 ** (9 - places) for places in range(10))


# Exchange times outside 2000-01-01 .. 2100-01-01 are a unit mistake or a corrupt frame;
# refusing them also keeps every time inside the recorder's signed 64-bit column.
MIN_TS_NS = 946_684_800 * 1_000_000_000
MAX_TS_NS = 4_102_444_800 * 1_000_000_000


def checked_ns(value: int) -> int:
    """Return an exchange time in UTC ns, refusing one outside 2000..2100."""
    if not MIN_TS_NS <= value < MAX_TS_NS:
        raise ValueError(f"exchange time out of range: {value} ns")
    return value


def ms_to_ns(value: int) -> int:
    """Return an exchange time in UTC ms as checked ns."""
    return checked_ns(value * 1_000_000)
