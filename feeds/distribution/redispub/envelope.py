"""The envelope every published value travels in: versioned JSON, exact decimal strings.

    {"schema_version":1,"venue":"binance-usdm","market_type":"perpetual","symbol":"BTC-USDT",
     "venue_symbol":"BTCUSDT","channel":"trades","publish_seq":41,"instance_id":"3f2a9c0d11be",
     "recv_time_ns":1764460800125000000,"publish_time_ns":1764460800125301000,
     "exchange_time_ns":1764460800123000000,"source":"WS","status":"HEALTHY","status_reason":"",
     "data":{"price":"96712.4","quantity":"0.015","side":"sell","trade_id":"2435013397"}}

`publish_seq` counts the messages of one key within one publishing process, from 1;
`instance_id` changes when that process restarts. A reader that sees the seq jump on
one key with the same instance_id lost messages (pub/sub is fire-and-forget); a new
instance_id means a restart, not a loss. Prices, quantities and rates are decimal
strings, never JSON floats; times are integer UTC nanoseconds. A field the venue did not
send is absent from `data`, never zero. Additive changes keep `schema_version`; a change
that alters or removes a field bumps it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from core.fixed_point import fixed_to_str
from feeds.market import BookTicker, FundingRate, MarketData, MarketEvent, MarkPrice, OrderBook, Ticker

SCHEMA_VERSION = 1


class Source(StrEnum):
    """Where a value came from."""

    WS = "WS"  # the venue's websocket stream
    REST = "REST"  # the venue's REST API (fallback polls, venue metadata)
    CONFIG = "CONFIG"  # the site's own instrument table (venues without a metadata endpoint)
    INTERNAL = "INTERNAL"  # computed by the publisher itself (health)


class Envelope(msgspec.Struct, kw_only=True):
    """One published value; the publisher fills the three `publish_`/`instance_` fields."""

    schema_version: int = SCHEMA_VERSION
    venue: str
    market_type: str  # "venue" for venue-wide subjects
    symbol: str | None  # our symbol; None for venue-wide subjects
    venue_symbol: str | None
    channel: str
    publish_seq: int = 0
    instance_id: str = ""
    recv_time_ns: int | None = None  # when this process received the value
    publish_time_ns: int = 0
    exchange_time_ns: int | None = None  # the venue's event time, when it sent one
    source: str  # a Source value
    status: str  # a core.health.Status value
    status_reason: str = ""
    data: dict[str, Any]


class EnvelopeError(ValueError):
    """Bytes that are not an envelope this version can read."""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Envelope)


def encode(envelope: Envelope) -> bytes:
    return _encoder.encode(envelope)


def decode(body: bytes) -> Envelope:
    """Return the envelope in `body`; raise EnvelopeError for anything else."""
    try:
        envelope = _decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EnvelopeError(str(exc)) from None
    if envelope.schema_version != SCHEMA_VERSION:
        raise EnvelopeError(f"schema_version {envelope.schema_version}, this reader knows {SCHEMA_VERSION}")
    return envelope


# The channel (last key segment) each event kind is published on. KuCoin's mark price
# subscription yields mark prices and funding rates: two channels, two cadences.
CHANNEL_OF_KIND: dict[str, str] = {
    MarketData.kind: "trades",
    MarkPrice.kind: "mark_price",
    FundingRate.kind: "funding",
    Ticker.kind: "ticker",
    BookTicker.kind: "book_ticker",
    OrderBook.kind: "order_book",
}


def channel_of(event: MarketEvent) -> str:
    return CHANNEL_OF_KIND[event.kind]


def _put(data: dict[str, Any], name: str, value: int | None) -> None:
    if value is not None:
        data[name] = fixed_to_str(value)


def event_data(event: MarketEvent) -> dict[str, Any]:
    """Return the channel payload of `event`: decimal strings, absent fields left out."""
    data: dict[str, Any] = {}
    if isinstance(event, MarketData):
        data["price"] = fixed_to_str(event.price)
        data["quantity"] = fixed_to_str(event.volume)
        if event.side is not None:
            data["side"] = event.side.value
        if event.trade_id is not None:
            data["trade_id"] = event.trade_id
    elif isinstance(event, MarkPrice):
        data["mark_price"] = fixed_to_str(event.mark_price)
        _put(data, "index_price", event.index_price)
        _put(data, "funding_rate", event.funding_rate)
        if event.next_funding_ns is not None:
            data["next_funding_time_ns"] = event.next_funding_ns
    elif isinstance(event, FundingRate):
        data["funding_rate"] = fixed_to_str(event.funding_rate)
        if event.next_funding_ns is not None:
            data["next_funding_time_ns"] = event.next_funding_ns
    elif isinstance(event, Ticker):
        data["last_price"] = fixed_to_str(event.last_price)
        _put(data, "best_bid", event.best_bid)
        _put(data, "best_ask", event.best_ask)
        _put(data, "volume_24h", event.volume_24h)
    elif isinstance(event, BookTicker):
        data["bid_price"] = fixed_to_str(event.bid_price)
        data["bid_size"] = fixed_to_str(event.bid_size)
        data["ask_price"] = fixed_to_str(event.ask_price)
        data["ask_size"] = fixed_to_str(event.ask_size)
        if event.sequence is not None:
            data["sequence"] = event.sequence
    elif isinstance(event, OrderBook):
        data["bids"] = [[fixed_to_str(price), fixed_to_str(size)] for price, size in event.bids]
        data["asks"] = [[fixed_to_str(price), fixed_to_str(size)] for price, size in event.asks]
        if event.sequence is not None:
            data["sequence"] = event.sequence
    else:  # pragma: no cover - MarketEvent is closed; a new kind must be added here
        raise TypeError(f"unknown event type {type(event).__name__}")
    return data
