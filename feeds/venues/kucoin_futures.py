"""KuCoin futures: a public bullet token before dialling, client pings, trades and mark prices.

Dialling takes a REST call first: `POST /api/v1/bullet-public` on the futures base URL
returns a token and the server to connect to (`<endpoint>?token=..&connectId=..`) with
its ping interval. The connection is usable after the `welcome` message; the client
sends `{"id":..,"type":"ping"}` every `pingInterval` ms. A token and a connection last
24 h. Frames:

    {"topic":"/contractMarket/execution:XBTUSDTM","type":"message","subject":"match",
     "sn":1794100537695,"data":{"symbol":"XBTUSDTM","sequence":1794100537695,
     "side":"buy","size":2,"price":"90503.9","takerOrderId":"247822202957807616",
     "makerOrderId":"247822167163555840","tradeId":"1794100537695",
     "ts":1731898619520000000}}

`side` is the taker's; `size` counts contracts (base quantity = size x the contract's
`multiplier` from /api/v1/contracts/active), and stays contracts here, as sent; `ts` is
in ns. `/contract/instrument` carries two subjects at two cadences: `mark.index.price`
every second and `funding.rate` every minute, with unquoted JSON numbers and ms times.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from decimal import Decimal
from typing import Union

import msgspec

from feeds.market import BookTicker, FundingRate, MarketData, MarketEvent, MarkPrice, Side
from feeds.venues.base import (
    Endpoint,
    ExchangeVenueCommon,
    HttpRequest,
    InstrumentMeta,
    KeepAlive,
    ParseError,
    WireMessage,
)
from feeds.venues.construct import make_book_ticker, make_funding_rate, make_mark_price, make_trade
from feeds.venues.errors import (
    DECODE_FAILURES,
    MAX_FIXED,
    MAX_INT,
    as_parse_error,
    checked_signed,
    trade_refusal,
    values_refusal,
)
from feeds.venues.exchange_settings import base_url
from feeds.venues.numbers import checked_ns, decimal_to_fixed_positive, json_fixed, ms_to_ns
from feeds.venues.rest import fetch

NAME = "kucoin-futures"
WS_BASE_URL = "wss://ws-api-futures.kucoin.com"  # informational: the bullet names the server
REST_BASE_URL = "https://api-futures.kucoin.com"
CHANNELS = frozenset({"trades", "mark_price", "book_ticker"})
DEFAULTS: dict[str, object] = {"rest_url": REST_BASE_URL}
_TOPIC = {
    "trades": "/contractMarket/execution",
    "mark_price": "/contract/instrument",
    "book_ticker": "/contractMarket/tickerV2",
}
KEEP_ALIVE = KeepAlive(
    server_ping_interval_s=None,
    client_ping_interval_s=18.0,  # the bullet's pingInterval replaces it per connection
    pong_timeout_s=10.0,
    max_connection_age_s=24 * 3600.0,
)
# One subscribe request may name up to 100 symbols, comma-separated.
SYMBOLS_PER_TOPIC = 100
BULLET_PATH = "/api/v1/bullet-public"
CONTRACTS_PATH = "/api/v1/contracts/active"
SUCCESS_CODE = "200000"


# --- wire messages ----------------------------------------------------------------------


class Match(msgspec.Struct, frozen=True):
    symbol: str
    side: str  # taker side, "buy" or "sell"
    size: msgspec.Raw  # contracts, a JSON number
    price: msgspec.Raw  # sent as a string; a JSON number is accepted too
    tradeId: str
    ts: int  # ns
    sequence: int | None = None


class MarkIndexPrice(msgspec.Struct, frozen=True):
    markPrice: msgspec.Raw  # JSON numbers, decoded exactly from their text
    timestamp: int  # ms
    indexPrice: msgspec.Raw = msgspec.Raw(b"")
    granularity: int | None = None


class FundingRateData(msgspec.Struct, frozen=True):
    fundingRate: msgspec.Raw
    timestamp: int  # ms: the settlement instant it refers to, not a clock reading
    granularity: int | None = None


class TickerV2(msgspec.Struct, frozen=True):
    symbol: str
    bestBidPrice: msgspec.Raw
    bestBidSize: msgspec.Raw  # contracts
    bestAskPrice: msgspec.Raw
    bestAskSize: msgspec.Raw  # contracts
    ts: int  # ns
    sequence: int | None = None


class Message(msgspec.Struct, frozen=True):
    """Every frame: `type` is welcome, ack, pong, error or message."""

    type: str
    id: str | None = None
    topic: str | None = None
    subject: str | None = None
    data: msgspec.Raw = msgspec.Raw(b"")  # decoded by subject, once the subject is known
    code: Union[int, str, None] = None


class BulletServer(msgspec.Struct, frozen=True):
    endpoint: str
    pingInterval: int  # ms
    pingTimeout: int  # ms
    protocol: str = "websocket"
    encrypt: bool = True


class BulletData(msgspec.Struct, frozen=True):
    token: str
    instanceServers: list[BulletServer]


class BulletResponse(msgspec.Struct, frozen=True):
    code: str
    data: BulletData


class Contract(msgspec.Struct, frozen=True):
    symbol: str
    tickSize: Decimal
    lotSize: Decimal
    multiplier: Decimal
    status: str = ""


class ContractsResponse(msgspec.Struct, frozen=True):
    code: str
    data: list[Contract]


_decode_message = msgspec.json.Decoder(Message).decode
_decode_match = msgspec.json.Decoder(Match).decode
_decode_mark = msgspec.json.Decoder(MarkIndexPrice).decode
_decode_funding = msgspec.json.Decoder(FundingRateData).decode
_decode_ticker = msgspec.json.Decoder(TickerV2).decode
_decode_bullet = msgspec.json.Decoder(BulletResponse).decode
_decode_contracts = msgspec.json.Decoder(ContractsResponse).decode
_SIDES = {"buy": Side.BUY, "sell": Side.SELL}
_QUIET_TYPES = frozenset({"welcome", "ack", "pong"})


# --- pure parse -------------------------------------------------------------------------


def parse(frame: bytes, received_ns: int) -> list[MarketEvent]:
    """Return the events in one frame; welcome, ack and pong give none."""
    try:
        message = _decode_message(frame)
        if message.type != "message":
            if message.type in _QUIET_TYPES:
                return []
            if message.type == "error":
                raise ParseError("venue_error", f"code {message.code}: {bytes(message.data)!r}")
            raise ParseError("schema", f"unknown frame type {message.type!r}")
        if not message.data or message.topic is None:
            raise ParseError("schema", "message without topic or data")
        topic, subject = message.topic, message.subject
        if subject == "match":
            return [_trade(_decode_match(message.data), received_ns)]
        if subject == "mark.index.price":
            return [_mark_price(_topic_symbol(topic), _decode_mark(message.data), received_ns)]
        if subject == "funding.rate":
            return [_funding_rate(_topic_symbol(topic), _decode_funding(message.data), received_ns)]
        if subject == "tickerV2":
            return [_book_ticker(_decode_ticker(message.data), received_ns)]
        raise ParseError("schema", f"unexpected subject {subject!r} on {topic!r}")
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _topic_symbol(topic: str) -> str:
    _, colon, symbol = topic.partition(":")
    if not colon or "," in symbol:
        raise ParseError("schema", f"topic names no single symbol: {topic!r}")
    if not symbol:
        raise ParseError("symbol", f"topic names an empty symbol: {topic!r}")
    return symbol


def _trade(match: Match, received_ns: int) -> MarketData:
    try:
        side = _SIDES[match.side]
    except KeyError:
        raise ParseError("schema", f"unknown side {match.side!r}") from None
    price, volume, symbol = json_fixed(match.price), json_fixed(match.size), match.symbol  # contracts, as sent
    if not (0 < price <= MAX_FIXED and 0 < volume <= MAX_FIXED and symbol):
        raise trade_refusal(price, volume, symbol)  # type: ignore[misc]
    # MarketData(symbol, price, volume, ts_event, ts_recv, trade_id, side), positional.
    return make_trade(symbol, price, volume, checked_ns(match.ts), received_ns, match.tradeId, side)


def _mark_price(symbol: str, mark: MarkIndexPrice, received_ns: int) -> MarkPrice:
    price = json_fixed(mark.markPrice)
    index = json_fixed(mark.indexPrice) if mark.indexPrice else None
    if not (0 < price <= MAX_FIXED and (index is None or 0 < index <= MAX_FIXED)):
        raise values_refusal(symbol, prices=(price, index))
    # MarkPrice(symbol, mark_price, ts_event, ts_recv, index_price), positional.
    return make_mark_price(symbol, price, ms_to_ns(mark.timestamp), received_ns, index)


def _funding_rate(symbol: str, funding: FundingRateData, received_ns: int) -> FundingRate:
    return make_funding_rate(
        symbol=symbol,
        funding_rate=checked_signed(json_fixed(funding.fundingRate), "funding rate"),
        ts_event=ms_to_ns(funding.timestamp),
        ts_recv=received_ns,
    )


def _book_ticker(ticker: TickerV2, received_ns: int) -> BookTicker:
    bid, bid_size = json_fixed(ticker.bestBidPrice), json_fixed(ticker.bestBidSize)
    ask, ask_size = json_fixed(ticker.bestAskPrice), json_fixed(ticker.bestAskSize)
    sequence, symbol = ticker.sequence, ticker.symbol
    if not (
        0 < bid <= MAX_FIXED
        and 0 < ask <= MAX_FIXED
        and 0 <= bid_size <= MAX_FIXED
        and 0 <= ask_size <= MAX_FIXED
        and symbol
        and (sequence is None or 0 <= sequence <= MAX_INT)
    ):
        raise values_refusal(symbol, prices=(bid, ask), sizes=(bid_size, ask_size), integers=(sequence,))
    # BookTicker(symbol, bid_price, bid_size, ask_price, ask_size, ts_event, ts_recv, sequence), positional.
    return make_book_ticker(symbol, bid, bid_size, ask, ask_size, checked_ns(ticker.ts), received_ns, sequence)


# --- bootstrap, endpoints and subscriptions ---------------------------------------------


def bullet_request(*, rest_url: str = REST_BASE_URL) -> HttpRequest:
    """Return the public token request; it must go to the futures base URL, not spot."""
    return HttpRequest("POST", f"{rest_url.rstrip('/')}{BULLET_PATH}")


def parse_bullet(body: bytes) -> BulletResponse:
    try:
        bullet = _decode_bullet(body)
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None
    if bullet.code != SUCCESS_CODE or not bullet.data.instanceServers:
        raise ParseError("venue_error", f"bullet-public answered code {bullet.code}")
    return bullet


def subscribe_messages(symbols: Sequence[str], channels: Collection[str], *, first_id: int = 1) -> list[str]:
    """Return subscribe requests, up to SYMBOLS_PER_TOPIC symbols per topic and request."""
    messages: list[str] = []
    for channel in sorted(channels):
        if channel not in CHANNELS:
            raise ValueError(f"{NAME} has no channel {channel!r}; known: {sorted(CHANNELS)}")
        for start in range(0, len(symbols), SYMBOLS_PER_TOPIC):
            chunk = ",".join(symbols[start : start + SYMBOLS_PER_TOPIC])
            messages.append(
                msgspec.json.encode(
                    {
                        "id": str(first_id + len(messages)),
                        "type": "subscribe",
                        "topic": f"{_TOPIC[channel]}:{chunk}",
                        "privateChannel": False,
                        "response": True,
                    }
                ).decode()
            )
    return messages


def endpoint_from_bullet(
    bullet: BulletResponse,
    symbols: Sequence[str],
    channels: Collection[str],
    connect_id: str,
) -> Endpoint:
    """Return the connection the bullet points at, with its own ping interval."""
    server = bullet.data.instanceServers[0]
    separator = "&" if "?" in server.endpoint else "?"
    subscribe = subscribe_messages(symbols, channels)
    return Endpoint(
        url=f"{server.endpoint}{separator}token={bullet.data.token}&connectId={connect_id}",
        subscribe=tuple(subscribe),
        streams=tuple(msgspec.json.decode(message)["topic"] for message in subscribe),
        keep_alive=KeepAlive(
            server_ping_interval_s=None,
            client_ping_interval_s=server.pingInterval / 1000,
            pong_timeout_s=server.pingTimeout / 1000,
            max_connection_age_s=KEEP_ALIVE.max_connection_age_s,
        ),
    )


def ping_message(counter: int) -> str:
    return msgspec.json.encode({"id": str(counter), "type": "ping"}).decode()


# --- REST -------------------------------------------------------------------------------


def contracts_request(*, rest_url: str = REST_BASE_URL) -> HttpRequest:
    return HttpRequest("GET", f"{rest_url.rstrip('/')}{CONTRACTS_PATH}")


def parse_contracts(body: bytes) -> list[InstrumentMeta]:
    """Return each contract's tick size, lot size (contracts) and multiplier (base per contract)."""
    try:
        response = _decode_contracts(body)
        if response.code != SUCCESS_CODE:
            raise ParseError("venue_error", f"contracts answered code {response.code}")
        return [
            InstrumentMeta(
                venue_symbol=contract.symbol,
                tick_size=_exact_text(contract.tickSize),
                lot_size=_exact_text(contract.lotSize),
                contract_multiplier=_exact_text(contract.multiplier),
                status=contract.status.lower(),
            )
            for contract in response.data
        ]
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _exact_text(value: Decimal) -> str:
    decimal_to_fixed_positive(value)  # refuses zero, negatives and too many places
    return format(value, "f")


# --- the venue --------------------------------------------------------------------------


class KucoinFuturesVenue(ExchangeVenueCommon):
    name = NAME
    default_market_type = "perpetual"
    settings_defaults = DEFAULTS
    channels = CHANNELS
    keep_alive = KEEP_ALIVE
    ws_base_url = WS_BASE_URL
    rest_base_url = REST_BASE_URL

    def __init__(self, *, connect_id: Callable[[], str] = lambda: uuid.uuid4().hex) -> None:
        self._connect_id = connect_id

    # The module's pure function itself, so the hot path pays no extra call.
    parse = staticmethod(parse)

    async def endpoints(
        self,
        symbols: Sequence[str],
        channels: Collection[str],
        settings: Mapping[str, object],
    ) -> list[Endpoint]:
        """Fetch a fresh bullet token (one per dial) and return its connection."""
        body = await fetch(bullet_request(rest_url=base_url(settings, "rest_url", REST_BASE_URL)))
        return [endpoint_from_bullet(parse_bullet(body), symbols, channels, self._connect_id())]

    def ping_message(self, counter: int) -> WireMessage | None:
        return ping_message(counter)

    def instruments_request(self, settings: Mapping[str, object]) -> HttpRequest:
        return contracts_request(rest_url=base_url(settings, "rest_url", REST_BASE_URL))

    def parse_instruments(self, body: bytes) -> list[InstrumentMeta]:
        return parse_contracts(body)


VENUE = KucoinFuturesVenue()
