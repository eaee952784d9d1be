"""Map the ways a frame can fail to decode onto ParseError reasons (metric labels).

A parser raises nothing but ParseError, whatever arrives; the stream counts each one as
`feed_frames_malformed_total{venue,reason}` and skips the frame. The reasons:

    json         not JSON, or cut short
    schema       a field missing or of the wrong type, an unknown message shape
    depth        nested deeper than the decoder's recursion limit
    utf8         bytes that are not UTF-8 where text is required
    number       not an exact decimal, too many places, or outside the documented range
    price        a price that is zero or negative
    size         a quantity that is negative (zero too, for a trade print)
    symbol       an empty symbol
    value        another impossible value (an exchange time outside 2000..2100)
    protobuf     a binary frame that is not the venue's protobuf message
    venue_error  the venue answered with an error instead of data

The checks below are the ones every venue shares: a value a frame carries must fall in
the range the rest of the system can hold (the recorder's signed 64-bit columns), and a
price must be positive, a size non-negative, a symbol non-empty.
"""

from __future__ import annotations

import msgspec

from core.fixed_point import FIXED_MAX_ABS, FixedPointError
from feeds.venues.base import ParseError

# The largest magnitude of a fixed-point value: the one documented range.
MAX_FIXED: int = FIXED_MAX_ABS
# The largest plain integer a frame may carry into an event (sequence numbers): the
# events are written as JSON and to int8 columns, both 64-bit.
MAX_INT = 2**63 - 1

# What a parser may raise while decoding a hostile frame; `parse` turns each into a
# ParseError so nothing else escapes into the stream. RecursionError is msgspec's
# answer to a frame nested deeper than its limit (a 2 KB frame of brackets does it).
DECODE_FAILURES: tuple[type[Exception], ...] = (
    msgspec.DecodeError,
    ValueError,
    OverflowError,
    TypeError,
    KeyError,
    IndexError,
    UnicodeError,
    RecursionError,
)


def as_parse_error(exc: Exception) -> ParseError:
    """Return `exc` as a ParseError whose reason says what kind of failure it was."""
    if isinstance(exc, ParseError):
        return exc
    if isinstance(exc, RecursionError):
        return ParseError("depth", "nested too deeply")
    if isinstance(exc, UnicodeError):
        return ParseError("utf8", str(exc))
    if isinstance(exc, msgspec.ValidationError):  # a subclass of DecodeError: test it first
        return ParseError("schema", str(exc))
    if isinstance(exc, msgspec.DecodeError):
        return ParseError("utf8" if "UTF-8" in str(exc) else "json", str(exc))
    if isinstance(exc, FixedPointError):
        return ParseError("number", str(exc))
    return ParseError("value", f"{type(exc).__name__}: {exc}")


def checked_price(value: int, what: str = "price") -> int:
    """Return a fixed-point price that is above zero and within range."""
    if 0 < value <= MAX_FIXED:
        return value
    if value <= 0:
        raise ParseError("price", f"{what} not positive")
    raise ParseError("number", f"{what} out of range")


def checked_size(value: int, what: str = "size") -> int:
    """Return a fixed-point quantity that is zero or more and within range."""
    if 0 <= value <= MAX_FIXED:
        return value
    if value < 0:
        raise ParseError("size", f"{what} negative")
    raise ParseError("number", f"{what} out of range")


def checked_trade_size(value: int, what: str = "size") -> int:
    """Return a trade's quantity: a print of nothing is no trade, so it must be above zero."""
    if 0 < value <= MAX_FIXED:
        return value
    if value <= 0:
        raise ParseError("size", f"{what} not positive")
    raise ParseError("number", f"{what} out of range")


def checked_signed(value: int, what: str = "value") -> int:
    """Return a signed fixed-point value (a funding rate) within range."""
    if -MAX_FIXED <= value <= MAX_FIXED:
        return value
    raise ParseError("number", f"{what} out of range")


def checked_int(value: int | None, what: str = "integer") -> int | None:
    """Return a plain integer (a sequence number) that is zero or more and fits 64 bits."""
    if value is None or 0 <= value <= MAX_INT:
        return value
    raise ParseError("number", f"{what} out of range")


def trade_refusal(price: int, volume: int, symbol: str) -> ParseError | None:
    """Say why a trade's price, quantity or symbol is refused (None: they are fine).

    Hot paths test `0 < price <= MAX_FIXED and 0 < volume <= MAX_FIXED and symbol` inline
    and call this only when that fails, to name the reason.
    """
    try:
        checked_price(price)
        checked_trade_size(volume, "quantity")
        checked_symbol(symbol)
    except ParseError as exc:
        return exc
    return None


def values_refusal(
    symbol: str,
    *,
    prices: tuple[int | None, ...] = (),
    sizes: tuple[int | None, ...] = (),
    signed: tuple[int | None, ...] = (),
    integers: tuple[int | None, ...] = (),
) -> ParseError:
    """Name the first refused value of an event whose inline range test failed (None: absent)."""
    try:
        checked_symbol(symbol)
        for price in prices:
            if price is not None:
                checked_price(price)
        for size in sizes:
            if size is not None:
                checked_size(size)
        for value in signed:
            if value is not None:
                checked_signed(value)
        for integer in integers:
            checked_int(integer)
    except ParseError as exc:
        return exc
    return ParseError("value", "out of range")


def checked_symbol(symbol: str) -> str:
    """Return a symbol that is not empty."""
    if symbol:
        return symbol
    raise ParseError("symbol", "empty symbol")
