"""The hourly metadata job: instruments updated from the venue, the whole set republished."""

from __future__ import annotations

from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from redis.asyncio import Redis

from core.models import ComponentHealth
from feeds.distribution.redispub.envelope import Source, decode
from feeds.distribution.redispub.metadata import MetadataRefreshError
from feeds.models import Instrument
from tests.feeds.factories import make_feed
from tests.feeds.redispub.test_fallback_and_gate import EXCHANGE_INFO, binance_feed
from tests.feeds.venues.fake_http import FakeVenueHttp

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]


async def test_refresh_updates_instruments_and_republishes_every_cycle(
    redis: Redis,
    prefix: str,
    fake_http: FakeVenueHttp,
    settings,
) -> None:
    from feeds.tasks import instrument_metadata_refresh

    settings.MARKET_DATA_PREFIX = prefix
    settings.REDIS_NAMESPACE = ""  # the keys under test are the plain layout
    fake_http.serve("GET", "/fapi/v1/exchangeInfo", EXCHANGE_INFO)
    await database_sync_to_async(binance_feed)(fake_http)
    await database_sync_to_async(make_feed)("sim", ("ETHUSDT",))

    summary = await database_sync_to_async(instrument_metadata_refresh)()
    assert summary == "2 instruments refreshed, 2 published, 1 changed, 0 unlisted"
    row = await database_sync_to_async(Instrument.objects.get)(venue_symbol="BTCUSDT")
    assert row.tick_size == Decimal("0.1")
    venue_meta = decode(await redis.get(f"{prefix}:binance-usdm:perpetual:BTCUSDT:metadata"))
    assert (venue_meta.source, venue_meta.data["tick_size"]) == (Source.REST.value, "0.1")
    configured = decode(await redis.get(f"{prefix}:simulated:simulated:ETHUSDT:metadata"))
    assert (configured.source, configured.data["tick_size"]) == (Source.CONFIG.value, "0.01")
    # The key outlives a few missed hourly runs (TTL = 3600 s x 3), then goes stale.
    assert (
        3 * 3600 * 1000 - 60_000 < await redis.pttl(f"{prefix}:simulated:simulated:ETHUSDT:metadata") <= 3 * 3600 * 1000
    )

    # Nothing changed, and still the whole set goes out again, continuing the same sequence.
    summary = await database_sync_to_async(instrument_metadata_refresh)()
    assert summary == "2 instruments refreshed, 2 published, 0 changed, 0 unlisted"
    again = decode(await redis.get(f"{prefix}:binance-usdm:perpetual:BTCUSDT:metadata"))
    assert (again.instance_id, again.publish_seq) == (venue_meta.instance_id, venue_meta.publish_seq + 1)
    health = await database_sync_to_async(ComponentHealth.objects.get)(component="job:refresh-instrument-metadata")
    assert health.status == "HEALTHY"


async def test_a_venue_that_fails_is_reported_and_the_others_still_refresh(
    redis: Redis,
    prefix: str,
    fake_http: FakeVenueHttp,
    settings,
) -> None:
    from feeds.tasks import instrument_metadata_refresh

    settings.MARKET_DATA_PREFIX = prefix
    settings.REDIS_NAMESPACE = ""  # the keys under test are the plain layout
    fake_http.serve("GET", "/fapi/v1/exchangeInfo", b"down", status=503, content_type="text/plain")
    await database_sync_to_async(binance_feed)(fake_http)
    await database_sync_to_async(make_feed)("sim", ("ETHUSDT",))

    with pytest.raises(MetadataRefreshError, match="bin: RestError"):
        await database_sync_to_async(instrument_metadata_refresh)()
    assert await redis.exists(f"{prefix}:simulated:simulated:ETHUSDT:metadata")
    assert not await redis.exists(f"{prefix}:binance-usdm:perpetual:BTCUSDT:metadata")
    health = await database_sync_to_async(ComponentHealth.objects.get)(component="job:refresh-instrument-metadata")
    assert health.status == "DEGRADED"
