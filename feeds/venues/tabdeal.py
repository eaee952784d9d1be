"""Tabdeal futures ("special margin", FAPI): order-book snapshots, websocket and REST.

The futures API mirrors Binance USD-M in shape, but publishes far less: its public
market data is the order book (`/r/fapi/v1/depth`, and the `special_margin/stream/`
socket) and the instrument list (`/r/fapi/v1/exchangeInfo`). It publishes no mark
price, index price or funding rate, so this venue serves only `order_book`.

Market data spells a contract with an underscore (`BTC_USDT`); that is the
`venue_symbol` here. The socket takes Binance-style requests,
`{"method":"SUBSCRIBE","params":["special_margin@BTC_USDT@depth@1000ms"],"id":1}`
(periods 100ms, 200ms, 1000ms, 5000ms; at most 50 markets per connection), answers
`{"result":null,"id":1}` and then pushes a snapshot of the book every period:

    {"stream":"special_margin-BTC_USDT-depth-1000ms",
     "data":{"e":"depthUpdate","E":1657530675579,"s":"BTCUSDT",
             "b":[["39792.23","8.27169"],["39792.18","0.33006"]],
             "a":[["39792.24","1.27040"],["39792.27","0.00850"]]}}

`data` may arrive as a JSON string holding that object; both are read. The symbol
comes from the stream name (the payload's `s` drops the underscore). About once an
hour the server sends the text `connection closed ok` and expects the client to
redial: the connection's maximum age is an hour, so the runtime redials ahead of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Union

import msgspec
from django.core.exceptions import ValidationError

from feeds.market import BookLevel, MarketEvent, OrderBook
from feeds.venues.base import (
    Endpoint,
    ExchangeVenueCommon,
    HttpRequest,
    InstrumentMeta,
    KeepAlive,
    ParseError,
)
from feeds.venues.errors import DECODE_FAILURES, MAX_FIXED, MAX_INT, as_parse_error, checked_symbol
from feeds.venues.exchange_settings import base_url, clean_exchange_settings
from feeds.venues.numbers import checked_ns, fixed, fixed_positive, ms_to_ns

NAME = "tabdeal"
WS_BASE_URL = "wss://api1.tabdeal.org"
REST_BASE_URL = "https://api1.tabdeal.org"
STREAM_PATH = "/special_margin/stream/"
DEPTH_PATH = "/r/fapi/v1/depth"
EXCHANGE_INFO_PATH = "/r/fapi/v1/exchangeInfo"
CHANNELS = frozenset({"order_book"})
# Snapshot periods the socket serves, in ms.
PERIODS_MS = (100, 200, 1000, 5000)
# Levels per side asked of the REST fallback; the venue allows 1..100 (default 100).
DEPTH_LIMIT_MAX = 100
MARKETS_PER_CONNECTION = 50
# A book deeper than this is not a snapshot this site can show or publish.
MAX_LEVELS = 5000
CLOSE_NOTICE = b"connection closed ok"
DEFAULTS: dict[str, object] = {
    "ws_url": WS_BASE_URL,
    "rest_url": REST_BASE_URL,
    # The snapshot period; the Redis key's cadence follows it (TTL = period x multiplier).
    "interval_ms": 1000,
    "depth_limit": 20,
}
KEEP_ALIVE = KeepAlive(
    server_ping_interval_s=None,  # not documented: the websocket library's own pings keep it up
    client_ping_interval_s=None,
    pong_timeout_s=20.0,
    max_connection_age_s=3600.0,  # the venue closes a connection about hourly
    max_streams_per_connection=MARKETS_PER_CONNECTION,
)


# --- wire messages ----------------------------------------------------------------------


class DepthData(msgspec.Struct, frozen=True):
    b: list[tuple[str, str]]  # bids: [price, size], best first
    a: list[tuple[str, str]]  # asks: [price, size], best first
    e: str = "depthUpdate"
    E: int | None = None  # ms: the venue's send time
    s: str | None = None  # the symbol without its underscore (BTCUSDT)
    u: int | None = None  # update id, if the venue adds one


class StreamMessage(msgspec.Struct, frozen=True):
    """Every socket frame: a push (`stream`, `data`), an ack (`result`, `id`) or an error."""

    stream: str | None = None
    data: Union[DepthData, str, None] = None  # the object, or JSON text holding it
    id: Union[int, str, None] = None
    code: Union[int, str, None] = None
    msg: str | None = None


class DepthSnapshot(msgspec.Struct, frozen=True):
    """`GET /r/fapi/v1/depth`: Binance's shape, or the venue's `{code, msg}` error."""

    bids: list[tuple[str, str]] | None = None
    asks: list[tuple[str, str]] | None = None
    lastUpdateId: int | None = None
    E: int | None = None  # ms
    T: int | None = None  # ms
    code: Union[int, str, None] = None
    msg: str = ""


class Filter(msgspec.Struct, frozen=True):
    filterType: str
    tickSize: str | None = None
    stepSize: str | None = None
    minQty: str | None = None


class Market(msgspec.Struct, frozen=True):
    symbol: str
    filters: list[Filter]
    status: str = "TRADING"
    tabdealSymbol: str | None = None


class ExchangeInfo(msgspec.Struct, frozen=True):
    symbols: list[Market] | None = None
    code: Union[int, str, None] = None
    msg: str = ""


_decode_message = msgspec.json.Decoder(StreamMessage).decode
_decode_depth = msgspec.json.Decoder(DepthData).decode
_decode_snapshot = msgspec.json.Decoder(DepthSnapshot).decode
_decode_info = msgspec.json.Decoder(ExchangeInfo).decode
_decode_markets = msgspec.json.Decoder(list[Market]).decode


# --- pure parse -------------------------------------------------------------------------


def parse(frame: bytes, received_ns: int) -> list[MarketEvent]:
    """Return the book snapshot in one frame; acks and the hourly close notice give none."""
    try:
        message = _decode_message(frame)
        if message.stream is None:
            if message.code is not None:
                raise ParseError("venue_error", f"code {message.code}: {message.msg}")
            if message.id is not None:
                return []  # the subscribe ack
            raise ParseError("schema", "neither a push, an ack nor an error")
        depth = message.data
        if depth is None:
            raise ParseError("schema", "push without data")
        if isinstance(depth, str):
            depth = _decode_depth(depth)
        symbol = stream_symbol(message.stream)
        if depth.s is not None:
            checked_symbol(depth.s)
        ts_event = received_ns if depth.E is None else ms_to_ns(depth.E)
        sequence = depth.u
        if sequence is not None and not 0 <= sequence <= MAX_INT:
            raise ParseError("number", "update id out of range")
        return [OrderBook(symbol, _levels(depth.b, "bid"), _levels(depth.a, "ask"), ts_event, received_ns, sequence)]
    except DECODE_FAILURES as exc:
        if frame.strip() == CLOSE_NOTICE:
            return []  # the venue's hourly notice: the runtime redials at the connection's max age
        raise as_parse_error(exc) from None


def stream_symbol(stream: str) -> str:
    """Return the contract a push names: `special_margin-BTC_USDT-depth-1000ms` -> BTC_USDT."""
    parts = stream.split("-")
    if len(parts) != 4 or parts[0] != "special_margin" or parts[2] != "depth":
        raise ParseError("schema", f"not a depth stream: {stream!r}")
    return checked_symbol(parts[1])


def _levels(
    rows: list[tuple[str, str]], side: str, _fixed: Callable[[str], int] = fixed, _max: int = MAX_FIXED
) -> tuple[BookLevel, ...]:
    # One pass, names bound once: a book of 20 levels a side is 80 lookups a frame.
    if len(rows) > MAX_LEVELS:
        raise ParseError("value", f"more than {MAX_LEVELS} {side} levels")
    levels: list[BookLevel] = []
    append = levels.append
    for price_text, size_text in rows:
        price, size = _fixed(price_text), _fixed(size_text)
        if not (0 < price <= _max and 0 <= size <= _max):
            if price <= 0:
                raise ParseError("price", f"{side} price not positive")
            if size < 0:
                raise ParseError("size", f"{side} size negative")
            raise ParseError("number", f"{side} level out of range")
        append((price, size))
    return tuple(levels)


# --- endpoints and subscriptions --------------------------------------------------------


def topic(symbol: str, interval_ms: int) -> str:
    return f"special_margin@{symbol}@depth@{interval_ms}ms"


def subscribe_message(symbols: Sequence[str], interval_ms: int, *, request_id: int = 1) -> str:
    return msgspec.json.encode(
        {"method": "SUBSCRIBE", "params": [topic(symbol, interval_ms) for symbol in symbols], "id": request_id}
    ).decode()


def stream_endpoints(symbols: Sequence[str], *, ws_url: str = WS_BASE_URL, interval_ms: int = 1000) -> list[Endpoint]:
    """Return one connection per MARKETS_PER_CONNECTION contracts, each with one SUBSCRIBE."""
    url = f"{ws_url.rstrip('/')}{STREAM_PATH}"
    endpoints = []
    for number, start in enumerate(range(0, len(symbols), MARKETS_PER_CONNECTION), start=1):
        chunk = list(symbols[start : start + MARKETS_PER_CONNECTION])
        endpoints.append(
            Endpoint(
                url=url,
                subscribe=(subscribe_message(chunk, interval_ms, request_id=number),),
                streams=tuple(topic(symbol, interval_ms) for symbol in chunk),
            )
        )
    return endpoints


# --- REST -------------------------------------------------------------------------------


def depth_request(symbol: str, *, rest_url: str = REST_BASE_URL, limit: int = 20) -> HttpRequest:
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{DEPTH_PATH}", params={"symbol": symbol, "limit": str(limit)})


def parse_depth_snapshot(body: bytes, symbol: str, received_ns: int) -> list[MarketEvent]:
    """Return the REST snapshot as one OrderBook; the venue's `{code,msg}` is a venue_error."""
    try:
        reply = _decode_snapshot(body)
        if reply.code is not None:
            raise ParseError("venue_error", f"code {reply.code}: {reply.msg}")
        if reply.bids is None or reply.asks is None:
            raise ParseError("schema", "depth without bids or asks")
        checked_symbol(symbol)
        sent_ms = reply.E if reply.E is not None else reply.T
        sequence = reply.lastUpdateId
        if sequence is not None and not 0 <= sequence <= MAX_INT:
            raise ParseError("number", "lastUpdateId out of range")
        ts_event = received_ns if sent_ms is None else checked_ns(ms_to_ns(sent_ms))
        return [
            OrderBook(symbol, _levels(reply.bids, "bid"), _levels(reply.asks, "ask"), ts_event, received_ns, sequence)
        ]
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def exchange_info_request(*, rest_url: str = REST_BASE_URL) -> HttpRequest:
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{EXCHANGE_INFO_PATH}")


def parse_exchange_info(body: bytes) -> list[InstrumentMeta]:
    """Return each contract's tick size (PRICE_FILTER) and step size (LOT_SIZE), market-data spelling."""
    try:
        if body.lstrip()[:1] == b"[":
            markets = _decode_markets(body)
        else:
            reply = _decode_info(body)
            if reply.code is not None:
                raise ParseError("venue_error", f"code {reply.code}: {reply.msg}")
            if reply.symbols is None:
                raise ParseError("schema", "exchangeInfo without symbols")
            markets = reply.symbols
        instruments = []
        for market in markets:
            filters = {item.filterType: item for item in market.filters}
            price_filter, lot_filter = filters.get("PRICE_FILTER"), filters.get("LOT_SIZE")
            if price_filter is None or lot_filter is None or not price_filter.tickSize or not lot_filter.stepSize:
                raise ParseError("schema", f"{market.symbol} lacks PRICE_FILTER.tickSize or LOT_SIZE.stepSize")
            fixed_positive(price_filter.tickSize)
            fixed_positive(lot_filter.stepSize)
            if lot_filter.minQty is not None:
                fixed(lot_filter.minQty)
            instruments.append(
                InstrumentMeta(
                    venue_symbol=_market_data_symbol(market),
                    tick_size=price_filter.tickSize,
                    lot_size=lot_filter.stepSize,
                    min_quantity=lot_filter.minQty,
                    status=market.status.lower(),
                )
            )
        return instruments
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _market_data_symbol(market: Market) -> str:
    """The underscore spelling market data uses; `tabdealSymbol` carries it where `symbol` does not."""
    if "_" in market.symbol or not market.tabdealSymbol:
        return checked_symbol(market.symbol)
    return checked_symbol(market.tabdealSymbol)


# --- the venue --------------------------------------------------------------------------


def _int_setting(cleaned: dict[str, object], key: str) -> int | None:
    value = cleaned[key]
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class TabdealVenue(ExchangeVenueCommon):
    name = NAME
    default_market_type = "perpetual"
    settings_defaults = DEFAULTS
    channels = CHANNELS
    keep_alive = KEEP_ALIVE
    ws_base_url = WS_BASE_URL
    rest_base_url = REST_BASE_URL

    # The module's pure function itself, so the hot path pays no extra call.
    parse = staticmethod(parse)

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        cleaned = clean_exchange_settings(self.name, settings, self.settings_defaults)
        errors: dict[str, str] = {}
        if _int_setting(cleaned, "interval_ms") not in PERIODS_MS:
            errors["interval_ms"] = f"interval_ms must be one of {', '.join(map(str, PERIODS_MS))}"
        limit = _int_setting(cleaned, "depth_limit")
        if limit is None or not 1 <= limit <= DEPTH_LIMIT_MAX:
            errors["depth_limit"] = f"depth_limit must be a whole number from 1 to {DEPTH_LIMIT_MAX}"
        if errors:
            raise ValidationError({key: [message] for key, message in errors.items()})
        return cleaned

    async def endpoints(
        self,
        symbols: Sequence[str],
        channels: Collection[str],
        settings: Mapping[str, object],
    ) -> list[Endpoint]:
        unknown = set(channels) - CHANNELS
        if unknown:
            raise ValueError(f"{NAME} has no channel {sorted(unknown)}; known: {sorted(CHANNELS)}")
        interval_ms = settings.get("interval_ms", DEFAULTS["interval_ms"])
        return stream_endpoints(
            symbols,
            ws_url=base_url(settings, "ws_url", WS_BASE_URL),
            interval_ms=int(interval_ms),  # type: ignore[call-overload]
        )

    def instruments_request(self, settings: Mapping[str, object]) -> HttpRequest:
        return exchange_info_request(rest_url=base_url(settings, "rest_url", REST_BASE_URL))

    def parse_instruments(self, body: bytes) -> list[InstrumentMeta]:
        return parse_exchange_info(body)

    # The REST fallback's source for a websocket key that expired (LatestValueVenue).
    def latest_request(self, channel: str, symbol: str, settings: Mapping[str, object]) -> HttpRequest | None:
        if channel != "order_book":
            return None
        limit: Any = settings.get("depth_limit", DEFAULTS["depth_limit"])
        return depth_request(symbol, rest_url=base_url(settings, "rest_url", REST_BASE_URL), limit=int(limit))

    def parse_latest(self, channel: str, body: bytes, symbol: str, received_ns: int) -> list[MarketEvent]:
        return parse_depth_snapshot(body, symbol, received_ns) if channel == "order_book" else []


VENUE = TabdealVenue()
