"""The one interface every venue adapter implements.

An adapter declares its venue (settings it accepts, channels it serves) and parses
frames with a pure function: no I/O, no state, so a recorded frame always yields the
same events. A local venue (simulated, replay) also opens a frame source for a feed.

Exchange venues also describe how to reach them (`ExchangeVenue`): the websocket
endpoints and subscribe messages for a set of symbols, the keep-alive rules, and REST
helpers for instrument metadata and historical trades. The transport that dials and
keeps sockets alive lives with the stream runtime; nothing here opens a connection.
Per-stream venue state (Upstox's previous `vtt`) lives in a `StreamState` the stream
owns, so `parse` stays pure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, Union

from feeds.market import MarketData, MarketEvent


class ParseError(ValueError):
    """A frame the adapter cannot turn into events; `reason` is a short metric label."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class InstrumentSpec:
    """What a frame source needs to know of one subscribed instrument."""

    venue_symbol: str
    tick_size: str
    lot_size: str
    channels: tuple[str, ...] = ("trades",)  # the enabled subscriptions, such as ("mark_price", "trades")


@dataclass(frozen=True)
class FeedSpec:
    """A feed as the runtime runs it: validated settings and its subscribed instruments."""

    name: str
    venue: str
    settings: Mapping[str, object]
    instruments: Sequence[InstrumentSpec] = field(default_factory=tuple)


# How a venue that replays recordings reads them: (feed, symbol, start_ns, end_ns) ->
# the recorded trades in order. Handed in by the stream runtime, so adapters never
# import the database side.
RecordedTicks = Callable[[str, str, int, int], Awaitable[list[MarketData]]]


class FrameSource(Protocol):
    """A live source of raw frames; batches are the frames available at one moment."""

    def batches(self) -> AsyncIterator[list[bytes]]: ...


@dataclass(frozen=True)
class PublishedLimits:
    """A venue's limits as it publishes them (per IP unless said otherwise).

    The stream runtime's token buckets take a fraction of each (feeds.streams.venue_limiter).
    """

    rest_weight: float  # request weight per rest_period_s
    rest_period_s: float
    trades_request_weight: float  # weight of one historical-trades page
    dials: float  # websocket connection attempts per dial_period_s
    dial_period_s: float
    messages_per_s: float | None  # client messages per second, per connection


# For a venue that publishes no limits (or has no socket): cautious figures.
DEFAULT_LIMITS = PublishedLimits(600, 60, 1, 60, 300, 5)


class Venue(Protocol):
    """What every venue declares; a venue module exports one as VENUE (see feeds.venues)."""

    name: str
    channels: frozenset[str]
    limits: PublishedLimits
    # What the venue trades when the operator does not say (a feeds.models.MarketType value).
    default_market_type: str

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        """Return validated settings with defaults filled in; raise ValidationError per key."""
        ...

    def parse(self, frame: bytes, received_ns: int) -> list[MarketEvent]:
        """Return the events in `frame`; raise ParseError for a malformed frame."""
        ...

    def new_stream_state(self) -> StreamState:
        """Return fresh per-stream state; one per stream (and per replayed recording)."""
        ...


class LocalVenue(Venue, Protocol):
    """A venue whose frames come from this process (a simulation, a recording), not a socket."""

    def open(self, feed: FeedSpec, *, recorded_ticks: RecordedTicks | None = None) -> FrameSource:
        """Return a frame source for `feed`; nothing is read until it is iterated."""
        ...


class StreamState(Protocol):
    """Venue state carried across the frames of one stream, owned by that stream."""

    def apply(self, events: list[MarketEvent]) -> list[MarketEvent]:
        """Return `events` completed with what earlier frames said (may drop repeats)."""
        ...


class StatelessStream:
    """The state of a venue whose frames stand alone: events pass through unchanged."""

    def apply(self, events: list[MarketEvent]) -> list[MarketEvent]:
        return events


# A websocket message: `str` goes as a text frame, `bytes` as a binary frame (Upstox
# wants its JSON subscribe requests as binary frames).
WireMessage = Union[str, bytes]


@dataclass(frozen=True)
class KeepAlive:
    """How a venue keeps a connection alive, and how long one may live.

    `client_ping_interval_s` None means the venue pings and the websocket library's
    automatic pong suffices; otherwise the client sends `ExchangeVenue.ping_message`
    at that interval. `max_connection_age_s` is when the venue cuts a connection, so the
    transport redials before it.
    """

    server_ping_interval_s: float | None
    client_ping_interval_s: float | None
    pong_timeout_s: float
    max_connection_age_s: float | None
    max_incoming_messages_per_s: float | None = None
    max_streams_per_connection: int | None = None


@dataclass(frozen=True)
class Endpoint:
    """One websocket connection to dial: its URL, headers and the messages that subscribe it."""

    url: str
    subscribe: tuple[WireMessage, ...]
    headers: Mapping[str, str] = field(default_factory=dict)
    # Streams served by this connection, as the venue names them (for logs and health).
    streams: tuple[str, ...] = ()
    # Set when the venue hands out keep-alive rules per connection (KuCoin's bullet).
    keep_alive: KeepAlive | None = None


@dataclass(frozen=True)
class HttpRequest:
    """A REST call described as data, so building it is pure and testable."""

    method: str
    url: str
    params: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None


@dataclass(frozen=True)
class InstrumentMeta:
    """One instrument as the venue's metadata describes it; numbers as exact decimal strings."""

    venue_symbol: str
    tick_size: str | None  # None when the venue does not publish it (bitFlyer)
    lot_size: str | None
    contract_multiplier: str = "1"  # base units per contract (KuCoin sizes are contracts)
    min_quantity: str | None = None
    status: str = "trading"  # the venue's own status word, lower case


class TokenProvider(Protocol):
    """Returns the current access token for a venue that needs one (Upstox)."""

    async def __call__(self) -> str: ...


class ExchangeVenue(Venue, Protocol):
    """A real exchange: endpoints, keep-alive and REST helpers besides the pure parse."""

    keep_alive: KeepAlive
    ws_base_url: str  # default; feed setting `ws_url` overrides it
    rest_base_url: str  # default; feed setting `rest_url` overrides it

    async def endpoints(
        self,
        symbols: Sequence[str],
        channels: Collection[str],
        settings: Mapping[str, object],
    ) -> list[Endpoint]:
        """Return the connections to dial for `symbols` x `channels`.

        Venues that must call REST before dialling (KuCoin's bullet token, Upstox's
        single-use authorized URL) do so here; call it again for every dial.
        """
        ...

    def ping_message(self, counter: int) -> WireMessage | None:
        """Return the client ping to send (None when the venue pings the client)."""
        ...

    def instruments_request(self, settings: Mapping[str, object]) -> HttpRequest:
        """Return the REST request for the venue's instrument metadata."""
        ...

    def parse_instruments(self, body: bytes) -> list[InstrumentMeta]:
        """Return the instruments in an instruments response; raise ParseError if malformed."""
        ...


@dataclass(frozen=True)
class TradeQuery:
    """A page of historical trades for gap recovery.

    `after_id` and `before_id` are exclusive trade ids; the time bounds are inclusive
    UTC milliseconds. A venue that cannot serve a combination raises ValueError when
    building the request.
    """

    symbol: str
    after_id: int | None = None
    before_id: int | None = None  # exclusive; for venues that page backwards (bitFlyer)
    start_ms: int | None = None
    end_ms: int | None = None
    limit: int | None = None


class TradeHistoryVenue(ExchangeVenue, Protocol):
    """An exchange whose REST API serves recent trades, used to fill stream gaps."""

    history_retention_s: float  # older trades are gone from REST: record a known hole
    max_window_ms: int | None  # a time window must be shorter than this (None: no time windows)
    max_page_size: int

    def trades_request(self, query: TradeQuery, settings: Mapping[str, object]) -> HttpRequest:
        """Return the REST request for one page of trades."""
        ...

    def parse_trades(self, body: bytes, symbol: str, received_ns: int) -> list[MarketData]:
        """Return the trades of one page, oldest first; raise ParseError if malformed.

        A venue may also offer `parse_trade_page(body, symbol, received_ns) -> TradePage`
        (feeds.venues.trade_page): the page row by row, a bad row refused on its own.
        Gap recovery uses it where it exists.
        """
        ...


class ExchangeVenueCommon:
    """What every exchange venue module shares; a venue class sets `name` and `settings_defaults`
    (and `limits` and `default_market_type` when the defaults do not fit).

    Settings take the common URL overrides, and frames stand alone unless the venue
    overrides `new_stream_state`.
    """

    name: str
    settings_defaults: Mapping[str, object]
    limits: PublishedLimits = DEFAULT_LIMITS
    default_market_type: str = "spot"

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        from feeds.venues.exchange_settings import clean_exchange_settings

        return clean_exchange_settings(self.name, settings, self.settings_defaults)

    def new_stream_state(self) -> StreamState:
        return StatelessStream()

    def ping_message(self, counter: int) -> WireMessage | None:
        """The venue pings and the websocket library answers: nothing to send."""
        return None
