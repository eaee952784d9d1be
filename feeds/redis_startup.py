"""Startup task of the Redis market-data publisher (feeds.distribution.redispub), for build_runtime.

It subscribes to the feed fan-out in the SUBSCRIPTIONS phase, before any stream
starts, so no batch is missed. Without REDIS_URL it does nothing but say so: the
embedded site runs the same without it.

The publisher's own gate follows the feed runtime's metadata gate, from the first
check on: nothing of an instrument is published until that gate has confirmed its
metadata, and the publisher makes no metadata request of its own (the venue is asked
once per feed, by the feed gate). Until then the publisher's health says it is waiting
for `metadata-gate:NAME`. An instrument the feed gate holds (its metadata went stale,
or the venue stopped listing it) is held here too, and one it lets through later
(metadata arrived on a refresh) has its metadata published before any of its prices;
metadata Redis refused is published again every MARKET_DATA_METADATA_RETRY_S. Without
a feed gate (a process that runs no feed tasks) the publisher fetches the metadata
itself, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from channels.db import database_sync_to_async
from django.conf import settings
from redis.asyncio import Redis
from redis.exceptions import RedisError

from core.health import Status
from core.log_throttle import FailureLog
from core.runtime.core import FatalError, Phase, RuntimeContext, StartupTask
from feeds.distribution.fanout import drain
from feeds.distribution.metadata_gate import GateChange, InstrumentMetadataGate
from feeds.distribution.metadata_gate import health_component as gate_component
from feeds.distribution.redispub.bridge import HEALTH_COMPONENT
from feeds.distribution.redispub.cancel import reraise_if_cancelling
from feeds.distribution.redispub.catalog import catalog_feeds
from feeds.distribution.redispub.metadata import (
    catalog_from_settings,
    metadata_drafts,
    metadata_ttl_ms,
    stored_metadata,
)
from feeds.distribution.redispub.service import MarketDataService, ServiceOptions
from feeds.startup import FeedHubs

log = logging.getLogger(__name__)

FANOUT_CONSUMER = "redis-publisher"


def service_options() -> ServiceOptions:
    return ServiceOptions(
        heartbeat_s=settings.MARKET_DATA_HEARTBEAT_S,
        sweep_s=settings.MARKET_DATA_SWEEP_S,
        min_poll_s=settings.MARKET_DATA_FALLBACK_MIN_POLL_S,
        rest_per_minute=settings.MARKET_DATA_REST_PER_MINUTE,
        rest_timeout_s=settings.MARKET_DATA_REST_TIMEOUT_S,
        metadata_retry_s=settings.MARKET_DATA_METADATA_RETRY_S,
        metadata_ttl_ms=metadata_ttl_ms(),
        expiry_notifications=settings.MARKET_DATA_KEYSPACE_NOTIFICATIONS,
        fallback=settings.MARKET_DATA_FALLBACK,
    )


def redis_publisher_startup_tasks(feeds: FeedHubs) -> list[StartupTask]:
    """Return the task that starts publishing market data to Redis (when REDIS_URL is set)."""

    async def start(ctx: RuntimeContext) -> None:
        if not settings.REDIS_URL:
            log.info("redis-publisher: off (REDIS_URL is not set)")
            ctx.health.set(HEALTH_COMPONENT, Status.HEALTHY, "off: REDIS_URL is not set")
            return
        names = feeds.feed_names()
        try:
            catalog = catalog_from_settings(await database_sync_to_async(catalog_feeds)(names))
        except ValueError as exc:  # a malformed MARKET_DATA_CADENCE_S item
            raise FatalError(f"MARKET_DATA_CADENCE_S: {exc}") from None
        redis = Redis.from_url(settings.REDIS_URL)
        ctx.exit_stack.push_async_callback(redis.aclose)
        service = MarketDataService(redis, catalog, ctx.health, instance_id=ctx.instance_id, options=service_options())
        ctx.exit_stack.push_async_callback(service.aclose)
        feeds.redis_market_data.provide(service)
        feed_gate: InstrumentMetadataGate | None = feeds.metadata_gate.get_or(None)
        if feed_gate is not None:
            for entry in service.catalog.feeds.values():
                if entry.instruments:
                    service.gate.block(entry.name, f"waiting for the feed's {gate_component(entry.name)}")
        await service.prepare()
        queue = feeds.fanout.subscribe(FANOUT_CONSUMER)
        ctx.spawn("redis-publisher:publish", drain(FANOUT_CONSUMER, queue, service.bridge.consume))
        if feed_gate is not None:
            follower = follow_feed_gate(service)
            ctx.spawn("redis-publisher:follow-gate", follower.run(feed_gate, service.options.metadata_retry_s))
        for name, work in service.background(fetch_metadata=feed_gate is None):
            ctx.spawn(name, work)
        log.info("redis-publisher: publishing %d feeds under %s:*", len(names), catalog.prefix)

    return [StartupTask("start-redis-publisher", Phase.SUBSCRIPTIONS, start)]


def _held_text(held: Mapping[str, str]) -> str:
    return "; ".join(f"{symbol}: {why}" for symbol, why in sorted(held.items()))[:200]


def follow_feed_gate(service: MarketDataService) -> FeedGateFollower:
    """Return the listener that keeps the publisher's gate in step with the feed's."""
    return FeedGateFollower(service)


class FeedGateFollower:
    """Follows the feed's metadata gate (a GateListener); retries metadata that Redis refused."""

    def __init__(self, service: MarketDataService) -> None:
        self._service = service
        self._unpublished: dict[str, set[str]] = {}  # admitted by the feed gate, metadata not yet on Redis
        self._failures: dict[str, FailureLog] = {}  # per feed: the gate is checked every few seconds

    def unpublished(self, feed: str) -> set[str]:
        return set(self._unpublished.get(feed, ()))

    async def run(self, gate: InstrumentMetadataGate, retry_s: float) -> None:
        """Follow `gate` (hearing what it decided so far), then retry refused metadata every `retry_s`."""
        await gate.follow(self)
        while True:
            await asyncio.sleep(retry_s)
            for feed in [feed for feed, pending in self._unpublished.items() if pending]:
                await self(feed, GateChange(), gate.held(feed))

    async def __call__(self, feed: str, change: GateChange, held: Mapping[str, str]) -> None:
        service = self._service
        entry = service.catalog.feeds.get(feed)
        if entry is None:
            return
        if change.held:
            service.gate.withdraw(feed, change.held, _held_text(held))
        pending = self._unpublished.setdefault(feed, set())
        pending.update(symbol for symbol in change.admitted if symbol in entry.instruments)
        pending.difference_update(held)
        admitted = sorted(pending)
        if admitted:
            known = await database_sync_to_async(stored_metadata)(feed_name=feed, venue_symbols=admitted)
            drafts = metadata_drafts(
                service.catalog, entry, known, ttl_ms=service.options.metadata_ttl_ms, recv_time_ns=time.time_ns()
            )
            try:
                await service.publisher.publish(drafts)
            except RedisError as exc:
                reraise_if_cancelling()
                # Readers must see the metadata before the prices: these stay held, and
                # are published again on the next check or retry.
                service.gate.block(feed, f"publish failed: {exc!r}"[:200])
                self._failures.setdefault(
                    feed, FailureLog(log, f"redis-publisher {feed}: metadata not published", interval_s=60.0)
                ).failed(f"{', '.join(admitted)} held ({exc!r})")
                return
            if feed in self._failures:
                self._failures[feed].succeeded("metadata published")
            service.gate.admit(feed, known)
            pending.clear()
        if held:
            service.gate.block(feed, _held_text(held))
