"""The feed runtime as runfeed/runsite build it: streams, recorder and persisted checkpoints."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from core.health import Status
from core.runtime.core import Runtime
from feeds.models import KnownHole, StreamCheckpoint, Tick
from feeds.startup import FeedHubs, feed_startup_tasks
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import expected_trades, fast_runtime_streams
from tests.helpers import async_eventually

SYMBOLS = ("BTCUSDT", "ETHUSDT")


@pytest.fixture
def fast_streams(settings):  # type: ignore[no-untyped-def]
    return fast_runtime_streams(settings)


def _recorded() -> dict[str, list[tuple[str, int, int, int]]]:
    recorded: dict[str, list[tuple[str, int, int, int]]] = {}
    for symbol, trade_id, price, volume, ts in Tick.objects.order_by("pk").values_list(
        "instrument__venue_symbol", "trade_id", "price", "volume", "ts_event"
    ):
        recorded.setdefault(symbol, []).append((trade_id, price, volume, ts))
    return recorded


async def _run_until(runtime: Runtime, condition) -> None:  # type: ignore[no-untyped-def]
    task = asyncio.create_task(runtime.run())
    try:
        await async_eventually(condition, timeout_s=20, interval_s=0.02)
    finally:
        runtime.request_stop()
        assert await task == 0


@pytest.mark.django_db(transaction=True)
async def test_a_restarted_feed_process_recovers_the_trades_executed_while_it_was_down(fast_streams) -> None:  # type: ignore[no-untyped-def]
    async with FakeBinanceUsdm(make_tape(3000, SYMBOLS)) as venue:
        await database_sync_to_async(make_feed)(
            "bin", SYMBOLS, venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        count = database_sync_to_async(Tick.objects.count)

        first = Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))

        async def first_batch_recorded() -> bool:
            if venue.stats.subscribe_messages and not venue.executed:
                venue.release(1000)
            return await count() == 1000

        await _run_until(first, first_batch_recorded)
        assert first.context.health.get("feed:bin").status is Status.HEALTHY  # type: ignore[union-attr]
        checkpoints = await database_sync_to_async(
            lambda: set(StreamCheckpoint.objects.values_list("venue_symbol", flat=True))
        )()
        assert checkpoints == set(SYMBOLS)

        venue.release(1500)  # while no process runs
        second = Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))

        async def everything_recorded() -> bool:
            if venue.stats.subscribe_messages >= 2 and len(venue.executed) == 2500:
                venue.release(500)
            return await count() == 3000

        await _run_until(second, everything_recorded)

    assert await database_sync_to_async(_recorded)() == expected_trades(venue)
    assert await database_sync_to_async(KnownHole.objects.count)() == 0


@pytest.mark.django_db(transaction=True)
async def test_a_gap_older_than_the_venue_retention_is_recorded_as_a_known_hole_and_degraded(fast_streams) -> None:  # type: ignore[no-untyped-def]
    async with FakeBinanceUsdm(make_tape(300, SYMBOLS), retention_s=3600) as venue:
        await database_sync_to_async(make_feed)(
            "bin", ("BTCUSDT",), venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        # A checkpoint from two days ago: Binance only keeps 24 h of aggTrades.
        two_days_ago_ns = (venue._clock_ms() - 48 * 3600 * 1000) * 1_000_000

        def old_checkpoint() -> None:
            StreamCheckpoint.objects.create(
                feed_id=Tick._meta.get_field("instrument").related_model.objects.get().feed_id,  # type: ignore[union-attr]
                venue_symbol="BTCUSDT",
                trade_id="4000",
                ts_event=two_days_ago_ns,
                price=1,
                volume=1,
            )

        await database_sync_to_async(old_checkpoint)()
        runtime = Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))
        holes = database_sync_to_async(
            lambda: list(KnownHole.objects.values_list("venue_symbol", "start_ns", "end_ns"))
        )

        async def hole_recorded_and_streaming() -> bool:
            if venue.stats.subscribe_messages and not venue.executed:
                venue.release(300)
            health = runtime.context.health.get("feed:bin")
            return (
                bool(await holes())
                and await database_sync_to_async(Tick.objects.count)() > 0
                and (health is not None and health.status is Status.DEGRADED and "known hole" in health.reason)
            )

        await _run_until(runtime, hole_recorded_and_streaming)
    [(symbol, start_ns, end_ns)] = await holes()
    assert symbol == "BTCUSDT" and start_ns == two_days_ago_ns // 1_000_000 * 1_000_000
    assert 0 < end_ns - start_ns < 48 * 3600 * 10**9
