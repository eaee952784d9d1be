"""REST fallback and the metadata gate, against a real Redis and a local fake of the venue's REST API."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from redis.asyncio import Redis

from feeds.distribution.redispub.envelope import Source, decode
from feeds.market import FeedData
from feeds.models import Instrument
from tests.feeds.factories import make_feed, trade
from tests.feeds.redispub.conftest import make_service, running
from tests.feeds.venues.fake_http import FakeVenueHttp
from tests.helpers import async_eventually

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "binance-usdm"
EXCHANGE_INFO = (FIXTURES / "rest_exchangeInfo.json").read_bytes()
AGG_TRADES = (FIXTURES / "rest_aggTrades.json").read_bytes()


def binance_feed(fake: FakeVenueHttp, symbols: tuple[str, ...] = ("BTCUSDT",)) -> None:
    make_feed("bin", symbols, venue="binance-usdm", settings={"rest_url": fake.base_url})


def serve_venue(fake: FakeVenueHttp) -> None:
    fake.serve("GET", "/fapi/v1/exchangeInfo", EXCHANGE_INFO)
    fake.serve("GET", "/fapi/v1/aggTrades", AGG_TRADES)


def rest_polls(fake: FakeVenueHttp) -> int:
    return sum(1 for request in fake.requests if request.path == "/fapi/v1/aggTrades")


@pytest.mark.parametrize("trigger", ["expiries", "sweep"])
async def test_rest_takes_over_an_expired_key_and_hands_back_to_the_websocket(
    redis: Redis,
    prefix: str,
    fake_http: FakeVenueHttp,
    trigger: str,
) -> None:
    serve_venue(fake_http)
    await database_sync_to_async(binance_feed)(fake_http)
    service = await make_service(redis, prefix, ["bin"])
    key = f"{prefix}:binance-usdm:perpetual:BTCUSDT:trades"
    health_key = f"{prefix}:binance-usdm:perpetual:BTCUSDT:health"
    other = "sweep" if trigger == "expiries" else "expiries"
    async with running(service, skip=[other]):  # only one trigger runs: each must work alone
        await async_eventually(lambda: _allows(service, "BTCUSDT"))
        await service.bridge.consume(FeedData("bin", (trade(1),)))
        assert decode(await redis.get(key)).source == Source.WS.value

        # The websocket goes quiet: the key expires and REST fills it, labelled as such.
        on_rest = await async_eventually(lambda: _with_source(redis, key, Source.REST), timeout_s=5)
        assert (on_rest.status, on_rest.channel) == ("DEGRADED", "trades")
        assert on_rest.data == {"price": "96713", "quantity": "3.1", "side": "buy", "trade_id": "2435013401"}
        assert on_rest.exchange_time_ns == 1_732_924_800_501_000_000
        poll = next(r for r in fake_http.requests if r.path == "/fapi/v1/aggTrades")
        assert dict(poll.query) == {"symbol": "BTCUSDT", "limit": "1"}
        health = await async_eventually(lambda: _with_status(redis, health_key, "DEGRADED"), timeout_s=5)
        assert health.data["channels"]["trades"]["source"] == "REST"

        # The websocket comes back: its value wins and the poller stops.
        polls_before = None
        for number in range(2, 12):
            await service.bridge.consume(FeedData("bin", (trade(number),)))
            polls_before = rest_polls(fake_http) if polls_before is None else polls_before
            stored = decode(await redis.get(key))
            assert (stored.source, stored.data["trade_id"]) == (Source.WS.value, str(number))
            await asyncio.sleep(0.02)
        assert service.fallback is not None and not service.fallback.active
        assert service.fallback.handbacks == 1
        assert rest_polls(fake_http) == polls_before
        await async_eventually(lambda: _with_status(redis, health_key, "HEALTHY"), timeout_s=5)


async def test_a_failing_rest_poll_keeps_trying_and_health_says_why(
    redis: Redis,
    prefix: str,
    fake_http: FakeVenueHttp,
) -> None:
    serve_venue(fake_http)
    fake_http.serve("GET", "/fapi/v1/aggTrades", b'{"code":-1003,"msg":"Too many requests"}', status=429)
    await database_sync_to_async(binance_feed)(fake_http)
    service = await make_service(redis, prefix, ["bin"])
    key = f"{prefix}:binance-usdm:perpetual:BTCUSDT:trades"
    async with running(service):
        await async_eventually(lambda: _allows(service, "BTCUSDT"))
        await service.bridge.consume(FeedData("bin", (trade(1),)))
        await async_eventually(lambda: _polled_at_least(fake_http, 2), timeout_s=5)
        assert not await redis.exists(key)  # nothing to show rather than a made-up value
        await async_eventually(
            lambda: _with_status(redis, f"{prefix}:binance-usdm:perpetual:BTCUSDT:health", "DEGRADED", "HTTP 429"),
            timeout_s=5,
        )


async def test_metadata_gate_holds_back_market_data_until_metadata_lands(
    redis: Redis,
    prefix: str,
    fake_http: FakeVenueHttp,
) -> None:
    fake_http.serve("GET", "/fapi/v1/exchangeInfo", b"maintenance", status=503, content_type="text/plain")
    await database_sync_to_async(binance_feed)(fake_http)
    service = await make_service(redis, prefix, ["bin"])
    key = f"{prefix}:binance-usdm:perpetual:BTCUSDT:trades"
    metadata_key = f"{prefix}:binance-usdm:perpetual:BTCUSDT:metadata"
    health_key = f"{prefix}:binance-usdm:perpetual:BTCUSDT:health"
    async with running(service):
        # The first heartbeat may predate the first fetch; the one after it names the failure.
        health = await async_eventually(lambda: _with_status(redis, health_key, "BLOCKED", "HTTP 503"), timeout_s=5)
        assert health.status_reason.startswith("metadata unavailable")
        await async_eventually(lambda: _fetched_at_least(fake_http, 2), timeout_s=5)  # it keeps retrying
        await service.bridge.consume(FeedData("bin", (trade(1), trade(2))))
        assert not await redis.exists(key) and not await redis.exists(metadata_key)
        assert service.gate.held_back["bin"] == 2

        fake_http.serve("GET", "/fapi/v1/exchangeInfo", EXCHANGE_INFO)
        await async_eventually(lambda: _allows(service, "BTCUSDT"), timeout_s=5)
        metadata = decode(await redis.get(metadata_key))
        assert metadata.source == Source.REST.value
        assert metadata.data == {
            "tick_size": "0.1",
            "lot_size": "0.001",
            "contract_multiplier": "1",
            "min_quantity": "0.001",
            "venue_status": "trading",
        }
        # The venue's tick size replaced the configured one (0.01) on the instrument row.
        row = await database_sync_to_async(Instrument.objects.get)(venue_symbol="BTCUSDT")
        assert row.tick_size == Decimal("0.1")

        await service.bridge.consume(FeedData("bin", (trade(3),)))
        assert decode(await redis.get(key)).data["trade_id"] == "3"
        await async_eventually(lambda: _with_status(redis, health_key, "HEALTHY"), timeout_s=5)


async def test_an_instrument_the_venue_does_not_list_stays_gated(
    redis: Redis,
    prefix: str,
    fake_http: FakeVenueHttp,
) -> None:
    serve_venue(fake_http)
    await database_sync_to_async(binance_feed)(fake_http, ("BTCUSDT", "NOSUCHUSDT"))
    service = await make_service(redis, prefix, ["bin"])
    async with running(service):
        await async_eventually(lambda: _allows(service, "BTCUSDT"))
        assert not service.gate.allows("bin", "NOSUCHUSDT")
        await service.bridge.consume(FeedData("bin", (trade(1, symbol="NOSUCHUSDT"),)))
        assert not await redis.exists(f"{prefix}:binance-usdm:perpetual:NOSUCHUSDT:trades")
        await async_eventually(
            lambda: _with_status(
                redis, f"{prefix}:binance-usdm:perpetual:NOSUCHUSDT:health", "BLOCKED", "not listed by binance-usdm"
            ),
            timeout_s=5,
        )


async def _allows(service, venue_symbol: str) -> bool:  # type: ignore[no-untyped-def]
    return service.gate.allows("bin", venue_symbol)


async def _with_source(redis: Redis, key: str, source: Source):  # type: ignore[no-untyped-def]
    body = await redis.get(key)
    envelope = decode(body) if body is not None else None
    return envelope if envelope is not None and envelope.source == source.value else None


async def _with_status(redis: Redis, key: str, status: str, reason_part: str = ""):  # type: ignore[no-untyped-def]
    body = await redis.get(key)
    envelope = decode(body) if body is not None else None
    if envelope is None or envelope.status != status or reason_part not in envelope.status_reason:
        return None
    return envelope


async def _polled_at_least(fake: FakeVenueHttp, count: int) -> bool:
    return rest_polls(fake) >= count


async def _fetched_at_least(fake: FakeVenueHttp, count: int) -> bool:
    return sum(1 for r in fake.requests if r.path == "/fapi/v1/exchangeInfo") >= count


async def test_an_empty_rest_budget_skips_polls_rather_than_queueing_them(
    redis: Redis,
    prefix: str,
    fake_http: FakeVenueHttp,
) -> None:
    import dataclasses

    from tests.feeds.redispub.conftest import FAST_OPTIONS

    serve_venue(fake_http)
    await database_sync_to_async(binance_feed)(fake_http)
    # One REST call per minute for the venue: the first poll spends it.
    service = await make_service(redis, prefix, ["bin"], options=dataclasses.replace(FAST_OPTIONS, rest_per_minute=1))
    key = f"{prefix}:binance-usdm:perpetual:BTCUSDT:trades"
    async with running(service):
        await async_eventually(lambda: _allows(service, "BTCUSDT"))
        await service.bridge.consume(FeedData("bin", (trade(1),)))
        await async_eventually(lambda: _with_source(redis, key, Source.REST), timeout_s=5)
        # The REST value expires in turn; the bucket is empty, so the key stays absent (fail closed).
        await async_eventually(
            lambda: _with_status(redis, f"{prefix}:binance-usdm:perpetual:BTCUSDT:health", "DEGRADED", "rate limited"),
            timeout_s=5,
        )
        await async_eventually(lambda: _gone(redis, key), timeout_s=5)
        assert rest_polls(fake_http) == 1
        budget = await async_eventually(
            lambda: _with_status(redis, f"{prefix}:binance-usdm:venue:ratelimit", "DEGRADED", "REST budget exhausted"),
            timeout_s=5,
        )
        assert budget.data["rest_per_minute"] == "1" and budget.data["rest_calls"] == 1
        assert budget.data["skipped_polls"] >= 1 and budget.data["keys_on_rest"] == 1


async def _gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)
