"""Canonical market events shared by the whole runtime.

Prices and quantities are exact fixed-point integers with one global scale
(SCALE_DIGITS decimal places), parsed from the venue's decimal strings without float.
`ts_` fields are integer UTC nanoseconds: `ts_event` from the venue, `ts_recv` ours.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypeAlias
from decimal import Decimal
from enum import StrEnum

SCALE_DIGITS = 8
SCALE = 10**SCALE_DIGITS
_DIGITS = frozenset("0123456789")


class FixedPointError(ValueError):
    """A decimal string that is not a number or needs more than SCALE_DIGITS places."""


def parse_fixed(text: str) -> int:
    """Return `text` (a plain decimal string such as "-12.3400") times SCALE, exactly."""
    negative = text.startswith("-")
    body = text[1:] if negative or text.startswith("+") else text
    whole, dot, frac = body.partition(".")
    if not whole and not frac or not _DIGITS.issuperset(whole) or not _DIGITS.issuperset(frac):
        raise FixedPointError(f"not a plain decimal number: {text!r}")
    if len(frac) > SCALE_DIGITS:
        if frac[SCALE_DIGITS:].strip("0"):
            raise FixedPointError(f"more than {SCALE_DIGITS} decimal places: {text!r}")
        frac = frac[:SCALE_DIGITS]
    value = int(whole or "0") * SCALE + int(frac.ljust(SCALE_DIGITS, "0") or "0")
    return -value if negative else value


def fixed_from_decimal(value: Decimal) -> int:
    """Return a Decimal as a fixed-point integer, refusing values that would be rounded."""
    scaled = value.scaleb(SCALE_DIGITS)
    if scaled != scaled.to_integral_value():
        raise FixedPointError(f"more than {SCALE_DIGITS} decimal places: {value}")
    return int(scaled)


def fixed_to_decimal(value: int) -> Decimal:
    """Return a fixed-point integer as a Decimal with no trailing zeros."""
    return (Decimal(value).scaleb(-SCALE_DIGITS)).normalize() if value else Decimal(0)


def fixed_to_str(value: int) -> str:
    """Return a fixed-point integer as a plain decimal string ("0.5", "101", "-0.00000001")."""
    sign = "-" if value < 0 else ""
    whole, frac = divmod(abs(value), SCALE)
    frac_text = str(frac).rjust(SCALE_DIGITS, "0").rstrip("0")
    return f"{sign}{whole}.{frac_text}" if frac_text else f"{sign}{whole}"


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


# Every event a venue adapter can produce. Consumers that only want trades filter with
# `isinstance(event, MarketData)`.
MarketEvent: TypeAlias = MarketData | MarkPrice | FundingRate | Ticker | BookTicker


@dataclass(frozen=True, slots=True)
class FeedData:
    """One batch of events from one feed, in arrival order."""

    feed: str
    events: tuple[MarketEvent, ...]
