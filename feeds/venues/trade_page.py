"""One REST page of trades, parsed row by row: a bad row is refused, the rest of the page kept.

A venue's trade-history page is a JSON array of rows. Decoding the whole array with the
typed decoder is the fast path; when that fails (one row of the wrong shape, a price
out of range), the page is parsed again one row at a time, and each row that fails is
refused with its ParseError reason and, where it has a readable id, that id. Paging
goes on from every row's id, the refused ones included, so a recovery walks past a bad
row instead of asking for it again. Only a body that is not an array at all (an error
object, cut short, or nested deeper than the decoder can split) fails the page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from feeds.market import MarketData
from feeds.venues.base import ParseError
from feeds.venues.errors import DECODE_FAILURES, as_parse_error

_decode_rows = msgspec.json.Decoder(list[msgspec.Raw]).decode
_decode_any = msgspec.json.Decoder().decode


@dataclass(frozen=True, slots=True)
class RefusedRow:
    """A row of a page that is not a valid trade: why (a ParseError reason), and its id if readable."""

    reason: str
    detail: str
    trade_id: int | None


@dataclass(frozen=True, slots=True)
class TradePage:
    """The trades of one page (oldest first), the rows refused, and the id bounds of every row."""

    trades: list[MarketData]
    rows: int  # rows the venue sent, refused ones included: a full page means "ask for more"
    refused: list[RefusedRow] = field(default_factory=list)
    min_id: int | None = None
    max_id: int | None = None


def _row_id(raw: msgspec.Raw, id_key: str) -> int | None:
    try:
        row = _decode_any(raw)
    except DECODE_FAILURES:
        return None
    value = row.get(id_key) if isinstance(row, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def parse_trade_page(
    body: bytes,
    *,
    parse_all: Callable[[bytes], list[MarketData]],
    parse_row: Callable[[msgspec.Raw], MarketData],
    id_key: str,
) -> TradePage:
    """Parse one page: `parse_all` on the whole body, else `parse_row` on each row; raise ParseError if no array."""
    try:
        trades = parse_all(body)
    except ParseError as whole:
        try:
            raws = _decode_rows(body)
        except DECODE_FAILURES:
            raise whole from None
        return _row_by_row(raws, parse_row, id_key)
    return whole_page(trades)


def whole_page(trades: list[MarketData]) -> TradePage:
    """A page every row of which parsed (also the page of a venue without a row-by-row parser)."""
    ids = [int(trade.trade_id) for trade in trades if trade.trade_id is not None and trade.trade_id.isdigit()]
    return TradePage(trades, len(trades), [], min(ids, default=None), max(ids, default=None))


def _row_by_row(raws: list[msgspec.Raw], parse_row: Callable[[msgspec.Raw], MarketData], id_key: str) -> TradePage:
    trades: list[MarketData] = []
    refused: list[RefusedRow] = []
    ids: list[int] = []
    for raw in raws:
        row_id = _row_id(raw, id_key)
        if row_id is not None:
            ids.append(row_id)
        try:
            trades.append(parse_row(raw))
        except DECODE_FAILURES as exc:
            error = as_parse_error(exc)
            refused.append(RefusedRow(error.reason, str(error)[:200], row_id))
    trades.sort(key=lambda trade: int(trade.trade_id) if trade.trade_id and trade.trade_id.isdigit() else 0)
    return TradePage(trades, len(raws), refused, min(ids, default=None), max(ids, default=None))
