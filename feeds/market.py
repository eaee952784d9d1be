"""Canonical market events shared by the whole runtime.

Prices and quantities are exact fixed-point integers with one global scale
(SCALE_DIGITS decimal places), parsed from the venue's decimal strings without float.
`ts_` fields are integer UTC nanoseconds: `ts_event` from the venue, `ts_recv` ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow
from enum import StrEnum
from typing import ClassVar, TypeAlias

from core.fixed_point import (
    FIXED_MAX_ABS,
    MAX_WHOLE_DIGITS,
    SCALE,
    SCALE_DIGITS,
    FixedPointError,
    fixed_to_str,
)

_DIGITS = frozenset("0123456789")


def parse_fixed(text: str) -> int:
    """Return `text` (a plain decimal string such as "-12.3400") times SCALE, exactly."""
    negative = text.startswith("-")
    body = text[1:] if negative or text.startswith("+") else text
    whole, _, frac = body.partition(".")
    if (not whole and not frac) or not _DIGITS.issuperset(whole) or not _DIGITS.issuperset(frac):
        raise FixedPointError(f"not a plain decimal number: {text[:40]!r}")
    whole = whole.lstrip("0")
    if len(whole) > MAX_WHOLE_DIGITS:
        # Checked on the digits, before int(): a 5000-digit string is refused without
        # building the integer.
        raise FixedPointError(f"out of range (more than {MAX_WHOLE_DIGITS} whole digits): {text[:40]!r}")
    if len(frac) > SCALE_DIGITS:
        if frac[SCALE_DIGITS:].strip("0"):
            raise FixedPointError(f"more than {SCALE_DIGITS} decimal places: {text[:40]!r}")
        frac = frac[:SCALE_DIGITS]
    value = int(whole or "0") * SCALE + int(frac.ljust(SCALE_DIGITS, "0") or "0")
    return -value if negative else value


def checked_fixed(value: int) -> int:
    """Return a fixed-point integer, refusing one outside the documented range."""
    if not -FIXED_MAX_ABS <= value <= FIXED_MAX_ABS:
        raise FixedPointError(f"out of range (|value| > FIXED_MAX_ABS): {str(value)[:40]}")
    return value


def fixed_from_whole(units: int) -> int:
    """Return a whole number of units (a venue's integer quantity) as checked fixed point."""
    return checked_fixed(units * SCALE)


# Wide enough for any in-range value times SCALE (30 digits) and trapping Inexact: the
# default context keeps 28 significant digits and would round a 30-digit value silently.
_EXACT = Context(prec=MAX_WHOLE_DIGITS + SCALE_DIGITS + 8, traps=[Inexact, InvalidOperation, Overflow])


def fixed_from_decimal(value: Decimal) -> int:
    """Return a Decimal as a fixed-point integer, refusing values that would be rounded
    or that are outside the documented range."""
    if not value.is_finite():
        raise FixedPointError(f"not a finite number: {str(value)[:40]}")
    if value and value.adjusted() >= MAX_WHOLE_DIGITS:
        raise FixedPointError(f"out of range (more than {MAX_WHOLE_DIGITS} whole digits): {str(value)[:40]}")
    try:
        scaled = value.scaleb(SCALE_DIGITS, _EXACT)
    except ArithmeticError:  # Inexact: digits beyond what the context holds, all past the 12th place
        raise FixedPointError(f"more than {SCALE_DIGITS} decimal places: {str(value)[:40]}") from None
    integral = int(scaled)
    if integral != scaled:
        raise FixedPointError(f"more than {SCALE_DIGITS} decimal places: {str(value)[:40]}")
    return integral


def fixed_to_decimal(value: int) -> Decimal:
    """Return a fixed-point integer as a Decimal with no trailing zeros (exact: built from
    its decimal string, so no context precision applies)."""
    return Decimal(fixed_to_str(value))


class Side(StrEnum):
    """The aggressor side of a trade."""

    BUY = "buy"
    SELL = "sell"


@dataclass(frozen=True, slots=True)
class MarketData:
    """One trade print."""

    symbol: str  # the venue's spelling
    price: int  # fixed point
    volume: int  # fixed point, this trade's quantity (per-tick delta)
    ts_event: int
    ts_recv: int
    trade_id: str | None = None
    side: Side | None = None
    duration_since_last_ns: int | None = None  # set by the stream, which knows the previous tick
    # The venue's running day total after this trade (Upstox `vtt`), fixed point. The
    # stream's state object turns it into `volume`; venues without one leave it None.
    cumulative_volume: int | None = None

    kind: ClassVar[str] = "trade"


@dataclass(frozen=True, slots=True)
class MarkPrice:
    """A mark price, with the index price and funding rate when the venue sends them."""

    symbol: str  # the venue's spelling
    mark_price: int  # fixed point
    ts_event: int
    ts_recv: int
    index_price: int | None = None  # fixed point
    funding_rate: int | None = None  # fixed point, a fraction per funding period (0.0001 = 1 bp)
    next_funding_ns: int | None = None  # UTC ns of the next funding settlement

    kind: ClassVar[str] = "mark_price"


@dataclass(frozen=True, slots=True)
class FundingRate:
    """A funding rate published on its own (KuCoin sends it apart from the mark price)."""

    symbol: str  # the venue's spelling
    funding_rate: int  # fixed point, a fraction per funding period
    ts_event: int
    ts_recv: int
    next_funding_ns: int | None = None

    kind: ClassVar[str] = "funding_rate"


@dataclass(frozen=True, slots=True)
class Ticker:
    """A venue's periodic summary: last price, best quotes and the day's volume when given."""

    symbol: str  # the venue's spelling
    last_price: int  # fixed point
    ts_event: int
    ts_recv: int
    best_bid: int | None = None  # fixed point
    best_ask: int | None = None  # fixed point
    volume_24h: int | None = None  # fixed point, venue units

    kind: ClassVar[str] = "ticker"


@dataclass(frozen=True, slots=True)
class BookTicker:
    """The best bid and ask with their sizes."""

    symbol: str  # the venue's spelling
    bid_price: int  # fixed point
    bid_size: int  # fixed point
    ask_price: int  # fixed point
    ask_size: int  # fixed point
    ts_event: int
    ts_recv: int
    sequence: int | None = None  # the venue's book update id, when it sends one

    kind: ClassVar[str] = "book_ticker"


# One price level of a book: (price, size), both fixed point.
BookLevel: TypeAlias = tuple[int, int]


@dataclass(frozen=True, slots=True)
class OrderBook:
    """A snapshot of the top of a book: every level as the venue sent it, best first.

    A snapshot replaces the previous one whole (no deltas to apply), so a reader needs
    only the newest. `ts_event` is the venue's time for it, or our receive time when the
    venue sends none.
    """

    symbol: str  # the venue's spelling
    bids: tuple[BookLevel, ...]  # (price, size), highest price first
    asks: tuple[BookLevel, ...]  # (price, size), lowest price first
    ts_event: int
    ts_recv: int
    sequence: int | None = None  # the venue's book update id, when it sends one

    kind: ClassVar[str] = "order_book"


# Every event a venue adapter can produce. Consumers that only want trades filter with
# `isinstance(event, MarketData)`.
MarketEvent: TypeAlias = MarketData | MarkPrice | FundingRate | Ticker | BookTicker | OrderBook


@dataclass(frozen=True, slots=True)
class FeedData:
    """One batch of events from one feed, in arrival order."""

    feed: str
    events: tuple[MarketEvent, ...]
