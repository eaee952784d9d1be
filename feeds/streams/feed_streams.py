"""Build the supervised streams of one exchange feed: one per websocket endpoint.

Building reads the venue's endpoint plan (which may call REST for venues with
bootstrap tokens) but opens no socket and starts no task; `SupervisedStream.run()`
does that.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeGuard, cast

from core.health import HealthBoard
from feeds.market import FeedData, MarketData
from feeds.streams.gap_recovery import TradeHistorySource
from feeds.streams.rest_history import RestTradeHistory
from feeds.streams.runtime_events import LoggingEventPublisher
from feeds.streams.socket_session import SocketSession
from feeds.streams.stream_composition import build_trade_stream_runtime
from feeds.streams.supervised_stream import HoleSink, StreamPolicy, SupervisedStream
from feeds.streams.transport import TransportSettings, WebSocketConnection, dial
from feeds.streams.venue_limiter import VenueRateLimiter
from feeds.streams.window_planner import DEFAULT_MAX_WINDOW_MS
from feeds.venues.base import Endpoint, ExchangeVenue, FeedSpec, TradeHistoryVenue

log = logging.getLogger(__name__)

TRADES = "trades"
# Ask REST for a little less than the venue keeps: the request is built a moment before
# the venue applies its own cut-off.
RETENTION_MARGIN_MS = 60_000
# Stop short of the venue's hard cut, so the planned redial happens first.
MAX_AGE_MARGIN_S = 600.0


@dataclass(frozen=True)
class FeedStreamSettings:
    policy: StreamPolicy = StreamPolicy()  # noqa: RUF009  # frozen: one shared default is safe
    transport: TransportSettings = TransportSettings()  # noqa: RUF009  # frozen
    rest_timeout_s: float = 10.0


def is_exchange_venue(venue: object) -> TypeGuard[ExchangeVenue]:
    return callable(getattr(venue, "endpoints", None))


def is_trade_history_venue(venue: object) -> bool:
    return callable(getattr(venue, "trades_request", None))


def carries_symbol(endpoint: Endpoint, symbol: str) -> bool:
    """True when one of the endpoint's stream names names `symbol` as a whole word."""
    if not endpoint.streams:
        return True
    pattern = re.compile(rf"(?<![a-z0-9]){re.escape(symbol.lower())}(?![a-z0-9])")
    return any(pattern.search(stream.lower()) for stream in endpoint.streams)


class _NoHistory:
    async def fetch_window(self, window: object, after: object) -> list[MarketData]:
        return []


async def build_feed_streams(
    spec: FeedSpec,
    venue: ExchangeVenue,
    *,
    publish: Callable[[FeedData], None],
    health: HealthBoard,
    limiter: VenueRateLimiter | None,
    settings: FeedStreamSettings = FeedStreamSettings(),
    checkpoints: Mapping[str, MarketData] | None = None,
    hole_sink: HoleSink | None = None,
    clock_ns: Callable[[], int] = time.time_ns,
    first_label: int = 0,
) -> list[SupervisedStream]:
    """Return one SupervisedStream per endpoint of the feed's subscriptions.

    Streams are labelled ws{first_label}, ws{first_label + 1}, ...: a caller that adds
    streams to a running feed (an instrument whose metadata arrived later) starts past
    the labels already in use.

    Trades get their own connections, with gap recovery over REST. Every other channel
    (mark price, tickers) gets connections of its own without recovery: a stream that
    carries no trades must never fetch trades, or they would arrive twice.
    """
    streams: list[SupervisedStream] = []
    groups = [(TRADES, [i.venue_symbol for i in spec.instruments if TRADES in i.channels])]
    others = sorted({channel for i in spec.instruments for channel in i.channels} - {TRADES})
    groups += [(channel, [i.venue_symbol for i in spec.instruments if channel in i.channels]) for channel in others]
    for channel, symbols in groups:
        if not symbols:
            continue
        try:
            plan = await venue.endpoints(symbols, [channel], spec.settings)
        except Exception as exc:
            # A venue whose endpoint needs a REST bootstrap (KuCoin's bullet, Upstox's
            # authorized URL) may be unreachable at start: run one stream, which asks again
            # on every dial behind its backoff and breaker, instead of failing the process.
            log.warning(
                "feed %s: %s endpoint plan unavailable at start (%s); one stream for all symbols",
                spec.name,
                channel,
                exc,
            )
            plan = [Endpoint(url="", subscribe=())]
        for index, endpoint in enumerate(plan):
            carried = [symbol for symbol in symbols if carries_symbol(endpoint, symbol)]
            stream = _build_stream(
                spec,
                venue,
                index,
                carried,
                channel=channel,
                channel_symbols=symbols,
                label=f"ws{first_label + len(streams)}",
                publish=publish,
                health=health,
                limiter=limiter,
                settings=settings,
                hole_sink=hole_sink,
                clock_ns=clock_ns,
            )
            if channel == TRADES:
                stream.restore_checkpoints(dict(checkpoints or {}))
            streams.append(stream)
    return streams


def _build_stream(
    spec: FeedSpec,
    venue: ExchangeVenue,
    index: int,
    symbols: Sequence[str],
    *,
    channel: str,
    channel_symbols: Sequence[str],
    label: str,
    publish: Callable[[FeedData], None],
    health: HealthBoard,
    limiter: VenueRateLimiter | None,
    settings: FeedStreamSettings,
    hole_sink: HoleSink | None,
    clock_ns: Callable[[], int],
) -> SupervisedStream:
    async def endpoint_source() -> Endpoint:
        # Asked again per dial: single-use URLs and bootstrap tokens must be fresh.
        plan = await venue.endpoints(channel_symbols, [channel], spec.settings)
        return plan[index]

    async def dial_endpoint(endpoint: Endpoint) -> WebSocketConnection:
        return await dial(
            endpoint,
            settings.transport,
            limiter=limiter,
            keep_alive=venue.keep_alive,
            ping_message=venue.ping_message,
        )

    history: TradeHistorySource
    recovery = channel == TRADES and is_trade_history_venue(venue)
    if recovery:
        history_venue = cast(TradeHistoryVenue, venue)
        history = RestTradeHistory(
            history_venue, spec.settings, limiter=limiter, timeout_s=settings.rest_timeout_s, clock_ns=clock_ns
        )
        max_window = history_venue.max_window_ms - 1 if history_venue.max_window_ms else None
        retention_ms = int(history_venue.history_retention_s * 1000) - RETENTION_MARGIN_MS
        # Id-paged venues walk ids, not time: one window over the whole reachable range.
        max_window = max_window or retention_ms
    else:
        history, max_window, retention_ms = _NoHistory(), DEFAULT_MAX_WINDOW_MS, None

    policy = settings.policy
    venue_max_age = (getattr(venue, "keep_alive", None) and venue.keep_alive.max_connection_age_s) or None
    if policy.max_connection_age_s is None and venue_max_age:
        policy = replace(policy, max_connection_age_s=max(venue_max_age - MAX_AGE_MARGIN_S, venue_max_age / 2))

    session = SocketSession(endpoint_source, dial_endpoint)
    stream_ref: list[SupervisedStream] = []

    def recovered_sink(trades: Sequence[MarketData]) -> None:
        stream_ref[0].deliver_recovered(trades)

    graph = build_trade_stream_runtime(
        connection=session,
        subscriptions=session,
        publisher=LoggingEventPublisher(f"{spec.name}/{label}"),
        recovery_source=history,
        heartbeat_timeout_s=policy.heartbeat_timeout_s,
        scheduler_interval_s=policy.scheduler_interval_s,
        max_window_ms=max_window,
        retention_ms=retention_ms,
        recovered_sink=recovered_sink,
    )
    stream = SupervisedStream(
        feed=spec.name,
        label=label,
        venue=venue,
        graph=graph,
        session=session,
        publish=publish,
        health=health,
        symbols=symbols,
        policy=policy,
        hole_sink=hole_sink,
        recovery_enabled=recovery,
        clock_ns=clock_ns,
    )
    if isinstance(history, RestTradeHistory):
        stream.closers.append(history.close)
    stream_ref.append(stream)
    return stream
