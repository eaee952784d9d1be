"""The Redis publisher's gate follows the feed's metadata gate, in a running feed runtime.

A real Redis, the real stream composition, and the local fake Binance USD-M venue.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from redis.asyncio import Redis

from core.runtime.core import Runtime
from feeds.distribution.redispub.envelope import Envelope, Source, decode
from feeds.distribution.redispub.metadata import instrument_metadata_refresh
from feeds.redis_startup import redis_publisher_startup_tasks
from feeds.startup import FeedHubs, feed_startup_tasks
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.feeds.factories import make_feed
from tests.helpers import async_eventually

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]

SYMBOLS = ("BTCUSDT", "ETHUSDT")


@pytest.fixture
def fast(settings, prefix: str):  # type: ignore[no-untyped-def]
    settings.FEED_HEARTBEAT_TIMEOUT_S = 0.5
    settings.FEED_HEARTBEAT_CHECK_S = 0.05
    settings.FEED_BACKOFF_INITIAL_S = 0.01
    settings.FEED_BACKOFF_MAX_S = 0.05
    settings.FEED_REST_TIMEOUT_S = 2
    settings.RECORDER_ENABLED = False
    settings.MARKET_DATA_PREFIX = prefix
    settings.REDIS_NAMESPACE = ""  # the keys under test are the plain layout
    settings.MARKET_DATA_HEARTBEAT_S = 0.05
    settings.MARKET_DATA_METADATA_RETRY_S = 0.05
    settings.MARKET_DATA_FALLBACK = False
    settings.MARKET_DATA_KEYSPACE_NOTIFICATIONS = False
    return settings


def _key(prefix: str, symbol: str, channel: str) -> str:
    return f"{prefix}:binance-usdm:perpetual:{symbol}:{channel}"


async def _stored(redis: Redis, key: str) -> Envelope | None:
    raw = await redis.get(key)
    return decode(raw) if raw is not None else None


async def test_prices_of_an_instrument_reach_redis_only_while_the_feed_gate_lets_it_through(  # type: ignore[no-untyped-def]
    fast,
    redis: Redis,
    prefix: str,
) -> None:
    async with FakeBinanceUsdm(make_tape(2000, SYMBOLS)) as venue:
        venue.listed = {"BTCUSDT"}
        await database_sync_to_async(make_feed)(
            "bin", SYMBOLS, venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        feeds = FeedHubs()
        runtime = Runtime([*feed_startup_tasks(feeds, ["bin"]), *redis_publisher_startup_tasks(feeds)])
        task = asyncio.create_task(runtime.run())
        try:
            btc_meta = await async_eventually(lambda: _stored(redis, _key(prefix, "BTCUSDT", "metadata")))
            assert btc_meta.data["tick_size"] == "0.1" and btc_meta.source == Source.REST.value

            # Before the first fetch answers, the health key may say "waiting for the first
            # fetch"; the gate's own reason replaces it once the venue's listing is read.
            async def eth_blocked_as_unlisted() -> Envelope | None:
                health = await _stored(redis, _key(prefix, "ETHUSDT", "health"))
                if health is None or health.status != "BLOCKED":
                    return None
                return health if "not listed by binance-usdm" in health.status_reason else None

            assert await async_eventually(eth_blocked_as_unlisted, timeout_s=10)
            assert await redis.get(_key(prefix, "ETHUSDT", "metadata")) is None

            # The venue lists it: its metadata is published, then its prices.
            venue.listed = set(SYMBOLS)
            eth_meta = await async_eventually(lambda: _stored(redis, _key(prefix, "ETHUSDT", "metadata")), timeout_s=10)
            assert eth_meta.data["lot_size"] == "0.001"
            await async_eventually(lambda: _any(venue.subscribed_streams() == {"btcusdt@aggTrade", "ethusdt@aggTrade"}))
            venue.play(2000)
            eth_trade = await async_eventually(lambda: _stored(redis, _key(prefix, "ETHUSDT", "trades")), timeout_s=10)
            assert eth_trade.source == Source.WS.value

            # The hourly refresh finds it unlisted again: the publisher holds it back again.
            venue.listed = {"BTCUSDT"}
            await database_sync_to_async(instrument_metadata_refresh)()
            assert await async_eventually(eth_blocked_as_unlisted, timeout_s=10)
        finally:
            runtime.request_stop()
            assert await task == 0


async def _any(value: object) -> bool:
    return bool(value)


async def test_the_publisher_asks_the_venue_nothing_itself_and_nothing_is_dialled_or_published_before_metadata(  # type: ignore[no-untyped-def]
    fast,
    redis: Redis,
    prefix: str,
) -> None:
    async with FakeBinanceUsdm(make_tape(500, SYMBOLS)) as venue:
        venue.metadata_down(True)
        await database_sync_to_async(make_feed)(
            "bin", SYMBOLS, venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        feeds = FeedHubs()
        runtime = Runtime([*feed_startup_tasks(feeds, ["bin"]), *redis_publisher_startup_tasks(feeds)])
        task = asyncio.create_task(runtime.run())
        try:

            async def blocked_on_redis() -> Envelope | None:
                health = await _stored(redis, _key(prefix, "BTCUSDT", "health"))
                return health if health is not None and health.status == "BLOCKED" else None

            async def gate_blocked() -> bool:
                gate = runtime.context.health.get("metadata-gate:bin")
                return gate is not None and gate.status.value == "BLOCKED"

            assert await async_eventually(gate_blocked, timeout_s=10)
            assert await async_eventually(blocked_on_redis, timeout_s=10)
            # Nothing is dialled, and nothing but health is published, while metadata is unknown.
            assert venue.stats.connections == 0
            assert await redis.get(_key(prefix, "BTCUSDT", "metadata")) is None
            failed_fetches = venue.stats.exchange_info_requests
            assert failed_fetches >= 1

            venue.metadata_down(False)
            meta = await async_eventually(lambda: _stored(redis, _key(prefix, "BTCUSDT", "metadata")), timeout_s=10)
            assert meta.data["tick_size"] == "0.1"
            await async_eventually(lambda: _any(venue.subscribed_streams() == {"btcusdt@aggTrade", "ethusdt@aggTrade"}))
            venue.play(2000)
            await async_eventually(lambda: _stored(redis, _key(prefix, "BTCUSDT", "trades")), timeout_s=10)
            # The listing was fetched by the feed gate alone: once it answered, no one asked again.
            assert venue.stats.exchange_info_requests == failed_fetches + 1
            gate = runtime.context.health.get("metadata-gate:bin")
            assert gate is not None and gate.status.value == "HEALTHY"
        finally:
            runtime.request_stop()
            assert await task == 0
