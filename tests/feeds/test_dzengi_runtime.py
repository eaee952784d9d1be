"""Dzengi through the supervised stream runtime, against the fake venue: no gap, no duplicate.

The fake (tests/fakes/dzengi.py) is a real local websocket and HTTP server speaking the
documented protocol: the `{destination, correlationId, payload}` envelope, the 30 s
keep-alive it enforces, and aggTrades by time windows without an id cursor.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import pytest
from channels.db import database_sync_to_async
from prometheus_client import REGISTRY

from core.health import HealthBoard, Status
from core.runtime.core import Runtime
from feeds.market import MarketData, parse_fixed
from feeds.models import Tick
from feeds.startup import FeedHubs, feed_startup_tasks
from feeds.streams.feed_streams import FeedStreamSettings, build_feed_streams
from feeds.streams.rest_history import RecoveryPagingError, RestTradeHistory
from feeds.streams.transport import dial
from feeds.streams.venue_limiter import VenueRateLimiter
from feeds.streams.window_planner import TradeRecoveryWindow
from feeds.venues import dzengi
from feeds.venues.base import FeedSpec, InstrumentSpec, KeepAlive, ParseError
from tests.fakes.dzengi import FakeDzengi, make_tape
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import FAST_POLICY, FAST_TRANSPORT, TEST_LIMITS, Collector, fast_runtime_streams, stop
from tests.helpers import async_eventually

SYMBOLS = ("BTC/USD", "ETH/USD")
VENUE = dzengi.VENUE


async def _until(condition, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return bool(condition())

    await async_eventually(check, timeout_s=timeout_s, interval_s=0.01)


def _expected(venue: FakeDzengi) -> dict[str, list[tuple[str, int, int, int]]]:
    by_symbol: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    for executed in venue.executed:
        trade = executed.trade
        by_symbol[trade.symbol].append(
            (str(trade.trade_id), parse_fixed(trade.price), parse_fixed(trade.size), executed.ts_ms * 1_000_000)
        )
    return by_symbol


def _delivered(trades: Sequence[MarketData]) -> dict[str, list[tuple[str, int, int, int]]]:
    by_symbol: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    for trade in trades:
        by_symbol[trade.symbol].append((trade.trade_id or "", trade.price, trade.volume, trade.ts_event))
    return by_symbol


async def _start(venue: FakeDzengi, policy=FAST_POLICY):  # type: ignore[no-untyped-def]
    collector, health = Collector(), HealthBoard()
    random.seed(1)
    spec = FeedSpec(
        name="dz",
        venue="dzengi",
        settings=VENUE.clean_settings({"ws_url": venue.ws_url, "rest_url": venue.rest_url}),
        instruments=tuple(InstrumentSpec(symbol, "0.01", "0.001") for symbol in SYMBOLS),
    )
    streams = await build_feed_streams(
        spec,
        VENUE,
        publish=collector.publish,
        health=health,
        limiter=VenueRateLimiter(TEST_LIMITS, fraction=1.0),
        settings=FeedStreamSettings(policy=policy, transport=FAST_TRANSPORT, rest_timeout_s=2),
    )
    tasks = [asyncio.create_task(stream.run()) for stream in streams]
    return streams, tasks, collector, health


async def _all_delivered(venue: FakeDzengi, collector: Collector) -> None:
    await _until(lambda: venue.finished and len(collector.trades) >= len(venue.executed), 30)
    await asyncio.sleep(0.05)  # anything extra (a duplicate) would arrive now
    assert _delivered(collector.trades) == _expected(venue)


async def test_trades_missed_while_disconnected_are_recovered_over_rest_with_no_duplicate_and_no_gap() -> None:
    async with FakeDzengi(make_tape(3000, SYMBOLS)) as venue:
        streams, tasks, collector, health = await _start(venue)
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(500)
            await _until(lambda: len(collector.trades) == 500)
            venue.refuse_connections(True)  # refused handshakes while the market trades on
            venue.close_connections()
            venue.release(1200)  # more than a REST page per symbol: paging by time must go on
            await _until(lambda: venue.stats.refused >= 2)
            venue.refuse_connections(False)
            venue.release(1300)
            await _all_delivered(venue, collector)
            assert streams[0].stats.recovered >= 1200
            assert venue.rest_queries and all("fromId" not in query for query in venue.rest_queries)
            assert health.get("feed:dz").status is Status.HEALTHY  # type: ignore[union-attr]
        finally:
            await stop(tasks)


async def test_half_open_connection_is_detected_by_the_keepalive_and_the_gap_filled() -> None:
    async with FakeDzengi(make_tape(900, SYMBOLS)) as venue:
        streams, tasks, collector, _ = await _start(venue, replace(FAST_POLICY, heartbeat_timeout_s=3600))
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(300)
            await _until(lambda: len(collector.trades) == 300)
            venue.go_half_open()
            venue.release(300)
            await _until(lambda: venue.stats.subscribe_messages == 2)
            venue.release(300)
            await _all_delivered(venue, collector)
        finally:
            await stop(tasks)


async def test_silent_connection_is_redialled_by_the_heartbeat_and_the_gap_filled() -> None:
    async with FakeDzengi(make_tape(900, SYMBOLS)) as venue:
        streams, tasks, collector, _ = await _start(venue)
        try:
            await _until(lambda: venue.stats.subscribe_messages == 1)
            venue.release(300)
            await _until(lambda: len(collector.trades) == 300)
            venue.go_silent()
            venue.release(300)
            await _until(lambda: venue.stats.subscribe_messages == 2)
            venue.release(300)
            await _all_delivered(venue, collector)
        finally:
            await stop(tasks)


async def test_the_client_pings_keep_a_connection_the_venue_would_close_for_silence() -> None:
    async with FakeDzengi(make_tape(10, SYMBOLS), ping_deadline_s=0.4) as venue:
        (endpoint,) = await VENUE.endpoints(SYMBOLS, {"trades"}, {"ws_url": venue.ws_url})
        pinging = replace(endpoint, keep_alive=replace(VENUE.keep_alive, client_ping_interval_s=0.1))
        silent = replace(endpoint, keep_alive=KeepAlive(None, None, 30.0, None))
        kept = await dial(pinging, FAST_TRANSPORT, keep_alive=VENUE.keep_alive, ping_message=VENUE.ping_message)
        dropped = await dial(silent, FAST_TRANSPORT, keep_alive=None, ping_message=VENUE.ping_message)
        try:
            await _until(lambda: venue.stats.closed_for_no_ping == 1, 5)
            await asyncio.sleep(0.5)
            assert venue.open_connections == 1 and venue.stats.closed_for_no_ping == 1
            assert venue.stats.pings >= 5
        finally:
            await kept.close()
            await dropped.close()


async def test_a_window_of_more_than_a_page_continues_from_the_last_trade_time_without_an_id_cursor() -> None:
    clock = [1_796_000_000_000]
    async with FakeDzengi(make_tape(2600, ("BTC/USD",)), clock_ms=lambda: clock[0]) as venue:
        venue.release(1500)  # 1500 trades in one millisecond...
        clock[0] += 1
        venue.release(1100)  # ...and more in the next
        history = RestTradeHistory(VENUE, VENUE.clean_settings({"rest_url": venue.rest_url}))
        try:
            window = TradeRecoveryWindow("BTC/USD", clock[0] - 10, clock[0] + 10)
            with pytest.raises(RecoveryPagingError):
                # more than a page in one millisecond cannot be walked by time: said, not looped
                await history.fetch_window(window, None)
        finally:
            await history.close()
    async with FakeDzengi(make_tape(2600, ("BTC/USD",)), clock_ms=lambda: clock[0]) as venue:
        for _ in range(26):
            clock[0] += 1
            venue.release(100)
        history = RestTradeHistory(VENUE, VENUE.clean_settings({"rest_url": venue.rest_url}))
        try:
            trades = await history.fetch_window(TradeRecoveryWindow("BTC/USD", clock[0] - 100, clock[0]), None)
        finally:
            await history.close()
        assert [t.trade_id for t in trades] == [str(e.trade.trade_id) for e in venue.executed]
        assert [q["startTime"] for q in venue.rest_queries] == [
            str(clock[0] - 100),
            str(clock[0] - 16),
            str(clock[0] - 7),
        ]


async def test_an_unknown_symbol_is_a_venue_error_reply_not_a_dead_stream() -> None:
    async with FakeDzengi(make_tape(10, SYMBOLS)) as venue:
        (endpoint,) = await VENUE.endpoints(["NOPE/USD"], {"trades"}, {"ws_url": venue.ws_url})
        connection = await dial(endpoint, FAST_TRANSPORT)
        try:
            for message in endpoint.subscribe:
                await connection.send(message)
            reply = await asyncio.wait_for(connection.recv(), 2)
            with pytest.raises(ParseError) as refused:
                VENUE.parse(reply, 0)
            assert refused.value.reason == "venue_error" and "NOPE/USD" in str(refused.value)
        finally:
            await connection.close()


# --- the whole feed runtime, with the recorder and the database -----------------------------


def _trade_frame(trade_id: int, *, symbol: str = "BTC/USD", price: str = "11400.95", size: str = "0.058") -> str:
    return (
        f'{{"status":"OK","destination":"internal.trade","payload":{{"price":{price},"size":{size},'
        f'"id":{trade_id},"ts":1796000000000,"symbol":"{symbol}","buyer":true}}}}'
    )


POISON: list[tuple[str | bytes, str]] = [
    ('{"status":"OK","destination":"internal.trade","payload":' + "[" * 1000 + "]" * 1000 + "}", "depth"),
    (_trade_frame(9_000_001, price="9" * 19 + ".5"), "number"),
    (_trade_frame(9_000_002, price="1e400"), "number"),
    (_trade_frame(9_000_003, price="-11400.95"), "price"),
    (_trade_frame(9_000_004, price="0"), "price"),
    (_trade_frame(9_000_005, size="-0.058"), "size"),
    (_trade_frame(9_000_006, symbol=""), "symbol"),
    (_trade_frame(9_000_007).replace('"buyer":true', '"buyer":"yes"'), "schema"),
    (_trade_frame(9_000_008).encode().replace(b"BTC/USD", b"BTC\xff\xfe/USD"), "utf8"),
    ('{"status":"OK","destination":"internal.trade","payload":{"price":', "json"),
    ('{"status":"Error","correlationId":"7","payload":{"errorMessage":"Internal error"}}', "venue_error"),
]


def _malformed(reason: str) -> float:
    return REGISTRY.get_sample_value("feed_frames_malformed_total", {"venue": "dzengi", "reason": reason}) or 0.0


@pytest.fixture
def fast_streams(settings):  # type: ignore[no-untyped-def]
    return fast_runtime_streams(settings, heartbeat_timeout_s=2)


@pytest.mark.django_db(transaction=True)
async def test_poison_frames_in_the_live_stream_are_counted_and_skipped_and_every_good_trade_recorded(
    fast_streams,  # type: ignore[no-untyped-def]
) -> None:
    async with FakeDzengi(make_tape(1500, SYMBOLS)) as venue:
        await database_sync_to_async(make_feed)(
            "dz", SYMBOLS, venue="dzengi", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        before = {reason: _malformed(reason) for _, reason in POISON}
        runtime = Runtime(feed_startup_tasks(FeedHubs(), ["dz"]))
        task = asyncio.create_task(runtime.run())
        count = database_sync_to_async(Tick.objects.count)
        try:

            async def subscribed() -> bool:
                assert not task.done(), "the runtime stopped"
                return venue.stats.subscribe_messages >= 1

            await async_eventually(subscribed, timeout_s=20, interval_s=0.02)
            for frame, _ in POISON[:4]:
                venue.inject(frame)
            venue.release(500)
            for frame, _ in POISON[4:8]:
                venue.inject(frame)
            venue.release(500)
            for frame, _ in POISON[8:]:
                venue.inject(frame)
            venue.release(500)

            async def everything_recorded() -> bool:
                assert not task.done(), "the runtime stopped"
                return await count() == 1500

            await async_eventually(everything_recorded, timeout_s=30, interval_s=0.05)
            health = runtime.context.health.get("feed:dz")
            assert health is not None and health.status is Status.HEALTHY
            assert venue.stats.connections == 1  # no frame cost the connection
        finally:
            runtime.request_stop()
            assert await task == 0

    recorded: dict[str, list[tuple[str, int, int, int]]] = {}
    for symbol, trade_id, price, volume, ts in await database_sync_to_async(
        lambda: list(
            Tick.objects.order_by("pk").values_list(
                "instrument__venue_symbol", "trade_id", "price", "volume", "ts_event"
            )
        )
    )():
        recorded.setdefault(symbol, []).append((trade_id, price, volume, ts))
    assert recorded == _expected(venue)
    expected_counts: dict[str, int] = {}
    for _, reason in POISON:
        expected_counts[reason] = expected_counts.get(reason, 0) + 1
    assert {reason: _malformed(reason) - before[reason] for reason in expected_counts} == expected_counts


@pytest.mark.django_db(transaction=True)
async def test_a_restarted_dzengi_feed_recovers_the_trades_executed_while_it_was_down(fast_streams) -> None:  # type: ignore[no-untyped-def]
    async with FakeDzengi(make_tape(2400, SYMBOLS)) as venue:
        await database_sync_to_async(make_feed)(
            "dz", SYMBOLS, venue="dzengi", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        count = database_sync_to_async(Tick.objects.count)

        async def run_until(condition) -> None:  # type: ignore[no-untyped-def]
            runtime = Runtime(feed_startup_tasks(FeedHubs(), ["dz"]))
            task = asyncio.create_task(runtime.run())
            try:
                await async_eventually(condition, timeout_s=30, interval_s=0.02)
            finally:
                runtime.request_stop()
                assert await task == 0

        async def first_batch_recorded() -> bool:
            if venue.stats.subscribe_messages and not venue.executed:
                venue.release(600)
            return await count() == 600

        await run_until(first_batch_recorded)
        venue.release(1300)  # while no process runs: more than a REST page per symbol

        async def everything_recorded() -> bool:
            if venue.stats.subscribe_messages >= 2 and len(venue.executed) == 1900:
                venue.release(500)
            return await count() == 2400

        await run_until(everything_recorded)

    recorded: dict[str, list[tuple[str, int, int, int]]] = {}
    for symbol, trade_id, price, volume, ts in await database_sync_to_async(
        lambda: list(
            Tick.objects.order_by("pk").values_list(
                "instrument__venue_symbol", "trade_id", "price", "volume", "ts_event"
            )
        )
    )():
        recorded.setdefault(symbol, []).append((trade_id, price, volume, ts))
    assert recorded == _expected(venue)
