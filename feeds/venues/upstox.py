"""Upstox Market Data Feed V3: protobuf frames, ltpc and full modes, vtt-delta volumes.

Dialling first asks `GET /v3/feed/market-data-feed/authorize` (Bearer = the provisioned
analytics token, from a token provider) for a single-use `authorized_redirect_uri`, so
every dial authorizes again. Subscribe requests are JSON sent as *binary* frames:

    {"guid":"sub-1","method":"sub","data":{"mode":"full","instrumentKeys":["NSE_EQ|INE848E01016"]}}

Server frames are protobuf `FeedResponse` (the official MarketDataFeedV3.proto, shipped
compiled in upstox-python-sdk): first `market_info` (segment statuses, no prices), then
the snapshot (`initial_feed`, type 0, which proto3 JSON renders without a `type` key),
then `live_feed`. Prices are doubles: `repr` gives the shortest decimal that round-trips,
which is the venue's price, and that text becomes fixed point without float arithmetic.

LTPC prints are trades: price = ltp, quantity = ltq, exchange time = ltt, no side.
Full mode adds `vtt` (volume traded today, cumulative); the per-tick volume is the vtt
delta, which needs the previous tick, so `parse` carries vtt in
`MarketData.cumulative_volume` and `UpstoxStreamState` (owned by the stream) computes
the delta (a vtt that falls, or a new trading day, starts the count again) and drops the LTPC that Upstox
re-sends with every depth-only update.
"""

from __future__ import annotations

import gzip
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Protocol

import msgspec
from django.core.exceptions import ValidationError
from google.protobuf.message import DecodeError as ProtobufDecodeError
from upstox_client.feeder.proto import MarketDataFeedV3_pb2 as pb

from core.fixed_point import SCALE
from feeds.market import MarketData, MarketEvent
from feeds.venues.base import (
    Endpoint,
    ExchangeVenueCommon,
    HttpRequest,
    InstrumentMeta,
    KeepAlive,
    ParseError,
    WireMessage,
)
from feeds.venues.construct import make_book_ticker, make_ticker, make_trade
from feeds.venues.errors import DECODE_FAILURES, MAX_FIXED, as_parse_error
from feeds.venues.exchange_settings import base_url, clean_exchange_settings
from feeds.venues.numbers import decimal_to_fixed_positive, ms_to_ns
from feeds.venues.rest import RestError, fetch

NAME = "upstox"
WS_BASE_URL = "wss://api.upstox.com"  # informational: the authorize call names the server
REST_BASE_URL = "https://api.upstox.com"
INSTRUMENTS_URL = "https://assets.upstox.com/market-quote/instruments/exchange/complete.json.gz"
AUTHORIZE_PATH = "/v3/feed/market-data-feed/authorize"
CHANNELS = frozenset({"trades"})
MODES = ("ltpc", "full", "option_greeks", "full_d30")
# Keys one connection may subscribe in each mode (normal plan, one mode on the connection).
MODE_KEY_LIMITS = {"ltpc": 5000, "option_greeks": 3000, "full": 2000, "full_d30": 50}
DEFAULTS: dict[str, object] = {"rest_url": REST_BASE_URL, "instruments_url": INSTRUMENTS_URL, "mode": "full"}
KEEP_ALIVE = KeepAlive(
    server_ping_interval_s=None,  # the server pings when the connection is idle
    client_ping_interval_s=None,
    pong_timeout_s=30.0,
    max_connection_age_s=None,
)
# A tick more than 12 h after the previous one starts a new trading day even if vtt
# grew (the opening auction may trade more than the whole previous day).
DAY_BOUNDARY_NS = 12 * 3600 * 1_000_000_000

TokenProvider = Callable[[], Awaitable[str]]


# --- pure parse -------------------------------------------------------------------------


def _price(value: float) -> int:
    # repr() is the shortest decimal that round-trips the double: the venue's price.
    price = decimal_to_fixed_positive(Decimal(repr(value)))
    if price > MAX_FIXED:
        raise ParseError("number", "price out of range")
    return price


# Quantities are whole units (int64 on the wire); scaled to fixed point they must stay
# within range, so the largest acceptable quantity is the bound divided by the scale.
_MAX_QUANTITY = MAX_FIXED // SCALE


def _quantity(value: int, what: str) -> int:
    if 0 <= value <= _MAX_QUANTITY:
        return value * SCALE
    raise ParseError("size" if value < 0 else "number", f"{what} {'negative' if value < 0 else 'out of range'}")


def parse(frame: bytes, received_ns: int) -> list[MarketEvent]:
    """Return the events of one FeedResponse; market_info gives none."""
    response = pb.FeedResponse()
    try:
        response.ParseFromString(frame)
    except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
        raise ParseError("protobuf", str(exc)) from None
    if response.type == pb.market_info:
        return []
    try:
        events: list[MarketEvent] = []
        for key, feed in sorted(response.feeds.items()):
            if not key:
                raise ParseError("symbol", "empty instrument key")
            events.extend(_feed_events(key, feed, response.currentTs, received_ns))
        return events
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


def _feed_events(key: str, feed: pb.Feed, current_ts_ms: int, received_ns: int) -> list[MarketEvent]:
    union = feed.WhichOneof("FeedUnion")
    if union == "ltpc":
        return _ltpc_events(key, feed.ltpc, None, received_ns)
    if union == "fullFeed":
        full = feed.fullFeed
        which = full.WhichOneof("FullFeedUnion")
        if which == "marketFF":
            market = full.marketFF
            events = _ltpc_events(key, market.ltpc, market.vtt if market.HasField("ltpc") else None, received_ns)
            quotes = market.marketLevel.bidAskQuote
            if quotes and current_ts_ms:
                events.extend(_best_quote(key, quotes[0], current_ts_ms, received_ns))
            return events
        if which == "indexFF":
            return _ltpc_events(key, full.indexFF.ltpc, None, received_ns)
        return []
    if union == "firstLevelWithGreeks":
        first = feed.firstLevelWithGreeks
        events = _ltpc_events(key, first.ltpc, first.vtt if first.HasField("ltpc") else None, received_ns)
        if first.HasField("firstDepth") and current_ts_ms:
            events.extend(_best_quote(key, first.firstDepth, current_ts_ms, received_ns))
        return events
    return []


def _ltpc_events(key: str, ltpc: pb.LTPC, vtt: int | None, received_ns: int) -> list[MarketEvent]:
    ltp, ltt, ltq = ltpc.ltp, ltpc.ltt, ltpc.ltq  # each protobuf field read costs: once each
    # No last trade yet (ltt 0 or ltp 0, as proto3 omits unset fields): nothing to report.
    # A negative price or time is no such absence: the frame is corrupt.
    if ltt <= 0 or ltp <= 0:
        if ltp < 0:
            raise ParseError("price", f"{key}: negative last traded price")
        if ltt < 0:
            raise ParseError("value", f"{key}: negative last trade time")
        return []
    volume = _quantity(ltq, "last traded quantity")
    cumulative = None if vtt is None else _quantity(vtt, "volume traded today")
    ts_event = ms_to_ns(ltt)
    if volume == 0 and vtt is None:
        # Indices print a value with no quantity: a price, not a trade.
        return [make_ticker(key, _price(ltp), ts_event, received_ns)]
    # MarketData(symbol, price, volume, ts_event, ts_recv, trade_id, side, duration, cumulative), positional.
    return [make_trade(key, _price(ltp), volume, ts_event, received_ns, None, None, None, cumulative)]


def _best_quote(key: str, quote: pb.Quote, current_ts_ms: int, received_ns: int) -> list[MarketEvent]:
    bid, ask = quote.bidP, quote.askP
    if bid <= 0 or ask <= 0:
        if bid < 0 or ask < 0:
            raise ParseError("price", f"{key}: negative quote")
        return []  # one side empty (pre-open, circuit limit): no best quote to report
    bid_size, ask_size = _quantity(quote.bidQ, "bid quantity"), _quantity(quote.askQ, "ask quantity")
    # BookTicker(symbol, bid_price, bid_size, ask_price, ask_size, ts_event, ts_recv), positional.
    return [
        make_book_ticker(
            key,
            _price(bid),
            bid_size,
            _price(ask),
            ask_size,
            ms_to_ns(current_ts_ms),
            received_ns,
        )
    ]


# --- per-stream state -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _LastTrade:
    ts_event: int
    price: int
    volume: int
    cumulative_volume: int | None


class UpstoxStreamState:
    """Per-instrument last trade of one stream: vtt deltas, day boundaries, repeats.

    | scenario           | previous | volume                  | duration since last |
    |--------------------|----------|-------------------------|---------------------|
    | normal tick        | yes      | vtt - previous vtt      | from the stream     |
    | day boundary       | yes, but vtt fell or ltt moved > 12 h | vtt | 0       |
    | cold start         | none     | 0 (pre-open or mid-day restart cannot be told apart) | none |

    A repeat of the previous (ltt, vtt) is the LTPC Upstox re-sends with a depth-only
    update, not a trade, and is dropped. In ltpc mode (no vtt) the quantity is ltq and a
    repeat is the same (ltt, ltp, ltq).
    """

    def __init__(self) -> None:
        self._last: dict[str, _LastTrade] = {}

    def apply(self, events: list[MarketEvent]) -> list[MarketEvent]:
        out: list[MarketEvent] = []
        for event in events:
            if not isinstance(event, MarketData):
                out.append(event)
                continue
            previous = self._last.get(event.symbol)
            current = _LastTrade(event.ts_event, event.price, event.volume, event.cumulative_volume)
            if current.cumulative_volume is None:
                if previous is not None and (previous.ts_event, previous.price, previous.volume) == (
                    current.ts_event,
                    current.price,
                    current.volume,
                ):
                    continue
                self._last[event.symbol] = current
                out.append(event)
                continue
            if previous is not None and (previous.ts_event, previous.cumulative_volume) == (
                current.ts_event,
                current.cumulative_volume,
            ):
                continue
            self._last[event.symbol] = current
            out.append(self._with_volume(event, previous))
        return out

    @staticmethod
    def _with_volume(event: MarketData, previous: _LastTrade | None) -> MarketData:
        vtt = event.cumulative_volume
        assert vtt is not None
        if previous is None or previous.cumulative_volume is None:
            return replace(event, volume=0)
        day_changed = vtt < previous.cumulative_volume or event.ts_event - previous.ts_event > DAY_BOUNDARY_NS
        if day_changed:
            return replace(event, volume=vtt, duration_since_last_ns=0)
        return replace(event, volume=vtt - previous.cumulative_volume)


# --- endpoints and subscriptions --------------------------------------------------------


class AuthorizeData(msgspec.Struct, frozen=True):
    authorized_redirect_uri: str


class AuthorizeResponse(msgspec.Struct, frozen=True):
    status: str
    data: AuthorizeData


_decode_authorize = msgspec.json.Decoder(AuthorizeResponse).decode


def authorize_request(token: str, *, rest_url: str = REST_BASE_URL) -> HttpRequest:
    return HttpRequest(
        "GET",
        f"{rest_url.rstrip('/')}{AUTHORIZE_PATH}",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )


def parse_authorize(body: bytes) -> str:
    """Return the single-use websocket URL of an authorize response."""
    try:
        response = _decode_authorize(body)
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None
    if response.status != "success" or not response.data.authorized_redirect_uri:
        raise ParseError("venue_error", f"authorize answered status {response.status!r}")
    return response.data.authorized_redirect_uri


def subscribe_message(instrument_keys: Sequence[str], mode: str, *, guid: str = "sub-1") -> bytes:
    """Return the subscribe request as bytes: Upstox wants it in a binary frame."""
    if mode not in MODE_KEY_LIMITS:
        raise ValueError(f"mode must be one of {MODES}")
    if len(instrument_keys) > MODE_KEY_LIMITS[mode]:
        raise ValueError(f"{mode} mode takes at most {MODE_KEY_LIMITS[mode]} keys per connection")
    return msgspec.json.encode(
        {"guid": guid, "method": "sub", "data": {"mode": mode, "instrumentKeys": list(instrument_keys)}}
    )


async def _no_token_provider() -> str:
    raise LookupError(
        f"{NAME}: no analytics token configured (RECOVERY_PROVISIONED_TOKENS=upstox/analytics, see docs/recovery.md)"
    )


class AccessTokenLike(Protocol):
    fingerprint: str

    def reveal(self) -> str: ...


class AnalyticsTokenSource(Protocol):
    """The shape of recovery's TokenSource that the feed needs (no import of recovery)."""

    async def await_valid_token(self) -> AccessTokenLike: ...

    async def invalidate(self, fingerprint: str, reason: str) -> None: ...


INVALID_TOKEN_CODE = "UDAPI100050"


def is_invalid_token(error: RestError) -> bool:
    """Return whether a REST error says the token itself was refused (HTTP 401, UDAPI100050)."""
    return error.status == 401 and INVALID_TOKEN_CODE.encode() in error.body


# --- REST -------------------------------------------------------------------------------


class UpstoxInstrument(msgspec.Struct, frozen=True):
    instrument_key: str
    tick_size: Decimal | None = None  # in paise: 5.0 means 0.05 rupees
    lot_size: Decimal | None = None
    segment: str = ""


_decode_instruments = msgspec.json.Decoder(list[UpstoxInstrument]).decode
_PAISE_PER_RUPEE = Decimal(100)


def instruments_request(*, instruments_url: str = INSTRUMENTS_URL) -> HttpRequest:
    return HttpRequest("GET", instruments_url)


def parse_instruments(body: bytes) -> list[InstrumentMeta]:
    """Return instruments of an instruments file (gzip or plain JSON); tick sizes in rupees."""
    try:
        if body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        rows = _decode_instruments(body)
        instruments = []
        for row in rows:
            tick = None if row.tick_size is None else row.tick_size / _PAISE_PER_RUPEE
            if tick is not None:
                decimal_to_fixed_positive(tick)
            if row.lot_size is not None:
                decimal_to_fixed_positive(row.lot_size)
            instruments.append(
                InstrumentMeta(
                    venue_symbol=row.instrument_key,
                    tick_size=None if tick is None else format(tick.normalize(), "f"),
                    lot_size=None if row.lot_size is None else format(row.lot_size.normalize(), "f"),
                )
            )
        return instruments
    except (OSError, EOFError) as exc:  # a corrupt gzip stream
        raise ParseError("gzip", str(exc)) from None
    except DECODE_FAILURES as exc:
        raise as_parse_error(exc) from None


# --- the venue --------------------------------------------------------------------------


class UpstoxVenue(ExchangeVenueCommon):
    name = NAME
    settings_defaults = DEFAULTS
    channels = CHANNELS
    keep_alive = KEEP_ALIVE
    ws_base_url = WS_BASE_URL
    rest_base_url = REST_BASE_URL
    binary_frames = True  # recorded frames are base64 lines

    def __init__(self, token_provider: TokenProvider = _no_token_provider) -> None:
        self._token_provider = token_provider
        self._token_source: AnalyticsTokenSource | None = None
        self._on_accepted: Callable[[], None] | None = None

    def use_token_provider(self, token_provider: TokenProvider) -> None:
        """Authorize future dials with `token_provider` (the app owning tokens calls this at startup)."""
        self._token_provider = token_provider
        self._token_source = None
        self._on_accepted = None

    def use_token_source(self, source: AnalyticsTokenSource, on_accepted: Callable[[], None] | None = None) -> None:
        """Authorize with recovery's analytics token; a refused token is reported back to it,
        an accepted one to `on_accepted` (the feed's datasource clears a terminal failure)."""
        self._token_source = source
        self._token_provider = _no_token_provider
        self._on_accepted = on_accepted

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        cleaned = clean_exchange_settings(NAME, settings, DEFAULTS)
        if cleaned["mode"] not in MODES:
            raise ValidationError({"mode": [f"mode must be one of {', '.join(MODES)}"]})
        return cleaned

    # The module's pure function itself, so the hot path pays no extra call.
    parse = staticmethod(parse)

    def new_stream_state(self) -> UpstoxStreamState:
        return UpstoxStreamState()

    async def endpoints(
        self,
        symbols: Sequence[str],
        channels: Collection[str],
        settings: Mapping[str, object],
    ) -> list[Endpoint]:
        """Authorize (the URL works once) and return the connection with its subscribe frame."""
        unknown = set(channels) - CHANNELS
        if unknown:
            raise ValueError(f"{NAME} has no channel {sorted(unknown)}; known: {sorted(CHANNELS)}")
        rest_url = base_url(settings, "rest_url", REST_BASE_URL)
        if self._token_source is None:
            token = await self._token_provider()
            body = await fetch(authorize_request(token, rest_url=rest_url))
        else:
            # Waits while the token is being renewed (and, in production, while the feed's
            # datasource is stopped on a terminal failure until it is resumed); raises
            # recovery's TokenUnavailable when the token failed for good.
            access = await self._token_source.await_valid_token()
            try:
                body = await fetch(authorize_request(access.reveal(), rest_url=rest_url))
            except RestError as exc:
                if is_invalid_token(exc):
                    await self._token_source.invalidate(access.fingerprint, INVALID_TOKEN_CODE)
                raise
            if self._on_accepted is not None:
                self._on_accepted()
        mode = str(settings.get("mode", "full"))
        return [
            Endpoint(
                url=parse_authorize(body),
                subscribe=(subscribe_message(symbols, mode),),
                streams=tuple(symbols),
            )
        ]

    def ping_message(self, counter: int) -> WireMessage | None:
        return None

    def instruments_request(self, settings: Mapping[str, object]) -> HttpRequest:
        return instruments_request(instruments_url=str(settings.get("instruments_url") or INSTRUMENTS_URL))

    def parse_instruments(self, body: bytes) -> list[InstrumentMeta]:
        return parse_instruments(body)


VENUE = UpstoxVenue()
