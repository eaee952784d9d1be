"""Events as flat JSON-ready records: what `parseframes` prints and golden files hold.

Every kind carries the same leading keys (`venue`, `symbol`, `kind`, `price`,
`quantity`, `side`, `trade_id`, `exchange_time_ms`), numbers as exact decimal strings;
kind-specific keys follow. Golden files also keep `ts_event` and `ts_recv` in ns.
"""

from __future__ import annotations

from typing import Any

from core.fixed_point import fixed_to_str
from feeds.market import BookTicker, FundingRate, MarketData, MarketEvent, MarkPrice, OrderBook, Ticker


def _text(value: int | None) -> str | None:
    return None if value is None else fixed_to_str(value)


def event_record(venue: str, event: MarketEvent) -> dict[str, Any]:
    """Return `event` as a flat dict of JSON values (decimal strings for numbers)."""
    record: dict[str, Any] = {"venue": venue, "symbol": event.symbol, "kind": event.kind}
    if isinstance(event, MarketData):
        record.update(
            price=fixed_to_str(event.price),
            quantity=fixed_to_str(event.volume),
            side=event.side.value if event.side else None,
            trade_id=event.trade_id,
        )
        if event.cumulative_volume is not None:
            record["cumulative_volume"] = fixed_to_str(event.cumulative_volume)
        if event.duration_since_last_ns is not None:
            record["duration_since_last_ns"] = event.duration_since_last_ns
    elif isinstance(event, MarkPrice):
        record.update(
            price=fixed_to_str(event.mark_price),
            quantity=None,
            side=None,
            trade_id=None,
            index_price=_text(event.index_price),
            funding_rate=_text(event.funding_rate),
            next_funding_ms=None if event.next_funding_ns is None else event.next_funding_ns // 1_000_000,
        )
    elif isinstance(event, FundingRate):
        record.update(
            price=None,
            quantity=None,
            side=None,
            trade_id=None,
            funding_rate=fixed_to_str(event.funding_rate),
            next_funding_ms=None if event.next_funding_ns is None else event.next_funding_ns // 1_000_000,
        )
    elif isinstance(event, Ticker):
        record.update(
            price=fixed_to_str(event.last_price),
            quantity=None,
            side=None,
            trade_id=None,
            best_bid=_text(event.best_bid),
            best_ask=_text(event.best_ask),
            volume_24h=_text(event.volume_24h),
        )
    elif isinstance(event, BookTicker):
        # `price`/`quantity` of a book ticker are the best bid: the level a seller hits.
        record.update(
            price=fixed_to_str(event.bid_price),
            quantity=fixed_to_str(event.bid_size),
            side=None,
            trade_id=None,
            bid_price=fixed_to_str(event.bid_price),
            bid_size=fixed_to_str(event.bid_size),
            ask_price=fixed_to_str(event.ask_price),
            ask_size=fixed_to_str(event.ask_size),
            sequence=event.sequence,
        )
    elif isinstance(event, OrderBook):
        # `price`/`quantity` of a book are its best bid, as for a book ticker (None: no bids).
        best_bid = event.bids[0] if event.bids else None
        record.update(
            price=None if best_bid is None else fixed_to_str(best_bid[0]),
            quantity=None if best_bid is None else fixed_to_str(best_bid[1]),
            side=None,
            trade_id=None,
            bids=[[fixed_to_str(price), fixed_to_str(size)] for price, size in event.bids],
            asks=[[fixed_to_str(price), fixed_to_str(size)] for price, size in event.asks],
            sequence=event.sequence,
        )
    else:  # pragma: no cover - MarketEvent is closed; a new kind must be added here
        raise TypeError(f"unknown event type {type(event).__name__}")
    record["exchange_time_ms"] = event.ts_event // 1_000_000
    return record


def golden_record(venue: str, event: MarketEvent) -> dict[str, Any]:
    """Return the record plus the exact ns timestamps, for golden files."""
    return {**event_record(venue, event), "ts_event": event.ts_event, "ts_recv": event.ts_recv}
