"""bitFlyer Lightning: the JSON-RPC 2.0 realtime API, executions and ticker, /v1/executions.

One connection to `wss://ws.lightstream.bitflyer.com/json-rpc`; each channel is
subscribed with a JSON-RPC request and arrives as a `channelMessage` notification:

    {"jsonrpc":"2.0","method":"channelMessage","params":{"channel":
     "lightning_executions_BTC_JPY","message":[{"id":2690216231,"side":"BUY",
     "price":13633748.0,"size":0.01,"exec_date":"2026-09-23T10:44:33.5470000Z",
     "buy_child_order_acceptance_id":"JRF20260923-104433-012345",
     "sell_child_order_acceptance_id":"JRF20260923-104431-067890"}]}}

Prices and sizes are JSON numbers (written as 13633748.0), decoded exactly from their
text. `side` is the taker's side, empty during Itayose (call auction): no aggressor.
Nothing published while disconnected is replayed, so gaps are filled from
`/v1/executions?after=<last id>`; `before` only reaches back 31 days.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Union

import msgspec

from feeds.market import MarketData, MarketEvent, Side, Ticker
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
from feeds.venues.construct import make_ticker, make_trade
from feeds.venues.errors import (
    DECODE_FAILURES,
    MAX_FIXED,
    as_parse_error,
    checked_price,
    checked_size,
    checked_symbol,
    trade_refusal,
)
from feeds.venues.exchange_settings import base_url
from feeds.venues.numbers import checked_ns, iso_utc_to_ns, json_fixed
from feeds.venues.trade_page import TradePage, parse_trade_page

NAME = "bitflyer"
WS_BASE_URL = "wss://ws.lightstream.bitflyer.com"
REST_BASE_URL = "https://api.bitflyer.com"
WS_PATH = "/json-rpc"
CHANNELS = frozenset({"trades", "ticker"})
DEFAULTS: dict[str, object] = {"ws_url": WS_BASE_URL, "rest_url": REST_BASE_URL}
_CHANNEL_PREFIX = {"trades": "lightning_executions_", "ticker": "lightning_ticker_"}
KEEP_ALIVE = KeepAlive(
    server_ping_interval_s=15.0,  # observed, not documented
    client_ping_interval_s=None,
    pong_timeout_s=60.0,
    max_connection_age_s=None,
)
HISTORY_RETENTION_S = 31 * 24 * 3600.0
MAX_PAGE_SIZE = 500
EXECUTIONS_PATH = "/v1/executions"
MARKETS_PATH = "/v1/getmarkets"


# --- wire messages ----------------------------------------------------------------------


class Execution(msgspec.Struct, frozen=True):
    id: int  # execution id, increasing
    side: str  # taker side: "BUY", "SELL", or "" during Itayose
    price: msgspec.Raw  # a JSON number, decoded exactly from its text
    size: msgspec.Raw
    exec_date: str  # ISO UTC, "Z" on the socket, without it over REST


class TickerMessage(msgspec.Struct, frozen=True):
    product_code: str
    timestamp: str  # ISO UTC with 7 fractional digits
    ltp: msgspec.Raw  # last traded price
    best_bid: msgspec.Raw = msgspec.Raw(b"")
    best_ask: msgspec.Raw = msgspec.Raw(b"")
    volume: msgspec.Raw = msgspec.Raw(b"")  # 24 h volume
    tick_id: int | None = None
    state: str | None = None


class ChannelParams(msgspec.Struct, frozen=True):
    channel: str
    message: Union[list[Execution], TickerMessage]


class RpcError(msgspec.Struct, frozen=True):
    code: int
    message: str = ""


class RpcFrame(msgspec.Struct, frozen=True):
    """A notification (`method` + `params`) or a reply (`id` + `result` or `error`)."""

    jsonrpc: str = "2.0"
    method: str | None = None
    params: ChannelParams | None = None
    id: int | None = None
    result: object = None
    error: RpcError | None = None


class Market(msgspec.Struct, frozen=True):
    product_code: str
    market_type: str = ""
    alias: str | None = None


_decode_frame = msgspec.json.Decoder(RpcFrame).decode
_decode_executions = msgspec.json.Decoder(list[Execution]).decode
_decode_execution = msgspec.json.Decoder(Execution).decode
_decode_markets = msgspec.json.Decoder(list[Market]).decode
_SIDES = {"BUY": Side.BUY, "SELL": Side.SELL, "": None}


# --- pure parse -------------------------------------------------------------------------


def parse(frame: bytes, received_ns: int) -> list[MarketEvent]:
    """Return the events in one JSON-RPC frame; replies and acks give none."""
    try:
        rpc = _decode_frame(frame)
        if rpc.error is not None:
            raise ParseError("venue_error", f"code {rpc.error.code}: {rpc.error.message}")
        if rpc.method != "channelMessage" or rpc.params is None:
            if rpc.id is not None or rpc.method is not None:
                return []  # a reply to subscribe/auth, or another notification
            raise ParseError("schema", "neither a channel message nor a reply")
        channel, message = rpc.params.channel, rpc.params.message
        if channel.startswith("lightning_executions_") and isinstance(message, list):
            symbol = channel[len("lightning_executions_") :]  # an empty one is refused per trade
            return [_trade(symbol, execution, received_ns) for execution in message]
        if channel.startswith("lightning_ticker_") and isinstance(message, TickerMessage):
            return [_ticker(message, received_ns)]
        raise ParseError("schema", f"unexpected message on channel {channel!r}")
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _trade(symbol: str, execution: Execution, received_ns: int) -> MarketData:
    try:
        side = _SIDES[execution.side]
    except KeyError:
        raise ParseError("schema", f"unknown side {execution.side!r}") from None
    price, volume = json_fixed(execution.price), json_fixed(execution.size)
    if not (0 < price <= MAX_FIXED and 0 < volume <= MAX_FIXED and symbol):
        raise trade_refusal(price, volume, symbol)  # type: ignore[misc]
    # MarketData(symbol, price, volume, ts_event, ts_recv, trade_id, side), positional.
    return make_trade(
        symbol,
        price,
        volume,
        checked_ns(iso_utc_to_ns(execution.exec_date)),
        received_ns,
        str(execution.id),
        side,
    )


def _quote(raw: msgspec.Raw) -> int | None:
    # A zero best bid/ask means no quote on that side (Itayose): absent, never zero.
    value = json_fixed(raw) if raw else 0
    if value < 0:
        raise ParseError("price", "negative quote")
    return checked_price(value, "quote") if value else None


def _ticker(ticker: TickerMessage, received_ns: int) -> Ticker:
    volume = checked_size(json_fixed(ticker.volume), "volume") if ticker.volume else None
    return make_ticker(
        symbol=checked_symbol(ticker.product_code),
        last_price=checked_price(json_fixed(ticker.ltp), "last price"),
        ts_event=checked_ns(iso_utc_to_ns(ticker.timestamp)),
        ts_recv=received_ns,
        best_bid=_quote(ticker.best_bid),
        best_ask=_quote(ticker.best_ask),
        volume_24h=volume,
    )


# --- endpoints and subscriptions --------------------------------------------------------


def channel_name(product_code: str, channel: str) -> str:
    """Return the realtime channel for a product code ("BTC_JPY") and one of CHANNELS."""
    try:
        return _CHANNEL_PREFIX[channel] + product_code
    except KeyError:
        raise ValueError(f"{NAME} has no channel {channel!r}; known: {sorted(CHANNELS)}") from None


def subscribe_messages(channels: Sequence[str], *, first_id: int = 1) -> list[str]:
    """Return one JSON-RPC subscribe request per channel (each answered with `true`)."""
    return [
        msgspec.json.encode(
            {
                "jsonrpc": "2.0",
                "method": "subscribe",
                "params": {"channel": channel},
                "id": first_id + number,
            }
        ).decode()
        for number, channel in enumerate(channels)
    ]


def stream_endpoint(
    product_codes: Sequence[str],
    channels: Collection[str],
    *,
    ws_url: str = WS_BASE_URL,
) -> Endpoint:
    names = [channel_name(code, channel) for channel in sorted(channels) for code in product_codes]
    return Endpoint(
        url=f"{ws_url.rstrip('/')}{WS_PATH}", subscribe=tuple(subscribe_messages(names)), streams=tuple(names)
    )


# --- REST -------------------------------------------------------------------------------


def executions_request(query: TradeQuery, *, rest_url: str = REST_BASE_URL) -> HttpRequest:
    """Return GET /v1/executions for one page (newest first, ids between the bounds)."""
    if query.start_ms is not None or query.end_ms is not None:
        raise ValueError("bitFlyer executions page by id (after/before), not by time")
    params = {"product_code": query.symbol}
    if query.after_id is not None:
        params["after"] = str(query.after_id)
    if query.before_id is not None:
        params["before"] = str(query.before_id)
    if query.limit is not None:
        if not 1 <= query.limit <= MAX_PAGE_SIZE:
            raise ValueError(f"count must be 1..{MAX_PAGE_SIZE}")
        params["count"] = str(query.limit)
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{EXECUTIONS_PATH}", params)


def parse_executions(body: bytes, symbol: str, received_ns: int) -> list[MarketData]:
    """Return the trades of an executions response, oldest first (the venue sends newest first)."""
    try:
        trades = [_trade(symbol, execution, received_ns) for execution in _decode_executions(body)]
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None
    trades.sort(key=lambda trade: int(trade.trade_id or 0))
    return trades


def parse_execution_page(body: bytes, symbol: str, received_ns: int) -> TradePage:
    """`parse_executions`, but a bad row is refused on its own and the rest of the page kept."""
    return parse_trade_page(
        body,
        parse_all=lambda whole: parse_executions(whole, symbol, received_ns),
        parse_row=lambda raw: _trade(symbol, _decode_execution(raw), received_ns),
        id_key="id",
    )


def markets_request(*, rest_url: str = REST_BASE_URL) -> HttpRequest:
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{MARKETS_PATH}")


def parse_markets(body: bytes) -> list[InstrumentMeta]:
    """Return the product codes; the market list publishes no tick or lot size."""
    try:
        markets = _decode_markets(body)
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None
    return [
        InstrumentMeta(venue_symbol=market.product_code, tick_size=None, lot_size=None, status="trading")
        for market in markets
    ]


# --- the venue --------------------------------------------------------------------------

# 500 requests / 5 min per IP; dials are unpublished ("rapid connect/disconnect loops"
# get restricted), so a cautious 60 / 5 min.
LIMITS = PublishedLimits(500, 300, 1, 60, 300, None)


class BitflyerVenue(ExchangeVenueCommon):
    name = NAME
    settings_defaults = DEFAULTS
    limits = LIMITS
    channels = CHANNELS
    keep_alive = KEEP_ALIVE
    ws_base_url = WS_BASE_URL
    rest_base_url = REST_BASE_URL
    history_retention_s = HISTORY_RETENTION_S
    max_window_ms: int | None = None
    max_page_size = MAX_PAGE_SIZE

    # The module's pure function itself, so the hot path pays no extra call.
    parse = staticmethod(parse)

    async def endpoints(
        self,
        symbols: Sequence[str],
        channels: Collection[str],
        settings: Mapping[str, object],
    ) -> list[Endpoint]:
        return [stream_endpoint(symbols, channels, ws_url=base_url(settings, "ws_url", WS_BASE_URL))]

    def instruments_request(self, settings: Mapping[str, object]) -> HttpRequest:
        return markets_request(rest_url=base_url(settings, "rest_url", REST_BASE_URL))

    def parse_instruments(self, body: bytes) -> list[InstrumentMeta]:
        return parse_markets(body)

    def trades_request(self, query: TradeQuery, settings: Mapping[str, object]) -> HttpRequest:
        return executions_request(query, rest_url=base_url(settings, "rest_url", REST_BASE_URL))

    def parse_trades(self, body: bytes, symbol: str, received_ns: int) -> list[MarketData]:
        return parse_executions(body, symbol, received_ns)

    def parse_trade_page(self, body: bytes, symbol: str, received_ns: int) -> TradePage:
        return parse_execution_page(body, symbol, received_ns)


VENUE = BitflyerVenue()
