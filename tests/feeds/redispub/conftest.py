"""Fixtures for the Redis publisher tests: a unique key prefix per test, a real Redis, a fake venue."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from redis.asyncio import Redis

from core.health import HealthBoard
from feeds.distribution.redispub.catalog import CadencePolicy, Catalog, catalog_feeds
from feeds.distribution.redispub.service import MarketDataService, ServiceOptions
from tests.feeds.venues.fake_http import FakeVenueHttp, running_fake_http

# Short cadences keep the suite fast: trades keys live 3 x 0.1 s.
FAST_CADENCE = {"trades": 0.1, "mark_price": 0.1}
FAST_OPTIONS = ServiceOptions(
    heartbeat_s=0.05,
    sweep_s=0.05,
    min_poll_s=0.05,
    rest_per_minute=6000.0,
    rest_timeout_s=2.0,
    metadata_retry_s=0.05,
    metadata_ttl_ms=60_000,
)


@pytest.fixture
def prefix() -> str:
    # Unique per test so parallel runs (and the rest of the suite) never share a key.
    return f"t{uuid.uuid4().hex[:12]}"


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
async def fake_http() -> AsyncIterator[FakeVenueHttp]:
    async for fake in running_fake_http():
        yield fake


async def make_service(
    redis: Redis,
    prefix: str,
    feed_names: list[str],
    *,
    options: ServiceOptions = FAST_OPTIONS,
    cadence: dict[str, float] | None = None,
    board: HealthBoard | None = None,
) -> MarketDataService:
    feeds = await database_sync_to_async(catalog_feeds)(feed_names)
    catalog = Catalog(prefix, feeds, CadencePolicy(3.0, FAST_CADENCE if cadence is None else cadence))
    return MarketDataService(redis, catalog, board or HealthBoard(), instance_id=uuid.uuid4().hex[:12], options=options)


@contextlib.asynccontextmanager
async def running(service: MarketDataService, *, skip: Iterable[str] = ()) -> AsyncIterator[MarketDataService]:
    """Run the service's background work (all but the names containing any of `skip`)."""
    await service.prepare()
    tasks = [
        asyncio.create_task(work, name=name) if not any(part in name for part in skip) else _discard(work)
        for name, work in service.background()
    ]
    try:
        yield service
    finally:
        for task in tasks:
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in tasks if t is not None), return_exceptions=True)
        await service.aclose()


def _discard(work: object) -> None:
    work.close()  # type: ignore[attr-defined]
    return None
