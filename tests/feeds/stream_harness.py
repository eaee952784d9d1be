"""Run supervised streams of a binance-usdm feed against the fake venue, collecting what they deliver."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace

from core.health import HealthBoard
from feeds.market import FeedData, MarketData, parse_fixed
from feeds.streams.feed_streams import FeedStreamSettings, build_feed_streams
from feeds.streams.supervised_stream import StreamPolicy, SupervisedStream
from feeds.streams.transport import TransportSettings
from feeds.streams.venue_limiter import VenueRateLimiter
from feeds.venues import get_venue
from feeds.venues.base import FeedSpec, InstrumentSpec, PublishedLimits
from tests.fakes.binance_usdm import FakeBinanceUsdm

FAST_POLICY = StreamPolicy(
    heartbeat_timeout_s=0.5,
    scheduler_interval_s=0.05,
    backoff_initial_s=0.01,
    backoff_max_s=0.05,
    breaker_threshold=10,
    breaker_cooldown_s=0.3,
    recovery_attempts=50,
)
FAST_TRANSPORT = TransportSettings(open_timeout_s=2, ping_interval_s=0.5, ping_timeout_s=0.5, close_timeout_s=0.2)
# Generous buckets: the tests exercise faults, not the venue's limits.
TEST_LIMITS = PublishedLimits(10**9, 1, 1, 10**6, 1, 10**6)


def fast_runtime_streams(settings, *, heartbeat_timeout_s: float = 0.5):  # type: ignore[no-untyped-def]
    """Set a runtime's stream settings short, for tests against the local fake venue; return `settings`."""
    settings.FEED_HEARTBEAT_TIMEOUT_S = heartbeat_timeout_s
    settings.FEED_HEARTBEAT_CHECK_S = 0.05
    settings.FEED_BACKOFF_INITIAL_S = 0.01
    settings.FEED_BACKOFF_MAX_S = 0.05
    settings.FEED_WS_PING_INTERVAL_S = 0.5
    settings.FEED_WS_PING_TIMEOUT_S = 0.5
    settings.RECORDER_FLUSH_INTERVAL_S = 0.02
    settings.FEED_RATE_LIMIT_MAX_WAIT_S = 5
    return settings


def feed_spec(venue: FakeBinanceUsdm, symbols: Sequence[str], name: str = "bin") -> FeedSpec:
    adapter = get_venue("binance-usdm")
    return FeedSpec(
        name=name,
        venue="binance-usdm",
        settings=adapter.clean_settings({"ws_url": venue.ws_url, "rest_url": venue.rest_url}),
        instruments=tuple(InstrumentSpec(symbol, "0.01", "0.001") for symbol in symbols),
    )


class Collector:
    """Keeps every delivered batch; `forward` also hands each batch on (to a fan-out)."""

    def __init__(self, forward: Callable[[FeedData], None] | None = None) -> None:
        self.batches: list[FeedData] = []
        self.trades: list[MarketData] = []
        self._forward = forward

    def publish(self, batch: FeedData) -> None:
        self.batches.append(batch)
        self.trades.extend(e for e in batch.events if isinstance(e, MarketData))
        if self._forward is not None:
            self._forward(batch)


def expected_trades(venue: FakeBinanceUsdm) -> dict[str, list[tuple[str, int, int, int]]]:
    """(trade id, price, volume, ts_event) per symbol, as the venue executed them."""
    by_symbol: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    for executed in venue.executed:
        trade = executed.trade
        by_symbol[trade.symbol].append(
            (str(trade.agg_id), parse_fixed(trade.price), parse_fixed(trade.quantity), executed.ts_ms * 1_000_000)
        )
    return by_symbol


def delivered_trades(trades: Sequence[MarketData]) -> dict[str, list[tuple[str, int, int, int]]]:
    by_symbol: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    for trade in trades:
        by_symbol[trade.symbol].append((trade.trade_id or "", trade.price, trade.volume, trade.ts_event))
    return by_symbol


async def start_streams(
    venue: FakeBinanceUsdm,
    symbols: Sequence[str],
    *,
    policy: StreamPolicy = FAST_POLICY,
    transport: TransportSettings = FAST_TRANSPORT,
    checkpoints: dict[str, MarketData] | None = None,
    health: HealthBoard | None = None,
    collector: Collector | None = None,
    seed: int = 1,
    hole_sink=None,  # type: ignore[no-untyped-def]
) -> tuple[list[SupervisedStream], list[asyncio.Task[None]], Collector, HealthBoard]:
    collector = collector or Collector()
    health = health or HealthBoard()
    random.seed(seed)
    streams = await build_feed_streams(
        feed_spec(venue, symbols),
        get_venue("binance-usdm"),
        publish=collector.publish,
        health=health,  # type: ignore[arg-type]
        limiter=VenueRateLimiter(TEST_LIMITS, fraction=1.0),
        settings=FeedStreamSettings(policy=policy, transport=transport, rest_timeout_s=2),
        checkpoints=checkpoints,
        hole_sink=hole_sink,
    )
    tasks = [asyncio.create_task(stream.run()) for stream in streams]
    return streams, tasks, collector, health


async def stop(tasks: Sequence[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            raise result


def with_policy(**changes: object) -> StreamPolicy:
    return replace(FAST_POLICY, **changes)  # type: ignore[arg-type]
