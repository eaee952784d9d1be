"""REST fallback: when a websocket value's key disappears, poll the venue's REST API.

Two triggers, both reading the key itself rather than a second staleness clock that
would eventually disagree with the TTL: Redis keyspace notifications for expired keys
(`notify-keyspace-events` must contain `E` and `x`; `enable_expiry_notifications`
adds them at start), and a periodic EXISTS sweep as the backstop for a missed
notification (pub/sub drops them while disconnected, and managed Redis may refuse
CONFIG SET). The value polled from REST is published on the same key with source REST
and status DEGRADED, so readers keep one code path and can still see the difference;
the first websocket value on that key stops the poller (hand back).

Polls go through one token bucket per venue, a fraction of what the venue allows (the
order path shares this IP): when it is empty the poll is skipped, never queued, and the
stream's health says "rate limited" (fail closed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
from aiolimiter import AsyncLimiter
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from core.health import Status
from core.log_throttle import FailureLog
from feeds.distribution.redispub.cancel import reraise_if_cancelling
from feeds.distribution.redispub.catalog import Catalog
from feeds.distribution.redispub.envelope import CHANNEL_OF_KIND, Envelope, Source, event_data
from feeds.distribution.redispub.metadata import FETCH_FAILURES
from feeds.distribution.redispub.publisher import Draft, RedisPublisher
from feeds.market import MarketEvent
from feeds.venues import get_venue
from feeds.venues.base import HttpRequest, TradeQuery
from feeds.venues.rest import fetch

log = logging.getLogger(__name__)

FALLBACK_REASON = "websocket value expired; polling REST"


class LatestValueVenue(Protocol):
    """Optional venue extension: the REST call that returns a channel's current value.

    Without it only `trades` falls back, through the venue's trade history endpoint.
    """

    def latest_request(self, channel: str, symbol: str, settings: Mapping[str, object]) -> HttpRequest | None: ...

    def parse_latest(self, channel: str, body: bytes, symbol: str, received_ns: int) -> list[MarketEvent]: ...


@dataclass(frozen=True)
class StreamRef:
    feed: str
    venue_symbol: str
    channel: str


@dataclass(frozen=True)
class RestCall:
    request: HttpRequest
    parse: Callable[[bytes, int], list[MarketEvent]]


def rest_call(venue: Any, channel: str, venue_symbol: str, settings: Mapping[str, object]) -> RestCall | None:
    """Return the REST call serving `channel`'s current value on `venue`, or None."""
    if hasattr(venue, "latest_request"):
        request = venue.latest_request(channel, venue_symbol, settings)
        if request is not None:
            return RestCall(request, lambda body, ns: venue.parse_latest(channel, body, venue_symbol, ns))
    if channel == "trades" and hasattr(venue, "trades_request"):
        # The newest trade: one row, no bounds (every trade-history venue serves that).
        request = venue.trades_request(TradeQuery(symbol=venue_symbol, limit=1), settings)
        return RestCall(request, lambda body, ns: venue.parse_trades(body, venue_symbol, ns))
    return None


def newest(events: list[MarketEvent], venue_symbol: str, channel: str) -> MarketEvent | None:
    """Return the newest event of `channel` for the symbol (REST pages are oldest first)."""
    matching = [
        event
        for event in events
        if CHANNEL_OF_KIND[event.kind] == channel and event.symbol.upper() == venue_symbol.upper()
    ]
    return max(matching, key=lambda event: event.ts_event, default=None)


NOTIFY_SETTING = "notify-keyspace-events"


def missing_expiry_flags(current: str) -> str:
    """Return the flags `current` lacks for expired-key events: "" when it has them.

    `E` (keyevent channels) and `x` (expired events); `A` is the alias of every event
    class, `x` included.
    """
    return ("" if "E" in current else "E") + ("" if "x" in current or "A" in current else "x")


async def read_notify_flags(redis: Redis) -> str | None:
    """Return the server's notify-keyspace-events, or None when CONFIG GET is refused."""
    try:
        raw = (await redis.config_get(NOTIFY_SETTING)).get(NOTIFY_SETTING) or ""
    except ResponseError:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


async def enable_expiry_notifications(redis: Redis) -> bool:
    """Add only the missing `E` and `x` to notify-keyspace-events; False if refused.

    The setting is server-wide and other clients may rely on theirs: the flags already
    set are kept, nothing is removed, and nothing is written when they suffice.
    """
    current = await read_notify_flags(redis)
    if current is None:
        log.warning("redis-fallback: CONFIG GET refused; cannot check expiry notifications (relying on the sweep)")
        return False
    missing = missing_expiry_flags(current)
    if not missing:
        return True
    try:
        await redis.config_set(NOTIFY_SETTING, current + missing)
    except ResponseError as exc:
        log.warning("redis-fallback: cannot enable expiry notifications (%s); relying on the EXISTS sweep", exc)
        return False
    log.info("redis-fallback: %s was %r; added %r (server-wide)", NOTIFY_SETTING, current, missing)
    return True


class FallbackController:
    """Tracks websocket keys, notices when they vanish, and polls REST until they come back."""

    def __init__(
        self,
        catalog: Catalog,
        publisher: RedisPublisher,
        *,
        min_poll_s: float,
        sweep_s: float,
        rest_per_minute: float,
        rest_timeout_s: float,
        retry_s: float = 1.0,
        sleep: Callable[[float], Any] = asyncio.sleep,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._catalog = catalog
        self._publisher = publisher
        self._min_poll_s = min_poll_s
        self._sweep_s = sweep_s
        self._rest_timeout_s = rest_timeout_s
        self._retry_s = retry_s
        self._sleep = sleep
        self._clock_ns = clock_ns
        self.rest_per_minute = rest_per_minute
        self._limiters: dict[str, AsyncLimiter] = {}
        self._session: aiohttp.ClientSession | None = None
        self.known: dict[str, StreamRef] = {}  # keys a websocket value was published on
        self.active: dict[str, asyncio.Task[None]] = {}  # keys served from REST now
        self.unavailable: dict[str, str] = {}  # key -> why it cannot fall back
        self.problems: dict[str, str] = {}  # key -> last poll problem (rate limited, HTTP error)
        self.rest_published = 0
        self.handbacks = 0
        self.rest_calls: Counter[str] = Counter()  # per venue
        self.skipped_polls: Counter[str] = Counter()  # per venue: the budget was empty
        self._subscription_log = FailureLog(log, "redis-fallback: expiry subscription", interval_s=60.0)
        self._sweep_log = FailureLog(log, "redis-fallback: EXISTS sweep failed", interval_s=60.0)
        self._poll_logs: dict[str, FailureLog] = {}  # per key

    # --- triggers -------------------------------------------------------------------

    def websocket_published(self, key: str, feed: str, venue_symbol: str, channel: str) -> None:
        if key not in self.known:
            self.known[key] = StreamRef(feed, venue_symbol, channel)
        self.unavailable.pop(key, None)
        task = self.active.pop(key, None)
        if task is not None:
            task.cancel()
            self.problems.pop(key, None)
            self.handbacks += 1
            log.info("redis-fallback: %s is back on the websocket", key)

    def key_missing(self, key: str) -> None:
        """Start polling REST for `key` if it is a websocket key not already on REST."""
        ref = self.known.get(key)
        if ref is None or key in self.active:
            return
        feed = self._catalog.feeds[ref.feed]
        try:
            call = rest_call(get_venue(feed.venue), ref.channel, ref.venue_symbol, feed.settings)
        except ValueError as exc:  # the venue module refused to build the request
            self.unavailable[key] = f"REST request refused: {exc}"[:300]
            return
        if call is None:
            if key not in self.unavailable:
                log.warning(
                    "redis-fallback: %s expired and %s has no REST endpoint for %s", key, feed.venue, ref.channel
                )
            self.unavailable[key] = f"no REST fallback for {ref.channel} on {feed.venue}"
            return
        log.warning("redis-fallback: %s expired; polling REST", key)
        task = asyncio.create_task(self._poll(key, ref, call), name=f"redis-fallback:{key}")
        task.add_done_callback(lambda done: self._poller_done(key, done))
        self.active[key] = task

    def _poller_done(self, key: str, task: asyncio.Task[None]) -> None:
        # A poller ends only by cancellation; anything else is a bug that must not leave
        # the key looking "on REST" while nothing polls it.
        if task.cancelled() or task.exception() is None:
            return
        log.error("redis-fallback: poller of %s failed", key, exc_info=task.exception())
        if self.active.get(key) is task:
            del self.active[key]
        self.unavailable[key] = f"REST poller failed: {task.exception()!r}"[:300]

    async def watch_expiries(self, redis: Redis) -> None:
        """Turn expired-key notifications for this prefix into `key_missing`, forever."""
        db = redis.connection_pool.connection_kwargs.get("db", 0)
        channel = f"__keyevent@{db}__:expired"
        prefix = self._catalog.prefix + ":"
        while True:
            reraise_if_cancelling()
            pubsub = redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                self._subscription_log.succeeded("subscribed again")
                async for message in pubsub.listen():
                    reraise_if_cancelling()
                    key = message["data"]
                    key = key.decode() if isinstance(key, bytes) else str(key)
                    if key.startswith(prefix):
                        self.key_missing(key)
            except RedisError as exc:
                reraise_if_cancelling()
                self._subscription_log.failed(f"lost ({exc!r}); resubscribing")
                await self._sleep(self._retry_s)
            finally:
                await pubsub.aclose()

    async def sweep_forever(self) -> None:
        while True:
            reraise_if_cancelling()
            await self._sleep(self._sweep_s)
            try:
                await self.sweep_once()
            except RedisError as exc:
                reraise_if_cancelling()
                self._sweep_log.failed(exc)
                if self._publisher.link is not None:
                    self._publisher.link.failed(exc)
                continue
            self._sweep_log.succeeded()

    async def sweep_once(self) -> list[str]:
        """Check every websocket key not on REST with EXISTS; return (and act on) the missing ones."""
        keys = [key for key in self.known if key not in self.active]
        if not keys:
            return []
        pipe = self._publisher.redis.pipeline(transaction=False)
        for key in keys:
            pipe.exists(key)
        found = await pipe.execute()
        if self._publisher.link is not None:
            self._publisher.link.succeeded()
        missing = [key for key, exists in zip(keys, found) if not exists]
        for key in missing:
            self.key_missing(key)
        return missing

    # --- the poller -----------------------------------------------------------------

    def _limiter(self, venue: str) -> AsyncLimiter:
        limiter = self._limiters.get(venue)
        if limiter is None:
            limiter = self._limiters[venue] = AsyncLimiter(self.rest_per_minute, 60)
        return limiter

    async def _poll(self, key: str, ref: StreamRef, call: RestCall) -> None:
        feed = self._catalog.feeds[ref.feed]
        instrument = feed.instruments[ref.venue_symbol]
        ttl_ms = self._catalog.ttl_ms(feed, ref.channel)
        # One poll per cadence keeps the REST value's key alive (TTL = cadence x multiplier).
        poll_s = max(self._min_poll_s, self._catalog.cadence.cadence_s(feed, ref.channel))
        task = asyncio.current_task()
        limiter = self._limiter(feed.venue)
        failures = self._poll_logs.setdefault(key, FailureLog(log, f"redis-fallback: {key} REST poll failed"))
        while True:
            reraise_if_cancelling()
            if not limiter.has_capacity():
                self.problems[key] = "rate limited: REST poll skipped"
                self.skipped_polls[feed.venue] += 1
            else:
                await limiter.acquire()
                self.rest_calls[feed.venue] += 1
                try:
                    await self._poll_once(key, ref, call, feed, instrument.symbol, ttl_ms, task)
                except FETCH_FAILURES as exc:
                    reraise_if_cancelling()
                    self.problems[key] = f"REST poll failed: {exc!r}"[:300]
                    failures.failed(exc)
                except RedisError as exc:
                    reraise_if_cancelling()
                    self.problems[key] = f"Redis publish failed: {exc!r}"[:300]
                else:
                    failures.succeeded()
            await self._sleep(poll_s)

    async def _poll_once(
        self,
        key: str,
        ref: StreamRef,
        call: RestCall,
        feed: Any,
        symbol: str,
        ttl_ms: int,
        task: asyncio.Task[Any] | None,
    ) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        body = await fetch(call.request, session=self._session, timeout_s=self._rest_timeout_s)
        received_ns = self._clock_ns()
        event = newest(call.parse(body, received_ns), ref.venue_symbol, ref.channel)
        if event is None:
            self.problems[key] = "REST answered without a value"
            return
        draft = Draft(
            key,
            ttl_ms,
            Envelope(
                venue=feed.venue,
                market_type=feed.market_type,
                symbol=symbol,
                venue_symbol=ref.venue_symbol,
                channel=ref.channel,
                recv_time_ns=received_ns,
                exchange_time_ns=event.ts_event,
                source=Source.REST.value,
                status=Status.DEGRADED.value,
                status_reason=FALLBACK_REASON,
                data=event_data(event),
            ),
        )
        # Publish only while this poller still owns the key: a websocket value that
        # arrived during the fetch has handed it back, and must not be overwritten.
        if await self._publisher.publish([draft], only_if=lambda: self.active.get(key) is task):
            self.rest_published += 1
            self.problems.pop(key, None)

    async def aclose(self) -> None:
        tasks = list(self.active.values())
        self.active.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
