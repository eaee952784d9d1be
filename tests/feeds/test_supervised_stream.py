"""Supervised streams against the fake Binance USD-M venue: no gap, no duplicate, through faults."""

from __future__ import annotations

import asyncio

from core.health import HealthBoard, Status
from feeds.streams.breaker import BreakerState
from feeds.streams.feed_streams import FeedStreamSettings, build_feed_streams
from feeds.venues import get_venue
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.feeds.stream_harness import (
    FAST_POLICY,
    Collector,
    delivered_trades,
    expected_trades,
    feed_spec,
    start_streams,
    stop,
    with_policy,
)
from tests.helpers import async_eventually

SYMBOLS = ("BTCUSDT", "ETHUSDT")


async def _until(condition, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return bool(condition())

    await async_eventually(check, timeout_s=timeout_s, interval_s=0.01)


async def _all_delivered(venue: FakeBinanceUsdm, collector, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    await _until(lambda: venue.finished and len(collector.trades) >= len(venue.executed), timeout_s)
    await asyncio.sleep(0.05)  # anything extra (a duplicate) would arrive now
    assert delivered_trades(collector.trades) == expected_trades(venue)


async def test_live_trades_arrive_exactly_once_in_order() -> None:
    async with FakeBinanceUsdm(make_tape(2000, SYMBOLS)) as venue:
        streams, tasks, collector, health = await start_streams(venue, SYMBOLS)
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.play(20_000)
            await _all_delivered(venue, collector)
            assert health.get("feed:bin").status is Status.HEALTHY  # type: ignore[union-attr]
        finally:
            await stop(tasks)


async def test_trades_missed_while_disconnected_are_recovered_over_rest_before_live_resumes() -> None:
    async with FakeBinanceUsdm(make_tape(3000, SYMBOLS)) as venue:
        streams, tasks, collector, _ = await start_streams(venue, SYMBOLS)
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(500)
            await _until(lambda: len(collector.trades) == 500)
            venue.refuse_connections(True)
            venue.close_connections()
            venue.release(1000)  # executed while nobody listens
            await _until(lambda: venue.stats.refused >= 2)
            venue.refuse_connections(False)
            venue.release(1500)
            await _all_delivered(venue, collector)
            assert streams[0].stats.recovered >= 1000
        finally:
            await stop(tasks)


async def test_silent_connection_is_redialled_by_the_heartbeat_and_the_gap_filled() -> None:
    async with FakeBinanceUsdm(make_tape(1500, SYMBOLS)) as venue:
        streams, tasks, collector, _ = await start_streams(venue, SYMBOLS)
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(500)
            await _until(lambda: len(collector.trades) == 500)
            venue.go_silent()
            venue.release(500)
            await _until(lambda: venue.stats.subscribe_messages == 2)  # heartbeat redial
            venue.release(500)
            await _all_delivered(venue, collector)
        finally:
            await stop(tasks)


async def test_half_open_connection_without_pongs_is_detected_and_redialled() -> None:
    # No heartbeat help: only the websocket keepalive (ping, no pong) can notice.
    async with FakeBinanceUsdm(make_tape(1000, SYMBOLS)) as venue:
        streams, tasks, collector, _ = await start_streams(venue, SYMBOLS, policy=with_policy(heartbeat_timeout_s=3600))
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(400)
            await _until(lambda: len(collector.trades) == 400)
            venue.go_half_open()
            venue.release(300)
            await _until(lambda: venue.stats.subscribe_messages == 2)
            venue.release(300)
            await _all_delivered(venue, collector)
        finally:
            await stop(tasks)


async def test_garbage_frames_are_counted_and_skipped() -> None:
    async with FakeBinanceUsdm(make_tape(600, SYMBOLS)) as venue:
        streams, tasks, collector, _ = await start_streams(venue, SYMBOLS)
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(300)
            venue.send_garbage()
            venue.release(300)
            await _all_delivered(venue, collector)
            assert sum(streams[0].stats.malformed.values()) == 1
        finally:
            await stop(tasks)


async def test_breaker_opens_after_refusals_reports_blocked_and_recovers_when_the_venue_returns() -> None:
    async with FakeBinanceUsdm(make_tape(1000, SYMBOLS)) as venue:
        venue.refuse_connections(True)
        policy = with_policy(breaker_threshold=4, breaker_cooldown_s=0.3)
        streams, tasks, collector, health = await start_streams(venue, SYMBOLS, policy=policy)
        try:
            await _until(lambda: streams[0].breaker.state is BreakerState.OPEN)
            feed_health = health.get("feed:bin")
            assert feed_health is not None and feed_health.status is Status.BLOCKED
            assert "circuit open after 4 consecutive failures" in health.get("feed:bin/ws0").reason  # type: ignore[union-attr]
            refused = venue.stats.refused
            await asyncio.sleep(0.1)
            assert venue.stats.refused == refused  # open: nobody knocks
            venue.refuse_connections(False)
            await _until(lambda: health.get("feed:bin").status is Status.HEALTHY)  # type: ignore[union-attr]
            venue.play(10_000)
            await _all_delivered(venue, collector)
        finally:
            await stop(tasks)


async def test_proactive_redial_at_max_age_loses_and_duplicates_nothing() -> None:
    async with FakeBinanceUsdm(make_tape(6000, SYMBOLS)) as venue:
        streams, tasks, collector, _ = await start_streams(venue, SYMBOLS, policy=with_policy(max_connection_age_s=0.2))
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.play(6000)
            await _all_delivered(venue, collector)
            assert streams[0].stats.handovers >= 3
        finally:
            await stop(tasks)


async def test_backoff_delays_of_streams_are_not_in_lockstep() -> None:
    async with FakeBinanceUsdm(make_tape(10, SYMBOLS)) as venue:
        venue.refuse_connections(True)
        delays: list[list[float]] = []
        runs = []
        for seed in range(3):
            streams, tasks, _, _ = await start_streams(venue, SYMBOLS, seed=seed)
            runs.append((streams, tasks))
        try:
            await _until(lambda: venue.stats.refused >= 12)
        finally:
            for _, tasks in runs:
                await stop(tasks)
        for streams, _ in runs:
            backoff = streams[0]._backoff
            delays.append([backoff.next_delay() for _ in range(4)])
        assert len({tuple(round(d, 9) for d in row) for row in delays}) == 3


async def test_a_venue_unreachable_at_start_gets_one_stream_that_keeps_asking_for_its_endpoint() -> None:
    adapter = get_venue("binance-usdm")
    calls = []

    class FlakyEndpoints:
        """The real adapter, except that its endpoint plan fails until told otherwise."""

        def __init__(self) -> None:
            self.up = False

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(adapter, name)

        async def endpoints(self, symbols, channels, settings):  # type: ignore[no-untyped-def]
            calls.append(self.up)
            if not self.up:
                raise ConnectionRefusedError("bootstrap REST down")
            return await adapter.endpoints(symbols, channels, settings)

    flaky = FlakyEndpoints()
    async with FakeBinanceUsdm(make_tape(200, SYMBOLS)) as venue:
        collector = Collector()
        streams = await build_feed_streams(
            feed_spec(venue, SYMBOLS),
            flaky,
            publish=collector.publish,
            health=HealthBoard(),  # type: ignore[arg-type]
            limiter=None,
            settings=FeedStreamSettings(policy=FAST_POLICY),
        )
        assert len(streams) == 1
        task = asyncio.create_task(streams[0].run())
        try:
            await _until(lambda: len(calls) >= 3)
            flaky.up = True
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(200)
            await _all_delivered(venue, collector)
        finally:
            await stop([task])


async def test_rest_down_past_the_retry_budget_records_a_known_hole_and_resumes_live() -> None:
    holes: list[tuple[str, str, int, int, str]] = []

    async def hole_sink(feed: str, symbol: str, start_ns: int, end_ns: int, reason: str) -> None:
        holes.append((feed, symbol, start_ns, end_ns, reason))

    async with FakeBinanceUsdm(make_tape(900, ("BTCUSDT",))) as venue:
        streams, tasks, collector, health = await start_streams(
            venue, ("BTCUSDT",), policy=with_policy(recovery_attempts=3), hole_sink=hole_sink
        )
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(300)
            await _until(lambda: len(collector.trades) == 300)
            venue.rest_down(True)
            venue.refuse_connections(True)
            venue.close_connections()
            venue.release(300)  # lost for good: REST will not answer
            await _until(lambda: venue.stats.refused >= 1)
            venue.refuse_connections(False)
            await _until(lambda: len(holes) == 1)
            assert venue.stats.rest_refused >= 3
            await _until(lambda: venue.stats.subscribe_messages >= 4)
            subscribed = venue.stats.subscribe_messages
            await _until(lambda: venue.open_connections == 1 and venue.stats.subscribe_messages == subscribed)
            await asyncio.sleep(0.05)
            venue.release(300)
            await _until(lambda: len(collector.trades) == 600)
        finally:
            await stop(tasks)
    [(feed, symbol, start_ns, end_ns, reason)] = holes
    assert (feed, symbol) == ("bin", "BTCUSDT") and "gap recovery failed 3 times" in reason
    assert start_ns == venue.executed[299].ts_ms * 1_000_000 and end_ns >= venue.executed[599].ts_ms * 1_000_000
    assert [t.trade_id for t in collector.trades] == [
        str(e.trade.agg_id) for e in venue.executed[:300] + venue.executed[600:]
    ]
    stream_health = health.get("feed:bin/ws0")
    assert (
        stream_health is not None and stream_health.status is Status.DEGRADED and "known hole" in stream_health.reason
    )


async def test_first_trades_of_a_symbol_executed_during_a_reconnect_are_recovered() -> None:
    from tests.fakes.binance_usdm import TapeTrade

    btc = make_tape(200, ("BTCUSDT",))
    eth = [TapeTrade("ETHUSDT", 9000 + n, "3400.5", "1.25", n % 2 == 0) for n in range(50)]
    async with FakeBinanceUsdm(btc[:100] + eth + btc[100:]) as venue:
        streams, tasks, collector, _ = await start_streams(venue, SYMBOLS)
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(100)
            await _until(lambda: len(collector.trades) == 100)
            venue.refuse_connections(True)
            venue.close_connections()
            venue.release(50)  # ETHUSDT's first trades ever, while nobody listens
            await _until(lambda: venue.stats.refused >= 1)
            venue.refuse_connections(False)
            venue.release(100)
            await _all_delivered(venue, collector)
        finally:
            await stop(tasks)
