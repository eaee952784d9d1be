"""Dzengi (ex Currency.com): the websocket trades stream, exchangeInfo, aggTrades REST.

Every websocket message, both ways, is one envelope `{destination, correlationId,
payload}`. The client subscribes with

    {"destination":"trades.subscribe","correlationId":1,"payload":{"symbols":["BTC/USD"]}}

and is answered on the same correlationId; trades then arrive as

    {"status":"OK","destination":"internal.trade","payload":{"price":11400.95,"size":0.058,
     "id":1616651347,"ts":1596625079952,"symbol":"BTC/USD","orderId":"00a0..316a",
     "clientOrderId":"00a0..3a06","buyer":true}}

Prices and sizes are JSON numbers, decoded exactly from their text; `ts` is in
milliseconds. The venue closes a connection that is not pinged within 30 seconds, so
the client sends `{"destination":"ping",...}` on an interval well inside that.
Nothing published while disconnected is replayed: gaps come from `GET /api/v1/aggTrades`,
which takes startTime/endTime (inclusive, less than one hour apart) and returns trades
oldest first, at most 1000 a page; it has no id cursor, so a full page is continued from
the time of its last trade. Symbols carry slashes and spaces ("BTC/USD",
"BTC/USD_LEVERAGE", "Oil - Brent") and are sent as the venue spells them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import msgspec
from django.core.exceptions import ValidationError

from feeds.market import MarketData, MarketEvent, Side
from feeds.venues.base import (
    Endpoint,
    ExchangeVenueCommon,
    HttpRequest,
    InstrumentMeta,
    KeepAlive,
    ParseError,
    PublishedLimits,
    TradeQuery,
    WireMessage,
)
from feeds.venues.construct import make_trade
from feeds.venues.errors import (
    DECODE_FAILURES,
    MAX_FIXED,
    as_parse_error,
    checked_price,
    checked_trade_size,
    trade_refusal,
)
from feeds.venues.exchange_settings import base_url, clean_exchange_settings
from feeds.venues.numbers import MAX_TS_NS, MIN_TS_NS, json_fixed, ms_to_ns

NAME = "dzengi"
WS_BASE_URL = "wss://api-adapter.dzengi.com"
REST_BASE_URL = "https://api-adapter.dzengi.com"
DEMO_WS_BASE_URL = "wss://demo-api-adapter.dzengi.com"
DEMO_REST_BASE_URL = "https://demo-api-adapter.dzengi.com"
WS_PATH = "/connect"
API_VERSIONS = ("v1", "v2")  # v2 adds the Hong Kong markets
CHANNELS = frozenset({"trades"})
DEFAULTS: dict[str, object] = {
    "ws_url": WS_BASE_URL,
    "rest_url": REST_BASE_URL,
    # The demo account's endpoints instead of production (explicit URLs still win).
    "demo": False,
    "api_version": "v1",
}
SUBSCRIBE_DESTINATION = "trades.subscribe"
TRADE_DESTINATION = "internal.trade"
PING_DESTINATION = "ping"
# The venue drops a connection that is not pinged for 30 s: ping at a third of that, so
# one lost ping still leaves a margin.
CLIENT_PING_INTERVAL_S = 10.0
KEEP_ALIVE = KeepAlive(
    server_ping_interval_s=None,
    client_ping_interval_s=CLIENT_PING_INTERVAL_S,
    pong_timeout_s=30.0,
    max_connection_age_s=None,
)
# Symbols per subscribe request: one request carries a list.
SUBSCRIBE_BATCH = 100
HISTORY_RETENTION_S = 24 * 3600.0  # unpublished: plan for a day, as for Binance
MAX_WINDOW_MS = 3_600_000  # end - start must be below this
MAX_PAGE_SIZE = 1000
AGG_TRADES_PATH = "/api/{version}/aggTrades"
EXCHANGE_INFO_PATH = "/api/{version}/exchangeInfo"


# --- wire messages, with the venue's own field names ------------------------------------


class TradePayload(msgspec.Struct, frozen=True):
    # orderId / clientOrderId are left undeclared: skipped without building strings.
    symbol: str
    id: int  # trade id, increasing per symbol
    price: msgspec.Raw  # a JSON number, decoded exactly from its text
    size: msgspec.Raw
    ts: int  # trade time, ms
    buyer: bool  # the taker bought


class Envelope(msgspec.Struct, frozen=True):
    status: str = "OK"
    destination: str | None = None
    correlationId: str | int | None = None
    # Decoded only for a trade: everything else the stream sees (replies, pongs) is skipped.
    payload: msgspec.Raw = msgspec.Raw(b"null")


class ErrorPayload(msgspec.Struct, frozen=True):
    errorMessage: str = ""
    code: int | None = None
    msg: str = ""


class RestAggTrade(msgspec.Struct, frozen=True):
    a: int  # aggregate trade id
    p: msgspec.Raw  # price: a string or a number
    q: msgspec.Raw  # quantity
    T: int  # trade time, ms
    m: bool  # the buyer was the maker: the seller was the aggressor


class SymbolFilter(msgspec.Struct, frozen=True):
    filterType: str
    tickSize: msgspec.Raw = msgspec.Raw(b"")
    stepSize: msgspec.Raw = msgspec.Raw(b"")
    minQty: msgspec.Raw = msgspec.Raw(b"")


class SymbolInfo(msgspec.Struct, frozen=True):
    symbol: str
    status: str = "TRADING"
    filters: list[SymbolFilter] = []
    tickSize: msgspec.Raw = msgspec.Raw(b"")


class ExchangeInfo(msgspec.Struct, frozen=True):
    symbols: list[SymbolInfo]


_SELL, _BUY = Side.SELL, Side.BUY
_MAX = MAX_FIXED
_decode_envelope = msgspec.json.Decoder(Envelope).decode
_decode_trade = msgspec.json.Decoder(TradePayload).decode
_decode_error = msgspec.json.Decoder(ErrorPayload).decode
_decode_rest_trades = msgspec.json.Decoder(list[RestAggTrade]).decode
_decode_exchange_info = msgspec.json.Decoder(ExchangeInfo).decode


# --- pure parse -------------------------------------------------------------------------


def parse(frame: bytes, received_ns: int) -> list[MarketEvent]:
    """Return the trade in one websocket message; replies and pongs give none."""
    try:
        envelope = _decode_envelope(frame)
        if envelope.status != "OK":
            raise _venue_error(envelope)
        if envelope.destination != TRADE_DESTINATION:
            if envelope.destination is None and envelope.correlationId is None:
                raise ParseError("schema", "neither a trade nor a reply")
            return []  # a subscribe reply, a pong, another stream's event
        trade = _decode_trade(envelope.payload)
        price, volume, ts_event = json_fixed(trade.price), json_fixed(trade.size), trade.ts * 1_000_000
        if (
            price <= 0
            or volume <= 0
            or price > _MAX
            or volume > _MAX
            or not MIN_TS_NS <= ts_event < MAX_TS_NS
            or not trade.symbol
        ):
            raise trade_refusal(price, volume, trade.symbol) or ParseError(
                "value", f"trade {trade.id}: time out of range"
            )
        # MarketData(symbol, price, volume, ts_event, ts_recv, trade_id, side), positional.
        return [
            make_trade(
                trade.symbol, price, volume, ts_event, received_ns, str(trade.id), _BUY if trade.buyer else _SELL
            )
        ]
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _venue_error(envelope: Envelope) -> ParseError:
    try:
        error = _decode_error(envelope.payload)
        detail = error.errorMessage or error.msg
    except DECODE_FAILURES:
        detail = ""
    return ParseError("venue_error", f"status {envelope.status[:40]!r}: {detail[:200]}")


# --- endpoints and subscriptions --------------------------------------------------------


def _message(destination: str, correlation_id: int, payload: Mapping[str, object]) -> str:
    return msgspec.json.encode(
        {"destination": destination, "correlationId": correlation_id, "payload": payload}
    ).decode()


def subscribe_messages(symbols: Sequence[str], *, first_id: int = 1) -> list[str]:
    """Return trades.subscribe requests for `symbols`, SUBSCRIBE_BATCH symbols per request."""
    return [
        _message(SUBSCRIBE_DESTINATION, first_id + number, {"symbols": list(symbols[start : start + SUBSCRIBE_BATCH])})
        for number, start in enumerate(range(0, len(symbols), SUBSCRIBE_BATCH))
    ]


def ping_message(counter: int) -> str:
    """The keep-alive the venue wants inside every 30 s."""
    # Pings count from a high base so they never share a correlationId with a subscribe.
    return _message(PING_DESTINATION, 1_000_000 + counter, {})


def stream_endpoint(symbols: Sequence[str], channels: Collection[str], *, ws_url: str = WS_BASE_URL) -> Endpoint:
    for channel in channels:
        if channel not in CHANNELS:
            raise ValueError(f"{NAME} has no channel {channel!r}; known: {sorted(CHANNELS)}")
    return Endpoint(
        url=f"{ws_url.rstrip('/')}{WS_PATH}",
        subscribe=tuple(subscribe_messages(list(symbols))),
        streams=tuple(symbols),
    )


# --- REST -------------------------------------------------------------------------------


def agg_trades_request(query: TradeQuery, *, rest_url: str = REST_BASE_URL, version: str = "v1") -> HttpRequest:
    """Return GET /api/v1/aggTrades for one page, bounded by time (the venue has no id cursor)."""
    if query.after_id is not None or query.before_id is not None:
        raise ValueError("Dzengi aggTrades page by time (startTime/endTime), not by id")
    params = {"symbol": query.symbol}
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
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{AGG_TRADES_PATH.format(version=version)}", params)


def parse_agg_trades(body: bytes, symbol: str, received_ns: int) -> list[MarketData]:
    """Return the trades of an aggTrades response (`[{a,p,q,T,m}]`, oldest first)."""
    try:
        return [
            make_trade(
                symbol,
                checked_price(json_fixed(row.p)),
                checked_trade_size(json_fixed(row.q), "quantity"),
                ms_to_ns(row.T),
                received_ns,
                str(row.a),
                _SELL if row.m else _BUY,
            )
            for row in _decode_rest_trades(body)
        ]
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def exchange_info_request(*, rest_url: str = REST_BASE_URL, version: str = "v1") -> HttpRequest:
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{EXCHANGE_INFO_PATH.format(version=version)}")


def _decimal_text(raw: msgspec.Raw) -> str | None:
    """A filter value as exact decimal text (the venue writes some as numbers, some as strings)."""
    data = bytes(raw).strip()
    if not data:
        return None
    text = data.decode().strip('"')
    json_fixed(raw)  # refuses what is not an exact, in-range decimal
    return text


def parse_exchange_info(body: bytes) -> list[InstrumentMeta]:
    """Return every symbol with its tick size (PRICE_FILTER or the symbol's own) and lot step."""
    try:
        info = _decode_exchange_info(body)
        instruments = []
        for symbol in info.symbols:
            filters = {item.filterType: item for item in symbol.filters}
            price_filter, lot_filter = filters.get("PRICE_FILTER"), filters.get("LOT_SIZE")
            tick = _decimal_text(price_filter.tickSize) if price_filter is not None else None
            instruments.append(
                InstrumentMeta(
                    venue_symbol=symbol.symbol,
                    tick_size=tick or _decimal_text(symbol.tickSize),
                    lot_size=_decimal_text(lot_filter.stepSize) if lot_filter is not None else None,
                    min_quantity=_decimal_text(lot_filter.minQty) if lot_filter is not None else None,
                    status=symbol.status.lower(),
                )
            )
        return instruments
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


# --- the venue --------------------------------------------------------------------------

# The venue publishes no figures on its pages (429 and 418 as Binance's); its
# exchangeInfo carries rateLimits per account. Cautious figures until measured.
LIMITS = PublishedLimits(600, 60, 1, 60, 300, 5)


def _version(settings: Mapping[str, object]) -> str:
    value = settings.get("api_version", "v1")
    return value if isinstance(value, str) and value in API_VERSIONS else "v1"


class DzengiVenue(ExchangeVenueCommon):
    name = NAME
    settings_defaults = DEFAULTS
    limits = LIMITS
    channels = CHANNELS
    keep_alive = KEEP_ALIVE
    ws_base_url = WS_BASE_URL
    rest_base_url = REST_BASE_URL
    history_retention_s = HISTORY_RETENTION_S
    max_window_ms: int | None = MAX_WINDOW_MS
    max_page_size = MAX_PAGE_SIZE
    # No id cursor on aggTrades: a full page continues from its last trade's time.
    pages_by_id = False

    # The module's pure function itself, so the hot path pays no extra call.
    parse = staticmethod(parse)

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        """Fill the account's URLs from `demo`; a URL of its own (a local fake) still wins.

        Saved settings carry the URLs filled in, so a URL that is the other account's
        default follows `demo` when it is switched, instead of pinning the old account.
        """
        demo = settings.get("demo", False) is True
        wanted = {"ws_url": DEMO_WS_BASE_URL, "rest_url": DEMO_REST_BASE_URL} if demo else {}
        other = (
            {"ws_url": WS_BASE_URL, "rest_url": REST_BASE_URL}
            if demo
            else {"ws_url": DEMO_WS_BASE_URL, "rest_url": DEMO_REST_BASE_URL}
        )
        given = dict(settings)
        for key, url in other.items():
            if isinstance(given.get(key), str) and str(given[key]).rstrip("/") == url:
                del given[key]
        cleaned = clean_exchange_settings(self.name, given, {**DEFAULTS, **wanted})
        if cleaned["api_version"] not in API_VERSIONS:
            raise ValidationError({"api_version": [f"api_version must be one of {', '.join(API_VERSIONS)}"]})
        return cleaned

    async def endpoints(
        self,
        symbols: Sequence[str],
        channels: Collection[str],
        settings: Mapping[str, object],
    ) -> list[Endpoint]:
        return [stream_endpoint(symbols, channels, ws_url=base_url(settings, "ws_url", WS_BASE_URL))]

    def ping_message(self, counter: int) -> WireMessage | None:
        return ping_message(counter)

    def instruments_request(self, settings: Mapping[str, object]) -> HttpRequest:
        return exchange_info_request(rest_url=base_url(settings, "rest_url", REST_BASE_URL), version=_version(settings))

    def parse_instruments(self, body: bytes) -> list[InstrumentMeta]:
        return parse_exchange_info(body)

    def trades_request(self, query: TradeQuery, settings: Mapping[str, object]) -> HttpRequest:
        return agg_trades_request(
            query, rest_url=base_url(settings, "rest_url", REST_BASE_URL), version=_version(settings)
        )

    def parse_trades(self, body: bytes, symbol: str, received_ns: int) -> list[MarketData]:
        return parse_agg_trades(body, symbol, received_ns)


VENUE = DzengiVenue()
