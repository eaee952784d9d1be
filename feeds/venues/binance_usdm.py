"""Binance USD-M futures: combined market streams, exchangeInfo, aggTrades REST.

Streams are routed by path since 2026: `/market` carries aggTrade and markPrice,
`/public` carries bookTicker. A connection on the legacy `/ws` or `/stream` path only
receives `/public` streams, so aggTrade there delivers nothing, silently. Each path gets
its own connection, in combined mode, where every event arrives wrapped:

    {"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1732924800125,"s":"BTCUSDT",
     "a":2435013397,"p":"96712.40","q":"0.015","f":5608221870,"l":5608221871,
     "T":1732924800123,"m":true}}

`m` is "the buyer is the market maker", so `m=true` means the seller was the aggressor.
A connection lives 24 h; the server pings every 3 minutes and drops a client that has
not answered within 10 minutes; at most 10 incoming messages per second and 1024
streams per connection. aggTrades REST only reaches back 24 hours, and a window with
both startTime and endTime must be shorter than one hour.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Union

import msgspec

from feeds.market import BookTicker, MarketData, MarketEvent, MarkPrice, Side
from feeds.venues.base import (
    Endpoint,
    ExchangeVenueCommon,
    HttpRequest,
    InstrumentMeta,
    KeepAlive,
    ParseError,
    PublishedLimits,
    TradeQuery,
)
from feeds.venues.construct import make_book_ticker, make_mark_price, make_trade
from feeds.venues.errors import (
    DECODE_FAILURES,
    MAX_FIXED,
    MAX_INT,
    as_parse_error,
    checked_price,
    checked_trade_size,
    trade_refusal,
    values_refusal,
)
from feeds.venues.exchange_settings import base_url
from feeds.venues.numbers import MAX_TS_NS, MIN_TS_NS, fixed, fixed_positive, ms_to_ns
from feeds.venues.trade_page import TradePage, parse_trade_page

NAME = "binance-usdm"
WS_BASE_URL = "wss://fstream.binance.com"
REST_BASE_URL = "https://fapi.binance.com"
CHANNELS = frozenset({"trades", "mark_price", "book_ticker"})
DEFAULTS: dict[str, object] = {
    "ws_url": WS_BASE_URL,
    "rest_url": REST_BASE_URL,
    # `@markPrice@1s` instead of the 3 s default stream.
    "mark_price_1s": True,
}
# Which routed path serves which channel, and the stream name for a lower-case symbol.
_CHANNEL_PATH = {"trades": "/market", "mark_price": "/market", "book_ticker": "/public"}
KEEP_ALIVE = KeepAlive(
    server_ping_interval_s=180.0,
    client_ping_interval_s=None,  # the library answers the server's pings
    pong_timeout_s=600.0,
    max_connection_age_s=24 * 3600.0,
    max_incoming_messages_per_s=10.0,
    max_streams_per_connection=1024,
)
# Streams per SUBSCRIBE message: one message subscribes many, and the venue allows only
# 10 incoming messages per second, so a full connection needs a handful of messages.
SUBSCRIBE_BATCH = 200
HISTORY_RETENTION_S = 24 * 3600.0
MAX_WINDOW_MS = 3_600_000  # end - start must be below this
MAX_PAGE_SIZE = 1000
AGG_TRADES_PATH = "/fapi/v1/aggTrades"
EXCHANGE_INFO_PATH = "/fapi/v1/exchangeInfo"


# --- wire messages, with the venue's own field names ------------------------------------


class AggTrade(msgspec.Struct, tag_field="e", tag="aggTrade", frozen=True):
    # `E` (event time) is left undeclared: the decoder skips it without building an int,
    # which pays for the range checks of the hot path. The trade time is `T`.
    s: str  # symbol
    a: int  # aggregate trade id
    p: str  # price
    q: str  # quantity (incl. RPI orders); `nq` excludes them and is ignored here
    T: int  # trade time, ms
    m: bool  # buyer is the market maker: the seller was the aggressor


class MarkPriceUpdate(msgspec.Struct, tag_field="e", tag="markPriceUpdate", frozen=True):
    E: int  # event time, ms
    s: str  # symbol
    p: str  # mark price
    i: str = ""  # index price
    r: str = ""  # funding rate; empty for delivery contracts
    T: int = 0  # next funding time, ms; 0 when there is none


class BookTickerEvent(msgspec.Struct, tag_field="e", tag="bookTicker", frozen=True):
    u: int  # order book update id
    T: int  # transaction time, ms
    s: str  # symbol
    b: str  # best bid price
    B: str  # best bid quantity
    a: str  # best ask price
    A: str  # best ask quantity


Payload = Union[AggTrade, MarkPriceUpdate, BookTickerEvent, list[MarkPriceUpdate]]


class Combined(msgspec.Struct, frozen=True):
    # `stream` (the stream name, "btcusdt@aggTrade") is skipped, not decoded into a str:
    # the payload names its kind and symbol itself.
    data: Payload


class Reply(msgspec.Struct, frozen=True):
    """A reply to SUBSCRIBE and friends, or an error: {"result":null,"id":1}, {"code":2,"msg":..}."""

    id: int | None = None
    result: object = None
    code: int | None = None
    msg: str | None = None


class RestAggTrade(msgspec.Struct, frozen=True):
    a: int  # aggregate trade id
    p: str  # price
    q: str  # quantity
    T: int  # trade time, ms
    m: bool  # buyer is the market maker


class SymbolFilter(msgspec.Struct, frozen=True):
    filterType: str
    tickSize: str | None = None  # PRICE_FILTER
    stepSize: str | None = None  # LOT_SIZE
    minQty: str | None = None  # LOT_SIZE


class SymbolInfo(msgspec.Struct, frozen=True):
    symbol: str
    status: str
    filters: list[SymbolFilter]
    contractType: str = ""


class ExchangeInfo(msgspec.Struct, frozen=True):
    symbols: list[SymbolInfo]


_SELL, _BUY = Side.SELL, Side.BUY
_MAX = MAX_FIXED
_decode_combined = msgspec.json.Decoder(Combined).decode
_decode_raw = msgspec.json.Decoder(Payload).decode
_decode_reply = msgspec.json.Decoder(Reply).decode
_decode_rest_trades = msgspec.json.Decoder(list[RestAggTrade]).decode
_decode_rest_trade = msgspec.json.Decoder(RestAggTrade).decode
_decode_exchange_info = msgspec.json.Decoder(ExchangeInfo).decode


# --- pure parse -------------------------------------------------------------------------


def parse(frame: bytes, received_ns: int) -> list[MarketEvent]:
    """Return the events in one websocket frame (combined or raw); no I/O, no state."""
    try:
        # Combined mode is the normal case; telling it by its first key keeps exceptions
        # (slow) off the hot path.
        payload: Payload | None
        if frame.startswith(b'{"stream":'):
            payload = _decode_combined(frame).data
        else:
            payload = _decode_raw_or_reply(frame)
            if payload is None:
                return []
        # The hottest lines of the feed: positional construction, in field order, and
        # the checks inline rather than behind helper calls.
        if isinstance(payload, AggTrade):
            price, volume, ts_event = fixed(payload.p), fixed(payload.q), payload.T * 1_000_000
            # One chain of plain comparisons: the cheapest form of the range test.
            if (
                price <= 0
                or volume <= 0
                or price > _MAX
                or volume > _MAX
                or not MIN_TS_NS <= ts_event < MAX_TS_NS
                or not payload.s
            ):
                raise _refused_trade(payload, price, volume)
            # MarketData(symbol, price, volume, ts_event, ts_recv, trade_id, side):
            # m = the buyer is the maker, so the seller was the aggressor.
            return [
                make_trade(
                    payload.s, price, volume, ts_event, received_ns, str(payload.a), _SELL if payload.m else _BUY
                )
            ]
        if isinstance(payload, MarkPriceUpdate):
            return [_mark_price(payload, received_ns)]
        if isinstance(payload, BookTickerEvent):
            return [_book_ticker(payload, received_ns)]
        return [_mark_price(update, received_ns) for update in payload]  # !markPrice@arr
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _refused_trade(trade: AggTrade, price: int, volume: int) -> ParseError:
    """Say why an aggTrade failed the hot path's one combined check."""
    return trade_refusal(price, volume, trade.s) or ParseError("value", f"aggTrade {trade.a}: time out of range")


def _decode_raw_or_reply(frame: bytes) -> Payload | None:
    """Decode a raw-mode payload, or return None for a subscription reply."""
    try:
        return _decode_raw(frame)
    except msgspec.ValidationError as payload_error:
        try:
            reply = _decode_reply(frame)
        except msgspec.ValidationError:
            raise payload_error from None
        if reply.code is not None:
            raise ParseError("venue_error", f"code {reply.code}: {reply.msg}") from None
        if reply.id is None:
            raise payload_error from None
        return None


def _mark_price(update: MarkPriceUpdate, received_ns: int) -> MarkPrice:
    mark, ts_event = fixed(update.p), update.E * 1_000_000
    index = fixed(update.i) if update.i else None
    # An empty rate means "no funding" (delivery contracts): absent, never zero.
    rate = fixed(update.r) if update.r else None
    if (
        mark <= 0
        or mark > _MAX
        or not update.s
        or (index is not None and (index <= 0 or index > _MAX))
        or (rate is not None and (rate > _MAX or rate < -_MAX))
    ):
        raise values_refusal(update.s, prices=(mark, index), signed=(rate,))
    next_funding_ns = update.T * 1_000_000 if update.T else None
    if not MIN_TS_NS <= ts_event < MAX_TS_NS or (
        next_funding_ns is not None and not MIN_TS_NS <= next_funding_ns < MAX_TS_NS
    ):
        raise ParseError("value", f"markPrice {update.s}: time out of range")
    # MarkPrice(symbol, mark_price, ts_event, ts_recv, index_price, funding_rate, next_funding_ns)
    return make_mark_price(update.s, mark, ts_event, received_ns, index, rate, next_funding_ns)


def _book_ticker(book: BookTickerEvent, received_ns: int) -> BookTicker:
    bid, bid_size, ask, ask_size = fixed(book.b), fixed(book.B), fixed(book.a), fixed(book.A)
    if not (
        0 < bid <= _MAX
        and 0 < ask <= _MAX
        and 0 <= bid_size <= _MAX
        and 0 <= ask_size <= _MAX
        and book.s
        and 0 <= book.u <= MAX_INT
    ):
        raise values_refusal(book.s, prices=(bid, ask), sizes=(bid_size, ask_size), integers=(book.u,))
    # BookTicker(symbol, bid_price, bid_size, ask_price, ask_size, ts_event, ts_recv, sequence)
    return make_book_ticker(book.s, bid, bid_size, ask, ask_size, ms_to_ns(book.T), received_ns, book.u)


# --- endpoints and subscriptions --------------------------------------------------------


def stream_name(symbol: str, channel: str, *, mark_price_1s: bool = True) -> str:
    """Return the venue's stream name for a symbol and one of CHANNELS."""
    lower = symbol.lower()
    if channel == "trades":
        return f"{lower}@aggTrade"
    if channel == "mark_price":
        return f"{lower}@markPrice@1s" if mark_price_1s else f"{lower}@markPrice"
    if channel == "book_ticker":
        return f"{lower}@bookTicker"
    raise ValueError(f"{NAME} has no channel {channel!r}; known: {sorted(CHANNELS)}")


def subscribe_messages(streams: Sequence[str], *, first_id: int = 1) -> list[str]:
    """Return SUBSCRIBE requests for `streams`, SUBSCRIBE_BATCH streams per message."""
    return [
        msgspec.json.encode(
            {
                "method": "SUBSCRIBE",
                "params": list(streams[start : start + SUBSCRIBE_BATCH]),
                "id": first_id + number,
            }
        ).decode()
        for number, start in enumerate(range(0, len(streams), SUBSCRIBE_BATCH))
    ]


def stream_endpoints(
    symbols: Sequence[str],
    channels: Collection[str],
    *,
    ws_url: str = WS_BASE_URL,
    mark_price_1s: bool = True,
) -> list[Endpoint]:
    """Return one combined-stream connection per routed path (and per 1024 streams)."""
    by_path: dict[str, list[str]] = {}
    for channel in sorted(channels):
        if channel not in CHANNELS:
            raise ValueError(f"{NAME} has no channel {channel!r}; known: {sorted(CHANNELS)}")
        by_path.setdefault(_CHANNEL_PATH[channel], []).extend(
            stream_name(symbol, channel, mark_price_1s=mark_price_1s) for symbol in symbols
        )
    limit = KEEP_ALIVE.max_streams_per_connection or len(symbols) * len(CHANNELS)
    endpoints = []
    for path, streams in sorted(by_path.items()):
        for start in range(0, len(streams), limit):
            chunk = streams[start : start + limit]
            endpoints.append(
                Endpoint(
                    url=f"{ws_url.rstrip('/')}{path}/stream",
                    subscribe=tuple(subscribe_messages(chunk)),
                    streams=tuple(chunk),
                )
            )
    return endpoints


# --- REST -------------------------------------------------------------------------------


def agg_trades_request(query: TradeQuery, *, rest_url: str = REST_BASE_URL) -> HttpRequest:
    """Return GET /fapi/v1/aggTrades for one page.

    Page by id (`after_id`) or by a time window, never both: the venue warns that the
    combination may time out. A window must be shorter than one hour.
    """
    params = {"symbol": query.symbol.upper()}
    if query.before_id is not None:
        raise ValueError("aggTrades cannot page backwards by id: use a time window")
    if query.after_id is not None:
        if query.start_ms is not None or query.end_ms is not None:
            raise ValueError("page aggTrades by id or by time, not both")
        params["fromId"] = str(query.after_id + 1)  # fromId is inclusive
    if query.start_ms is not None:
        params["startTime"] = str(query.start_ms)
    if query.end_ms is not None:
        params["endTime"] = str(query.end_ms)
    if query.start_ms is not None and query.end_ms is not None:
        if not 0 <= query.end_ms - query.start_ms < MAX_WINDOW_MS:
            raise ValueError(f"aggTrades window must satisfy 0 <= end - start < {MAX_WINDOW_MS} ms")
    if query.limit is not None:
        if not 1 <= query.limit <= MAX_PAGE_SIZE:
            raise ValueError(f"limit must be 1..{MAX_PAGE_SIZE}")
        params["limit"] = str(query.limit)
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{AGG_TRADES_PATH}", params)


def parse_agg_trades(body: bytes, symbol: str, received_ns: int) -> list[MarketData]:
    """Return the trades of an aggTrades response (`[{a,p,q,f,l,T,m}]`, oldest first)."""
    try:
        return [_rest_trade(row, symbol, received_ns) for row in _decode_rest_trades(body)]
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _rest_trade(row: RestAggTrade, symbol: str, received_ns: int) -> MarketData:
    return make_trade(
        symbol=symbol.upper(),
        price=checked_price(fixed(row.p)),
        volume=checked_trade_size(fixed(row.q), "quantity"),
        ts_event=ms_to_ns(row.T),
        ts_recv=received_ns,
        trade_id=str(row.a),
        side=Side.SELL if row.m else Side.BUY,
    )


def parse_agg_trade_page(body: bytes, symbol: str, received_ns: int) -> TradePage:
    """`parse_agg_trades`, but a bad row is refused on its own and the rest of the page kept."""
    return parse_trade_page(
        body,
        parse_all=lambda whole: parse_agg_trades(whole, symbol, received_ns),
        parse_row=lambda raw: _rest_trade(_decode_rest_trade(raw), symbol, received_ns),
        id_key="a",
    )


def exchange_info_request(*, rest_url: str = REST_BASE_URL) -> HttpRequest:
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{EXCHANGE_INFO_PATH}")


def parse_exchange_info(body: bytes) -> list[InstrumentMeta]:
    """Return every symbol's tick size (PRICE_FILTER) and step size (LOT_SIZE).

    `pricePrecision` and `quantityPrecision` are not tick and step sizes (the venue
    says so), so only the filters count.
    """
    try:
        info = _decode_exchange_info(body)
        instruments = []
        for symbol in info.symbols:
            filters = {item.filterType: item for item in symbol.filters}
            price_filter, lot_filter = filters.get("PRICE_FILTER"), filters.get("LOT_SIZE")
            if price_filter is None or lot_filter is None or not price_filter.tickSize or not lot_filter.stepSize:
                raise ParseError("schema", f"{symbol.symbol} lacks PRICE_FILTER.tickSize or LOT_SIZE.stepSize")
            fixed_positive(price_filter.tickSize)
            fixed_positive(lot_filter.stepSize)
            instruments.append(
                InstrumentMeta(
                    venue_symbol=symbol.symbol,
                    tick_size=price_filter.tickSize,
                    lot_size=lot_filter.stepSize,
                    min_quantity=lot_filter.minQty,
                    status=symbol.status.lower(),
                )
            )
        return instruments
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


# --- the venue --------------------------------------------------------------------------

# REQUEST_WEIGHT 2400/min, aggTrades weight 20, 10 incoming messages/s per connection;
# the dial limit is not published for futures, so the spot figure (300 connections per
# 5 min) stands in.
LIMITS = PublishedLimits(2400, 60, 20, 300, 300, 10)


class BinanceUsdmVenue(ExchangeVenueCommon):
    name = NAME
    settings_defaults = DEFAULTS
    limits = LIMITS
    default_market_type = "perpetual"
    channels = CHANNELS
    keep_alive = KEEP_ALIVE
    ws_base_url = WS_BASE_URL
    rest_base_url = REST_BASE_URL
    history_retention_s = HISTORY_RETENTION_S
    max_window_ms: int | None = MAX_WINDOW_MS
    max_page_size = MAX_PAGE_SIZE

    # The module's pure function itself, so the hot path pays no extra call.
    parse = staticmethod(parse)

    async def endpoints(
        self,
        symbols: Sequence[str],
        channels: Collection[str],
        settings: Mapping[str, object],
    ) -> list[Endpoint]:
        return stream_endpoints(
            symbols,
            channels,
            ws_url=base_url(settings, "ws_url", WS_BASE_URL),
            mark_price_1s=bool(settings.get("mark_price_1s", True)),
        )

    def instruments_request(self, settings: Mapping[str, object]) -> HttpRequest:
        return exchange_info_request(rest_url=base_url(settings, "rest_url", REST_BASE_URL))

    def parse_instruments(self, body: bytes) -> list[InstrumentMeta]:
        return parse_exchange_info(body)

    def trades_request(self, query: TradeQuery, settings: Mapping[str, object]) -> HttpRequest:
        return agg_trades_request(query, rest_url=base_url(settings, "rest_url", REST_BASE_URL))

    def parse_trades(self, body: bytes, symbol: str, received_ns: int) -> list[MarketData]:
        return parse_agg_trades(body, symbol, received_ns)

    def parse_trade_page(self, body: bytes, symbol: str, received_ns: int) -> TradePage:
        return parse_agg_trade_page(body, symbol, received_ns)


VENUE = BinanceUsdmVenue()
