"""One runtime process's Redis market-data publishing, assembled from its parts.

Order: the heartbeat runs first (it is what says BLOCKED "metadata
unavailable" while the first metadata fetch is failing); the metadata gate opens per
feed when its metadata lands; market data flows through the gate; the fallback
watcher acts only on keys a websocket value has been published on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from redis.asyncio import Redis
from redis.exceptions import RedisError

from core.health import HealthBoard
from core.log_throttle import FailureLog
from feeds.distribution.redispub.bridge import MarketDataBridge
from feeds.distribution.redispub.cancel import reraise_if_cancelling
from feeds.distribution.redispub.catalog import Catalog, FeedEntry
from feeds.distribution.redispub.fallback import (
    NOTIFY_SETTING,
    FallbackController,
    enable_expiry_notifications,
    missing_expiry_flags,
    read_notify_flags,
)
from feeds.distribution.redispub.heartbeat import Heartbeat
from feeds.distribution.redispub.link_health import RedisLinkHealth
from feeds.distribution.redispub.metadata import (
    FETCH_FAILURES,
    fetch_feed_metadata,
    instrument_metadata_apply,
    metadata_drafts,
)
from feeds.distribution.redispub.publish_gate import PublishGate
from feeds.distribution.redispub.publisher import RedisPublisher

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceOptions:
    heartbeat_s: float = 1.0
    sweep_s: float = 1.0
    min_poll_s: float = 1.0
    rest_per_minute: float = 60.0
    rest_timeout_s: float = 10.0
    metadata_retry_s: float = 5.0
    metadata_ttl_ms: int = 3 * 3600 * 1000
    # True: add the missing expired-key flags to notify-keyspace-events at start (keeping
    # the others). False: leave the server's setting alone and only report when it lacks them.
    expiry_notifications: bool = True
    fallback: bool = True
    failure_log_s: float = 10.0  # a repeating failure is logged at most once per this interval


class MarketDataService:
    def __init__(
        self,
        redis: Redis,
        catalog: Catalog,
        board: HealthBoard,
        *,
        instance_id: str,
        options: ServiceOptions,
        sleep: Callable[[float], Any] = asyncio.sleep,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.redis = redis
        self.catalog = catalog
        self.board = board
        self.options = options
        self._sleep = sleep
        self._clock_ns = clock_ns
        self.gate = PublishGate()
        self.link = RedisLinkHealth(
            board, healthy_reason=f"publishing to {catalog.prefix}:*", log_interval_s=options.failure_log_s
        )
        self.publisher = RedisPublisher(redis, instance_id=instance_id, clock_ns=clock_ns, link=self.link)
        self._metadata_logs: dict[str, FailureLog] = {}  # per feed
        self.fallback = (
            FallbackController(
                catalog,
                self.publisher,
                min_poll_s=options.min_poll_s,
                sweep_s=options.sweep_s,
                rest_per_minute=options.rest_per_minute,
                rest_timeout_s=options.rest_timeout_s,
                sleep=sleep,
                clock_ns=clock_ns,
            )
            if options.fallback
            else None
        )
        self.bridge = MarketDataBridge(catalog, self.gate, self.publisher, board, arrivals=self.fallback)
        self.heartbeat = Heartbeat(
            catalog,
            self.gate,
            self.publisher,
            board,
            bridge=self.bridge,
            fallback=self.fallback,
            interval_s=options.heartbeat_s,
            sleep=sleep,
            clock_ns=clock_ns,
        )

    async def prepare(self) -> None:
        """Check Redis and the expiry notifications; a Redis that is down is not fatal here.

        The component starts from what a first round trip says, not from an assumption:
        BLOCKED with the error while Redis is unreachable (the heartbeat keeps probing).
        """
        try:
            await self.redis.ping()
            if self.fallback is not None:
                await self._check_expiry_notifications()
        except (RedisError, OSError) as exc:
            reraise_if_cancelling()
            self.link.failed(exc)
            return
        self.link.succeeded()

    async def _check_expiry_notifications(self) -> None:
        if self.options.expiry_notifications and await enable_expiry_notifications(self.redis):
            return
        current = await read_notify_flags(self.redis)
        if current is None:
            note = f"{NOTIFY_SETTING} unknown (CONFIG GET refused): expiries are found by the EXISTS sweep"
        elif missing := missing_expiry_flags(current):
            note = f"{NOTIFY_SETTING} {current!r} lacks {missing!r}: expiries are found by the EXISTS sweep"
        else:
            return
        log.warning("redis-publisher: %s (set `%s Ex` on the server to be told at once)", note, NOTIFY_SETTING)
        self.link.show_note(note)

    def background(self, *, fetch_metadata: bool = True) -> list[tuple[str, Coroutine[Any, Any, None]]]:
        """Return the long-lived coroutines to spawn, named.

        `fetch_metadata=False` when the process's feed metadata gate is followed instead
        (feeds.redis_startup): the venue is then asked once, by that gate, not twice.
        """
        work: list[tuple[str, Coroutine[Any, Any, None]]] = [("redis-publisher:heartbeat", self.heartbeat.run())]
        for feed in self.catalog.feeds.values():
            if feed.instruments and fetch_metadata:
                work.append((f"redis-publisher:metadata:{feed.name}", self.open_gate(feed)))
        if self.fallback is not None:
            work.append(("redis-publisher:expiries", self.fallback.watch_expiries(self.redis)))
            work.append(("redis-publisher:sweep", self.fallback.sweep_forever()))
        return work

    async def open_gate(self, feed: FeedEntry) -> None:
        """Fetch the feed's metadata until it lands, store and publish it, admit its instruments."""
        failures = self._metadata_logs.setdefault(
            feed.name, FailureLog(log, f"redis-publisher {feed.name}: metadata fetch failed", interval_s=60.0)
        )
        while True:
            reraise_if_cancelling()
            try:
                listing = await fetch_feed_metadata(feed, timeout_s=self.options.rest_timeout_s)
                result = await database_sync_to_async(instrument_metadata_apply)(feed=feed, listing=listing)
            except FETCH_FAILURES as exc:
                reraise_if_cancelling()
                self.gate.block(feed.name, f"fetch failed: {exc!r}"[:200])
                failures.failed(f"{exc!r}; retry every {self.options.metadata_retry_s:g} s")
                await self._sleep(self.options.metadata_retry_s)
                continue
            drafts = metadata_drafts(
                self.catalog, feed, result.known, ttl_ms=self.options.metadata_ttl_ms, recv_time_ns=self._clock_ns()
            )
            try:
                await self.publisher.publish(drafts)
            except RedisError as exc:
                reraise_if_cancelling()
                # Metadata that readers cannot see yet would let prices out first: retry.
                self.gate.block(feed.name, f"publish failed: {exc!r}"[:200])
                await self._sleep(self.options.metadata_retry_s)
                continue
            failures.succeeded("metadata fetched")
            self.gate.admit(feed.name, result.known)
            if result.missing:
                self.gate.block(feed.name, f"not listed by {feed.venue}: {', '.join(sorted(result.missing))}")
            log.info(
                "redis-publisher %s: metadata of %d instruments published; data flows", feed.name, len(result.known)
            )
            return

    async def aclose(self) -> None:
        if self.fallback is not None:
            await self.fallback.aclose()
