"""The metadata gate on the feed path: no dial, no subscription and no trade before metadata.

Runs the feed runtime as runfeed/runsite build it (the real stream composition, the
recorder, the database) against the local fake Binance USD-M venue, whose REST port
serves exchangeInfo.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone
from prometheus_client import REGISTRY

from core.health import Health, Status
from core.runtime.core import Runtime
from feeds.distribution.redispub.metadata import MetadataRefreshError, instrument_metadata_refresh
from feeds.market import parse_fixed
from feeds.models import Feed, Instrument, Tick
from feeds.startup import FeedHubs, feed_startup_tasks
from orders.plans import TradePlan, plans_for_signal
from processor.signals import SignalKind
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import fast_runtime_streams
from tests.helpers import async_eventually
from tests.orders.factories import make_instrument, make_setup, make_signal

pytestmark = pytest.mark.django_db(transaction=True)

SYMBOLS = ("BTCUSDT", "ETHUSDT")


@pytest.fixture
def fast_gate(settings):  # type: ignore[no-untyped-def]
    fast_runtime_streams(settings)
    settings.FEED_REST_TIMEOUT_S = 2
    settings.MARKET_DATA_METADATA_RETRY_S = 0.05
    settings.REDIS_URL = ""  # the refresh job's Redis publishing is tested with the publisher
    return settings


def _binance_feed(venue: FakeBinanceUsdm, symbols: tuple[str, ...] = SYMBOLS) -> None:
    make_feed("bin", symbols, venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url})


@asynccontextmanager
async def running(runtime: Runtime) -> AsyncIterator[Runtime]:
    task = asyncio.create_task(runtime.run())
    try:
        await async_eventually(lambda: _started(runtime), timeout_s=20, interval_s=0.02)
        yield runtime
    finally:
        runtime.request_stop()
        assert await task == 0


async def _started(runtime: Runtime) -> bool:
    return runtime.started


def _gate_health(runtime: Runtime) -> Health:
    health = runtime.context.health.get("metadata-gate:bin")
    assert health is not None
    return health


def _gated_gauge() -> float | None:
    return REGISTRY.get_sample_value("feed_metadata_gated_instruments", {"feed": "bin"})


def _ticks_of(symbol: str) -> int:
    return Tick.objects.filter(instrument__venue_symbol=symbol).count()


def _plans(symbol: str) -> list[TradePlan]:
    strategy = _trading_strategy()
    return plans_for_signal(make_signal(strategy, SignalKind.ENTRY_LONG, symbol=symbol, feed="bin"))


def _trading_strategy():  # type: ignore[no-untyped-def]
    """One account trading the strategy on both instruments of feed `bin` (made once)."""
    from processor.models import Strategy

    strategy = Strategy.objects.filter(name="gate-ema").first()
    if strategy is None:
        setup = make_setup(instrument=make_instrument("bin", "ETHUSDT", venue="binance-usdm"))
        setup.strategy.name = "gate-ema"
        setup.strategy.save(update_fields=["name"])
        strategy = setup.strategy
    return strategy


async def test_an_instrument_the_venue_does_not_list_is_not_subscribed_and_the_rest_of_the_feed_streams(
    fast_gate,
) -> None:  # type: ignore[no-untyped-def]
    async with FakeBinanceUsdm(make_tape(400, SYMBOLS)) as venue:
        venue.listed = {"BTCUSDT"}
        await database_sync_to_async(_binance_feed)(venue)
        async with running(Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))) as runtime:
            await async_eventually(lambda: _any(venue.stats.subscribe_messages or venue.open_connections))
            venue.release(400)
            await async_eventually(lambda: _count_above(_ticks_of, "BTCUSDT", 0), timeout_s=10)

            assert venue.subscribed_streams() == {"btcusdt@aggTrade"}
            gate = _gate_health(runtime)
            assert gate.status is Status.DEGRADED
            assert "ETHUSDT: not listed by binance-usdm" in gate.reason and "BTCUSDT" not in gate.reason
            assert _gated_gauge() == 1
            assert await database_sync_to_async(_ticks_of)("ETHUSDT") == 0

    btc = await database_sync_to_async(Instrument.objects.get)(venue_symbol="BTCUSDT")
    assert btc.tick_size == Decimal("0.1") and btc.metadata_refreshed_at is not None  # the venue's tick, stored


async def test_with_the_metadata_endpoint_down_no_socket_is_dialled_until_the_metadata_arrives(fast_gate) -> None:  # type: ignore[no-untyped-def]
    async with FakeBinanceUsdm(make_tape(400, SYMBOLS)) as venue:
        venue.metadata_down()
        await database_sync_to_async(_binance_feed)(venue)
        async with running(Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))) as runtime:
            # The watcher has asked the venue again a few times, and still nothing is dialled.
            requests = venue.stats.exchange_info_requests
            await async_eventually(lambda: _any(venue.stats.exchange_info_requests >= requests + 3))
            assert venue.stats.connections == 0
            gate = _gate_health(runtime)
            assert gate.status is Status.BLOCKED
            assert "BTCUSDT: fetch failed" in gate.reason and "ETHUSDT: fetch failed" in gate.reason
            assert "503" in gate.reason
            feed = runtime.context.health.get("feed:bin")
            assert feed is not None and feed.status is Status.BLOCKED
            assert _gated_gauge() == 2
            [plan] = await database_sync_to_async(_plans)("ETHUSDT")
            assert plan.metadata_missing is not None and "fetch failed" in plan.metadata_missing

            venue.metadata_down(False)
            await async_eventually(lambda: _any(venue.subscribed_streams() == {"btcusdt@aggTrade", "ethusdt@aggTrade"}))
            venue.release(400)
            await async_eventually(lambda: _count_above(_ticks_of, "ETHUSDT", 0), timeout_s=10)
            await async_eventually(lambda: _any(_gate_health(runtime).status is Status.HEALTHY))
            assert _gated_gauge() == 0
            [plan] = await database_sync_to_async(_plans)("ETHUSDT")
            assert plan.metadata_missing is None


async def test_metadata_the_hourly_refresh_stores_from_another_process_subscribes_the_instrument_and_plans_trade_it(
    fast_gate,
) -> None:  # type: ignore[no-untyped-def]
    async with (
        FakeBinanceUsdm(make_tape(400, SYMBOLS)) as venue,
        FakeBinanceUsdm(make_tape(1, SYMBOLS)) as rest_elsewhere,
    ):
        venue.listed, rest_elsewhere.listed = {"BTCUSDT"}, set(SYMBOLS)
        await database_sync_to_async(_binance_feed)(venue)
        async with running(Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))) as runtime:
            await async_eventually(lambda: _any(venue.subscribed_streams() == {"btcusdt@aggTrade"}))
            [plan] = await database_sync_to_async(_plans)("ETHUSDT")
            assert plan.metadata_missing == "ETHUSDT metadata not known: not listed by binance-usdm"

            # From now on this process cannot reach the listing; the refresh job, run where
            # the venue answers (a Celery worker), stores it and this process follows the rows.
            venue.metadata_down()

            def point_the_job_elsewhere() -> None:
                feed = Feed.objects.get(name="bin")
                feed.settings = {**feed.settings, "rest_url": rest_elsewhere.rest_url}
                feed.save(update_fields=["settings"])

            await database_sync_to_async(point_the_job_elsewhere)()
            summary = await database_sync_to_async(instrument_metadata_refresh)()
            assert summary.startswith("2 instruments refreshed")

            await async_eventually(lambda: _any(venue.subscribed_streams() == {"btcusdt@aggTrade", "ethusdt@aggTrade"}))
            venue.release(400)
            await async_eventually(lambda: _count_above(_ticks_of, "ETHUSDT", 0), timeout_s=10)
            assert _gate_health(runtime).status is Status.HEALTHY
            [plan] = await database_sync_to_async(_plans)("ETHUSDT")
            assert plan.metadata_missing is None and plan.lot_size == parse_fixed("0.001")


async def test_the_hourly_refresh_holds_an_instrument_the_venue_stops_listing(fast_gate) -> None:  # type: ignore[no-untyped-def]
    async with FakeBinanceUsdm(make_tape(10, SYMBOLS)) as venue:
        await database_sync_to_async(_binance_feed)(venue)
        async with running(Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))) as runtime:
            await async_eventually(lambda: _any(_gate_health(runtime).status is Status.HEALTHY))
            [plan] = await database_sync_to_async(_plans)("ETHUSDT")
            assert plan.metadata_missing is None

            venue.listed = {"BTCUSDT"}
            await database_sync_to_async(instrument_metadata_refresh)()

            gate = await async_eventually(lambda: _health_with(runtime, Status.DEGRADED))
            assert "ETHUSDT: not listed by binance-usdm" in gate.reason
            [plan] = await database_sync_to_async(_plans)("ETHUSDT")
            assert plan.metadata_missing == "ETHUSDT metadata not known: not listed by binance-usdm"
            [btc_plan] = await database_sync_to_async(_plans)("BTCUSDT")
            assert btc_plan.metadata_missing is None


async def test_stored_metadata_still_fresh_lets_the_feed_start_while_the_venue_listing_is_down(fast_gate) -> None:  # type: ignore[no-untyped-def]
    async with FakeBinanceUsdm(make_tape(10, SYMBOLS)) as venue:
        venue.metadata_down()
        await database_sync_to_async(_binance_feed)(venue)

        def confirmed(btc_age_s: float, eth_age_s: float) -> None:
            now = timezone.now()
            Instrument.objects.filter(venue_symbol="BTCUSDT").update(
                metadata_refreshed_at=now - timedelta(seconds=btc_age_s)
            )
            Instrument.objects.filter(venue_symbol="ETHUSDT").update(
                metadata_refreshed_at=now - timedelta(seconds=eth_age_s)
            )

        # BTCUSDT was confirmed a minute ago; ETHUSDT long before the metadata's lifetime.
        await database_sync_to_async(confirmed)(60, 5 * 3600 * 3)
        async with running(Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))) as runtime:
            await async_eventually(lambda: _any(venue.subscribed_streams() == {"btcusdt@aggTrade"}))
            gate = _gate_health(runtime)
            assert gate.status is Status.DEGRADED
            assert "ETHUSDT: last confirmed by the venue" in gate.reason and "fetch failed" in gate.reason
            assert "BTCUSDT" not in gate.reason
            with pytest.raises(MetadataRefreshError):
                await database_sync_to_async(instrument_metadata_refresh)()
            [plan] = await database_sync_to_async(_plans)("BTCUSDT")
            assert plan.metadata_missing is None


async def test_a_simulated_feed_has_its_metadata_locally_and_trades_at_once(fast_gate) -> None:  # type: ignore[no-untyped-def]
    await database_sync_to_async(make_feed)("bin", SYMBOLS, venue="simulated")
    async with running(Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))) as runtime:
        gate = _gate_health(runtime)
        assert gate.status is Status.HEALTHY and gate.reason == "metadata known for 2 instrument(s)"
        await async_eventually(lambda: _count_above(_ticks_of, "ETHUSDT", 0), timeout_s=10)

    def plan_for_simulated() -> list[TradePlan]:
        setup = make_setup(instrument=Instrument.objects.get(venue_symbol="ETHUSDT"))
        return plans_for_signal(make_signal(setup.strategy, SignalKind.ENTRY_LONG, symbol="ETHUSDT", feed="bin"))

    [plan] = await database_sync_to_async(plan_for_simulated)()
    assert plan.metadata_missing is None


# --- helpers ----------------------------------------------------------------------------


async def _any(value: object) -> bool:
    return bool(value)


async def _count_above(count, symbol: str, floor: int) -> bool:  # type: ignore[no-untyped-def]
    return await database_sync_to_async(count)(symbol) > floor


async def _health_with(runtime: Runtime, status: Status) -> Health | None:
    health = _gate_health(runtime)
    return health if health.status is status else None


async def test_the_running_site_shows_the_held_instruments_on_internal_health(fast_gate) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model
    from django.test import Client

    from tradingsite.runtime.compose import build_runtime

    fast_gate.HEALTH_REPORT_INTERVAL_S = 0.05

    def internal_health() -> dict[str, dict[str, str]]:
        client = Client()
        client.force_login(get_user_model().objects.get_or_create(username="ops", is_staff=True)[0])
        body = client.get("/internal/health").json()
        return {c["component"]: c for c in body["components"]}

    async with FakeBinanceUsdm(make_tape(10, SYMBOLS)) as venue:
        venue.listed = {"BTCUSDT"}
        await database_sync_to_async(_binance_feed)(venue)
        async with running(build_runtime(role="gate-test", feed_names=["bin"], periodic_jobs=False)):

            async def gate_reported() -> dict[str, str] | None:
                return (await database_sync_to_async(internal_health)()).get("metadata-gate:bin")

            reported = await async_eventually(gate_reported, timeout_s=10)
            assert reported["status"] == "DEGRADED"
            assert reported["reason"] == "held for metadata (1): ETHUSDT: not listed by binance-usdm"


async def test_a_database_error_during_a_later_check_keeps_the_last_state_and_says_so(fast_gate, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from django.db import OperationalError

    from core.health import HealthBoard
    from feeds.distribution import metadata_gate
    from feeds.selectors import feed_specs_for_run

    async with FakeBinanceUsdm(make_tape(10, SYMBOLS)) as venue:
        venue.listed = {"BTCUSDT"}
        await database_sync_to_async(_binance_feed)(venue)
        [spec] = await database_sync_to_async(feed_specs_for_run)(["bin"])
        board = HealthBoard()
        gate = metadata_gate.InstrumentMetadataGate(board)
        await gate.check(spec, fetch=True)

        def database_down(*args: object, **kwargs: object) -> dict[str, str]:
            raise OperationalError("connection refused")

        monkeypatch.setattr(metadata_gate, "instruments_missing_metadata", database_down)
        venue.listed = set(SYMBOLS)
        change = await gate.check(spec, fetch=True)

    assert change == metadata_gate.GateChange()
    assert gate.allows("bin", "BTCUSDT") and not gate.allows("bin", "ETHUSDT")
    health = board.get("metadata-gate:bin")
    assert health is not None and health.status is Status.DEGRADED
    assert health.reason.startswith("metadata check failed (OperationalError('connection refused'))")
    assert "ETHUSDT: not listed by binance-usdm" in health.reason


async def test_a_failing_follower_does_not_stop_the_gate_or_the_other_followers(fast_gate) -> None:  # type: ignore[no-untyped-def]
    from core.health import HealthBoard
    from feeds.distribution import metadata_gate
    from feeds.selectors import feed_specs_for_run

    await database_sync_to_async(make_feed)("bin", SYMBOLS, venue="simulated")
    [spec] = await database_sync_to_async(feed_specs_for_run)(["bin"])
    gate = metadata_gate.InstrumentMetadataGate(HealthBoard())
    told: list[tuple[str, metadata_gate.GateChange]] = []

    async def broken(feed: str, change: metadata_gate.GateChange, held: object) -> None:
        raise RuntimeError("follower bug")

    async def recording(feed: str, change: metadata_gate.GateChange, held: object) -> None:
        told.append((feed, change))

    gate.add_listener(broken)
    gate.add_listener(recording)
    change = await gate.check(spec, fetch=True)
    assert change.admitted == SYMBOLS and told == [("bin", change)]


async def test_failed_fetches_ask_the_venue_again_after_doubling_waits(fast_gate) -> None:  # type: ignore[no-untyped-def]
    from core.health import HealthBoard
    from feeds.distribution import metadata_gate
    from feeds.selectors import feed_specs_for_run

    now = [1000.0]
    async with FakeBinanceUsdm(make_tape(10, SYMBOLS)) as venue:
        venue.metadata_down()
        await database_sync_to_async(_binance_feed)(venue)
        [spec] = await database_sync_to_async(feed_specs_for_run)(["bin"])
        gate = metadata_gate.InstrumentMetadataGate(HealthBoard(), retry_s=5, max_retry_s=12, monotonic=lambda: now[0])
        asked = []
        for at in (0, 1, 5, 9, 15, 20, 27, 39, 40):
            now[0] = 1000.0 + at
            await gate.check(spec, fetch=True)
            asked.append(venue.stats.exchange_info_requests)
        # Asked at 0, 5 s later (5), 10 s after that (15), then every 12 s, the cap (27, 39).
        assert asked == [1, 1, 2, 2, 3, 3, 4, 5, 5]

        venue.metadata_down(False)
        now[0] = 1000.0 + 51
        change = await gate.check(spec, fetch=True)
        assert change.admitted == SYMBOLS
        now[0] += 0.1  # a success resets the wait: the next check may ask at once
        await gate.check(spec, fetch=True)
        assert venue.stats.exchange_info_requests == 7
