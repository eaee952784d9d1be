"""Tabdeal order books through the production runtime: the fake venue's socket and REST API,
the supervised stream, the Redis publisher and its REST fallback, against a real Redis."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from redis.asyncio import Redis

from core.health import HealthBoard
from feeds.distribution.redispub.envelope import Envelope, Source, decode
from feeds.distribution.redispub.service import MarketDataService
from feeds.market import FeedData
from feeds.models import Feed, Instrument, MarketType, Subscription
from feeds.streams.feed_streams import FeedStreamSettings, build_feed_streams
from feeds.streams.venue_limiter import VenueRateLimiter
from feeds.venues import get_venue
from feeds.venues.base import FeedSpec, InstrumentSpec
from tests.fakes.tabdeal import FakeTabdeal
from tests.feeds.redispub.conftest import make_service, running
from tests.feeds.stream_harness import FAST_POLICY, FAST_TRANSPORT, TEST_LIMITS
from tests.helpers import async_eventually

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]

BTC = "BTC_USDT"
BIDS = [("96712.40", "0.015"), ("96712.3", "1.20000000")]
ASKS = [("96712.5", "0.8"), ("96713", "2.45")]
# The socket pushes a snapshot every 100 ms; the key's TTL is that cadence x 3.
INTERVAL_MS = 100


def tabdeal_feed(fake: FakeTabdeal, symbols: tuple[str, ...] = (BTC,)) -> None:
    feed = Feed.objects.create(
        name="tab",
        venue="tabdeal",
        market_type=MarketType.PERPETUAL,
        settings={"ws_url": fake.ws_url, "rest_url": fake.rest_url, "interval_ms": INTERVAL_MS, "depth_limit": 5},
    )
    for symbol in symbols:
        instrument = Instrument.objects.create(
            feed=feed, symbol=symbol, venue_symbol=symbol, tick_size=Decimal("0.01"), lot_size=Decimal("0.001")
        )
        Subscription.objects.create(instrument=instrument, channel="order_book")


@contextlib.asynccontextmanager
async def streaming(fake: FakeTabdeal, service: MarketDataService) -> AsyncIterator[None]:
    """Run the feed's supervised streams, their batches handed to the publisher in order."""
    venue = get_venue("tabdeal")
    spec = FeedSpec(
        name="tab",
        venue="tabdeal",
        settings=venue.clean_settings({"ws_url": fake.ws_url, "rest_url": fake.rest_url, "interval_ms": INTERVAL_MS}),
        instruments=(InstrumentSpec(BTC, "0.01", "0.001", channels=("order_book",)),),
    )
    batches: asyncio.Queue[FeedData] = asyncio.Queue()
    streams = await build_feed_streams(
        spec,
        venue,  # type: ignore[arg-type]
        publish=batches.put_nowait,
        health=HealthBoard(),
        limiter=VenueRateLimiter(TEST_LIMITS, fraction=1.0),
        settings=FeedStreamSettings(policy=FAST_POLICY, transport=FAST_TRANSPORT, rest_timeout_s=2),
    )

    async def pump() -> None:
        while True:
            await service.bridge.consume(await batches.get())

    tasks = [asyncio.create_task(stream.run()) for stream in streams] + [asyncio.create_task(pump())]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _stored(redis: Redis, key: str) -> Envelope | None:
    body = await redis.get(key)
    return decode(body) if body is not None else None


async def _from(redis: Redis, key: str, source: Source, bids: list[list[str]] | None = None) -> Envelope | None:
    envelope = await _stored(redis, key)
    if envelope is None or envelope.source != source.value:
        return None
    return envelope if bids is None or envelope.data["bids"] == bids else None


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"  # keys of this test only, on the shared Redis


@pytest.fixture
async def redis(prefix: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(settings.REDIS_URL)
    try:
        yield client
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture
async def fake() -> AsyncIterator[FakeTabdeal]:
    async with FakeTabdeal() as venue:
        venue.set_book(BTC, BIDS, ASKS)
        yield venue


async def test_socket_snapshots_are_published_exactly_with_their_ttl_and_refreshed(
    redis: Redis, prefix: str, fake: FakeTabdeal
) -> None:
    await database_sync_to_async(tabdeal_feed)(fake)
    service = await make_service(redis, prefix, ["tab"], cadence={})
    key = f"{prefix}:tabdeal:perpetual:{BTC}:order_book"
    async with running(service), streaming(fake, service):
        first = await async_eventually(lambda: _from(redis, key, Source.WS), timeout_s=5)
        # Every level exactly as the venue sent it (as decimal strings equal in value).
        assert first.data == {
            "bids": [["96712.4", "0.015"], ["96712.3", "1.2"]],
            "asks": [["96712.5", "0.8"], ["96713", "2.45"]],
        }
        assert (first.venue, first.channel, first.symbol, first.venue_symbol) == ("tabdeal", "order_book", BTC, BTC)
        assert first.status == "HEALTHY" and first.exchange_time_ns is not None
        ttl_ms = await redis.pttl(key)
        assert 0 < ttl_ms <= 3 * INTERVAL_MS
        assert service.catalog.ttl_ms(service.catalog.feeds["tab"], "order_book") == 3 * INTERVAL_MS

        # Every push rewrites the key: the sequence moves and a changed book replaces the old one.
        fake.set_book(BTC, [("96700.1", "3")], [("96700.2", "0.000001")])
        second = await async_eventually(lambda: _from(redis, key, Source.WS, [["96700.1", "3"]]), timeout_s=5)
        assert second.data["asks"] == [["96700.2", "0.000001"]]
        assert second.instance_id == first.instance_id and second.publish_seq > first.publish_seq


async def test_rest_takes_over_a_silent_socket_and_hands_back_when_snapshots_return(
    redis: Redis, prefix: str, fake: FakeTabdeal
) -> None:
    await database_sync_to_async(tabdeal_feed)(fake)
    service = await make_service(redis, prefix, ["tab"], cadence={})
    key = f"{prefix}:tabdeal:perpetual:{BTC}:order_book"
    async with running(service), streaming(fake, service):
        await async_eventually(lambda: _from(redis, key, Source.WS), timeout_s=5)
        fake.go_silent()
        fake.set_book(BTC, [("96650", "1"), ("96649.5", "2"), ("96649", "3")], ASKS)

        on_rest = await async_eventually(lambda: _from(redis, key, Source.REST), timeout_s=5)
        assert (on_rest.status, on_rest.status_reason) == ("DEGRADED", "websocket value expired; polling REST")
        assert on_rest.data["bids"] == [["96650", "1"], ["96649.5", "2"], ["96649", "3"]]
        assert on_rest.data["sequence"] == 2  # the venue's lastUpdateId
        assert fake.stats.depth_requests >= 1

        fake.resume()
        back = await async_eventually(lambda: _from(redis, key, Source.WS), timeout_s=5)
        assert back.data["bids"] == [["96650", "1"], ["96649.5", "2"], ["96649", "3"]]
        assert service.fallback is not None
        await async_eventually(lambda: _handed_back(service), timeout_s=5)


async def test_a_dropped_and_refused_socket_is_served_by_rest_until_the_redial_succeeds(
    redis: Redis, prefix: str, fake: FakeTabdeal
) -> None:
    await database_sync_to_async(tabdeal_feed)(fake)
    service = await make_service(redis, prefix, ["tab"], cadence={})
    key = f"{prefix}:tabdeal:perpetual:{BTC}:order_book"
    async with running(service), streaming(fake, service):
        await async_eventually(lambda: _from(redis, key, Source.WS), timeout_s=5)
        fake.refuse_connections(True)
        assert fake.close_connections() == 1
        await async_eventually(lambda: _from(redis, key, Source.REST), timeout_s=5)
        assert fake.stats.refused >= 1  # the redials met HTTP 503 at the handshake

        fake.refuse_connections(False)
        await async_eventually(lambda: _from(redis, key, Source.WS), timeout_s=10)
        assert fake.stats.connections >= 2


async def test_the_hourly_close_notice_is_no_malformed_frame_and_a_failing_poll_publishes_nothing(
    redis: Redis, prefix: str, fake: FakeTabdeal
) -> None:
    await database_sync_to_async(tabdeal_feed)(fake)
    service = await make_service(redis, prefix, ["tab"], cadence={})
    key = f"{prefix}:tabdeal:perpetual:{BTC}:order_book"
    health_key = f"{prefix}:tabdeal:perpetual:{BTC}:health"
    async with running(service), streaming(fake, service):
        await async_eventually(lambda: _from(redis, key, Source.WS), timeout_s=5)
        fake.send_close_notice()
        await asyncio.sleep(0.2)
        assert (await _stored(redis, key)) is not None  # snapshots go on

        fake.rate_limit_rest(True)
        fake.go_silent()
        await async_eventually(lambda: _health_says(redis, health_key, "HTTP 429"), timeout_s=5)
        assert not await redis.exists(key)  # nothing to show rather than a made-up book


async def _handed_back(service: MarketDataService) -> bool:
    return service.fallback is not None and not service.fallback.active and service.fallback.handbacks >= 1


async def _health_says(redis: Redis, key: str, part: str) -> bool:
    envelope = await _stored(redis, key)
    return envelope is not None and envelope.status == "DEGRADED" and part in envelope.status_reason
