"""Publishing to a real Redis: envelopes round-trip, keys carry a TTL, keys expire when a stream stops."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from channels.db import database_sync_to_async
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from feeds.distribution.redispub.envelope import Source, decode
from feeds.distribution.redispub.metadata_types import InstrumentMetadata
from feeds.market import FeedData
from tests.feeds.factories import make_feed, trade
from tests.feeds.redispub.conftest import FAST_OPTIONS, make_service, running
from tests.helpers import async_eventually

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]

KEY = "{prefix}:simulated:simulated:BTCUSDT:trades"


async def test_a_published_trade_round_trips_through_the_key_and_the_channel(redis: Redis, prefix: str) -> None:
    await database_sync_to_async(make_feed)("sim")
    service = await make_service(redis, prefix, ["sim"])
    key = KEY.format(prefix=prefix)
    pubsub = redis.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(key)
    async with running(service, skip=["heartbeat"]):
        await async_eventually(lambda: _admitted(service))
        sent = trade(1)
        await service.bridge.consume(FeedData("sim", (sent,)))

        stored = decode(await redis.get(key))
        assert (stored.venue, stored.market_type, stored.symbol, stored.venue_symbol, stored.channel) == (
            "simulated",
            "simulated",
            "BTCUSDT",
            "BTCUSDT",
            "trades",
        )
        assert stored.data == {"price": "64000.12345678", "quantity": "0.00001234", "side": "buy", "trade_id": "1"}
        assert (stored.exchange_time_ns, stored.recv_time_ns) == (sent.ts_event, sent.ts_recv)
        assert (stored.source, stored.status, stored.publish_seq) == (Source.WS.value, "HEALTHY", 1)
        assert stored.instance_id == service.publisher.instance_id and stored.publish_time_ns > 0
        # TTL = cadence 0.1 s x multiplier 3.
        assert 0 < await redis.pttl(key) <= 300

        pushed = await _next_message(pubsub)
        assert decode(pushed) == stored
        await service.bridge.consume(FeedData("sim", (trade(2),)))
        assert decode(await redis.get(key)).publish_seq == 2
    await pubsub.aclose()


async def test_metadata_of_a_venue_without_an_endpoint_comes_from_the_instrument_table(
    redis: Redis, prefix: str
) -> None:
    await database_sync_to_async(make_feed)("sim")
    service = await make_service(redis, prefix, ["sim"])
    async with running(service, skip=["heartbeat"]):
        await async_eventually(lambda: _admitted(service))
        metadata = decode(await redis.get(f"{prefix}:simulated:simulated:BTCUSDT:metadata"))
    assert metadata.source == Source.CONFIG.value
    assert metadata.data == {"tick_size": "0.01", "lot_size": "0.001", "contract_multiplier": "1"}


async def test_keys_expire_when_the_stream_stops_and_health_says_so(redis: Redis, prefix: str) -> None:
    await database_sync_to_async(make_feed)("sim")
    service = await make_service(redis, prefix, ["sim"])
    key = KEY.format(prefix=prefix)
    health_key = f"{prefix}:simulated:simulated:BTCUSDT:health"
    async with running(service):
        await async_eventually(lambda: _admitted(service))
        for number in range(1, 6):  # the stream is alive: a trade every 20 ms
            await service.bridge.consume(FeedData("sim", (trade(number),)))
            await asyncio.sleep(0.02)
        assert await redis.exists(key)
        assert decode(await redis.get(health_key)).status == "HEALTHY"

        # The stream stops: nothing refreshes the key, and the simulated venue has no REST.
        await async_eventually(lambda: _gone(redis, key), timeout_s=5)
        health = await async_eventually(lambda: _health_with_status(redis, health_key, "DEGRADED"), timeout_s=5)
        assert health.data["channels"]["trades"]["source"] == "NONE"
        assert "no REST fallback" in health.status_reason
    # The publisher stops too: its health keys disappear within a few heartbeats.
    await async_eventually(lambda: _gone(redis, health_key), timeout_s=5)
    await async_eventually(lambda: _gone(redis, f"{prefix}:simulated:venue:health"), timeout_s=5)


async def test_the_running_site_publishes_the_simulated_feed_and_its_keys_vanish_after_stop(
    redis: Redis,
    prefix: str,
    settings,
) -> None:
    from tradingsite.runtime.compose import build_runtime

    settings.MARKET_DATA_PREFIX = prefix
    settings.REDIS_NAMESPACE = ""  # the keys under test are the plain layout
    settings.MARKET_DATA_CADENCE_S = ["simulated:trades=0.1"]
    settings.MARKET_DATA_HEARTBEAT_S = 0.1
    await database_sync_to_async(make_feed)("sim", ("BTCUSDT", "ETHUSDT"), settings={"interval_ms": 20})
    runtime = build_runtime(role="test-redis", feed_names=["sim"], periodic_jobs=False)
    run = asyncio.create_task(runtime.run())
    keys = [KEY.format(prefix=prefix), f"{prefix}:simulated:simulated:ETHUSDT:trades"]
    try:
        for key in keys:
            stored = decode(await async_eventually(lambda: redis.get(key), timeout_s=10))
            assert stored.source == Source.WS.value and stored.instance_id == runtime.context.instance_id
        # A heartbeat from before the stream's first report shows its streams healthy and
        # the feed UNKNOWN; wait for one written once the feed reports.
        venue_health = await async_eventually(
            lambda: _health_with_status(redis, f"{prefix}:simulated:venue:health", "HEALTHY", feed="sim"), timeout_s=10
        )
        assert venue_health.data["feeds"] == {"sim": "HEALTHY"}
        assert venue_health.data["streams"] == {"HEALTHY": 2, "DEGRADED": 0, "BLOCKED": 0}
    finally:
        runtime.request_stop()
        assert await asyncio.wait_for(run, 10) == 0
    for key in keys:
        await async_eventually(lambda: _gone(redis, key), timeout_s=5)


async def test_without_redis_url_the_publisher_is_off_and_says_so(settings) -> None:
    from core.runtime.core import RuntimeContext
    from feeds.redis_startup import redis_publisher_startup_tasks
    from feeds.startup import FeedHubs

    settings.REDIS_URL = ""
    ctx = RuntimeContext()
    feeds = FeedHubs()
    feeds.specs.provide([])
    fanout = feeds.fanout
    (task,) = redis_publisher_startup_tasks(feeds)
    await task.run(ctx)
    health = ctx.health.get("redis-publisher")
    assert health is not None and health.status.value == "HEALTHY" and "off" in health.reason
    assert fanout.overflows == {}  # nothing subscribed to the fan-out
    await ctx.exit_stack.aclose()


async def test_a_redis_outage_loses_the_batch_keeps_the_feed_and_shows_blocked(prefix: str) -> None:
    await database_sync_to_async(make_feed)("sim")
    # Nothing listens on port 1; no retries, so the failure is immediate.
    dead = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    service = await make_service(dead, prefix, ["sim"], options=dataclasses.replace(FAST_OPTIONS, fallback=False))
    service.gate.admit("sim", [InstrumentMetadata("BTCUSDT", "BTCUSDT", "0.01", "0.001", "1", Source.CONFIG)])
    await service.bridge.consume(FeedData("sim", (trade(1),)))  # must not raise
    assert service.bridge.skipped["redis_error"] == 1
    health = service.board.get("redis-publisher")
    # Unreachable: nothing is published, and the component says so with the error.
    assert health is not None and health.status.value == "BLOCKED" and "Redis unreachable" in health.reason
    # The spent sequence number makes the loss visible to readers as a gap.
    assert service.publisher.sequences.last(KEY.format(prefix=prefix)) == 1
    await dead.aclose()


async def _admitted(service) -> bool:  # type: ignore[no-untyped-def]
    return service.gate.allows("sim", "BTCUSDT")


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)


async def _health_with_status(redis: Redis, key: str, status: str, *, feed: str | None = None):  # type: ignore[no-untyped-def]
    """The health envelope at `key` once it has `status` (with `feed`: once that feed has reported)."""
    body = await redis.get(key)
    if body is None:
        return None
    envelope = decode(body)
    if envelope.status != status or (feed is not None and envelope.data["feeds"].get(feed) == "UNKNOWN"):
        return None
    return envelope


async def _next_message(pubsub) -> bytes:  # type: ignore[no-untyped-def]
    async def receive() -> bytes | None:
        message = await pubsub.get_message(timeout=0.1)
        return message["data"] if message else None

    return await async_eventually(receive, timeout_s=5)


async def test_health_is_republished_every_interval_even_when_nothing_changes(redis: Redis, prefix: str) -> None:
    await database_sync_to_async(make_feed)("sim")
    service = await make_service(redis, prefix, ["sim"])
    health_key = f"{prefix}:simulated:simulated:BTCUSDT:health"
    async with running(service):
        first = await async_eventually(lambda: _health_with_status(redis, health_key, "HEALTHY"), timeout_s=5)

        async def later_heartbeat():  # type: ignore[no-untyped-def]
            envelope = decode(await redis.get(health_key))
            return envelope if envelope.publish_seq >= first.publish_seq + 3 else None

        later = await async_eventually(later_heartbeat, timeout_s=5)
    assert (later.status, later.data, later.instance_id) == (first.status, first.data, first.instance_id)
    assert later.publish_time_ns > first.publish_time_ns
