"""Startup task of the Redis market-data publisher (feeds.redispub), for build_runtime.

It subscribes to the feed fan-out in the SUBSCRIPTIONS phase, before any stream
starts, so no batch is missed. Without REDIS_URL it does nothing but say so: the
embedded site runs the same without it.
"""
from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from django.conf import settings
from redis.asyncio import Redis

from feeds.fanout import FeedFanout, drain
from feeds.redispub.bridge import HEALTH_COMPONENT
from feeds.redispub.catalog import catalog_feeds
from feeds.redispub.metadata import catalog_from_settings, metadata_ttl_ms
from feeds.redispub.service import MarketDataService, ServiceOptions
from tradingsite.health import Status
from tradingsite.runtime.core import FatalError, Phase, RuntimeContext, StartupTask

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


def redis_publisher_startup_tasks() -> list[StartupTask]:
    """Return the task that starts publishing market data to Redis (when REDIS_URL is set)."""

    async def start(ctx: RuntimeContext) -> None:
        if not settings.REDIS_URL:
            log.info("redis-publisher: off (REDIS_URL is not set)")
            ctx.health.set(HEALTH_COMPONENT, Status.HEALTHY, "off: REDIS_URL is not set")
            return
        names = [spec.name for spec in ctx.resources["feed_specs"]]
        try:
            catalog = catalog_from_settings(await database_sync_to_async(catalog_feeds)(names))
        except ValueError as exc:  # a malformed MARKET_DATA_CADENCE_S item
            raise FatalError(f"MARKET_DATA_CADENCE_S: {exc}") from None
        redis = Redis.from_url(settings.REDIS_URL)
        ctx.exit_stack.push_async_callback(redis.aclose)
        service = MarketDataService(redis, catalog, ctx.health, instance_id=ctx.instance_id, options=service_options())
        ctx.exit_stack.push_async_callback(service.aclose)
        ctx.resources["redis_market_data"] = service
        await service.prepare()
        fanout: FeedFanout = ctx.resources["fanout"]
        queue = fanout.subscribe(FANOUT_CONSUMER)
        ctx.spawn("redis-publisher:publish", drain(FANOUT_CONSUMER, queue, service.bridge.consume))
        for name, work in service.background():
            ctx.spawn(name, work)
        log.info("redis-publisher: publishing %d feeds under %s:*", len(names), catalog.prefix)

    return [StartupTask("start-redis-publisher", Phase.SUBSCRIPTIONS, start)]
