"""Binance's public bulk history: the daily and monthly aggTrades archives.

data.binance.vision publishes one zip per symbol and day (or month), holding one CSV
of aggregated trades. Two layouts exist, and a reader meets both:

    USD-M / COIN-M futures: agg_trade_id,price,quantity,first_trade_id,last_trade_id,transact_time,is_buyer_maker
                            (a header line in newer files, none in older ones)
    spot:                   the same seven values plus is_best_match, never a header

Times are milliseconds since the epoch, except in spot files from 2025 on, which carry
microseconds; the unit is read off the magnitude (a millisecond time has 13 digits in
this century, a microsecond time 16). `is_buyer_maker` true means the seller took the
book: the aggressor side is sell.

A row outside the layout raises ParseError with the same reasons the live parsers use,
so an importer counts and names what it skipped.
"""

from __future__ import annotations

from feeds.market import MarketData, Side
from feeds.venues.base import ParseError
from feeds.venues.construct import make_trade
from feeds.venues.errors import (
    DECODE_FAILURES,
    MAX_FIXED,
    as_parse_error,
    checked_price,
    checked_symbol,
    checked_trade_size,
)
from feeds.venues.numbers import checked_ns, fixed

HEADER_FIRST = b"agg_trade_id"
_MICROSECONDS_FROM = 10**15  # a 16-digit time: microseconds (ms times stay below until the year 33658)
_MAKER = {"true": Side.SELL, "false": Side.BUY, "True": Side.SELL, "False": Side.BUY}


def is_header(line: bytes) -> bool:
    return line.startswith(HEADER_FIRST)


def parse_agg_trade_row(line: bytes, symbol: str, received_ns: int) -> MarketData:
    """Return the trade of one archive row as our symbol's MarketData (trade id: the aggregate id)."""
    try:
        checked_symbol(symbol)
        columns = line.decode().rstrip("\r\n").split(",")
        if len(columns) not in (7, 8):
            raise ParseError("schema", f"expected 7 or 8 columns, got {len(columns)}")
        agg_id, price_text, quantity_text, _first, _last, time_text, maker = columns[:7]
        if not agg_id.isdigit():
            raise ParseError("schema", f"aggregate trade id {agg_id[:32]!r} is not a number")
        stamp = int(time_text)
        ts_event = checked_ns(stamp * 1_000 if stamp >= _MICROSECONDS_FROM else stamp * 1_000_000)
        if maker not in _MAKER:
            raise ParseError("schema", f"is_buyer_maker {maker[:16]!r} is not true or false")
        price, quantity = fixed(price_text), fixed(quantity_text)
        if not (0 < price <= MAX_FIXED and 0 < quantity <= MAX_FIXED):
            checked_price(price)
            checked_trade_size(quantity, "quantity")
        trade: MarketData = make_trade(symbol, price, quantity, ts_event, received_ns, agg_id, _MAKER[maker])
        return trade
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None
