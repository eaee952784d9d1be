"""The processor inside the runtime: strategies from the database, hot reload, storage, pushes."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.test import override_settings

from core.health import Status
from core.push_groups import MARKET_GROUP
from core.runtime.core import RuntimeContext
from feeds.distribution.fanout import FeedFanout
from feeds.models import Feed, Instrument, MarketType
from feeds.startup import FeedHubs
from feeds.venues.base import FeedSpec
from processor.models import Strategy, StrategyOutputRecord, StrategySignal
from processor.publishing import LiveStrategyEvents
from processor.signals import SignalHub
from processor.startup import ProcessorHubs, processor_startup_tasks
from tests.helpers import async_eventually
from tests.processor.factories import batch, tick

EMA = {"timeframe_s": 1, "fast": 1, "slow": 2, "long_only": False}


def make_strategy(name: str, symbols: list[str], **fields) -> Strategy:
    feed, _ = Feed.objects.get_or_create(
        name="sim", defaults={"venue": "simulated", "market_type": MarketType.SIMULATED}
    )
    strategy = Strategy.objects.create(
        name=name, kind=fields.pop("kind", "ema"), params=fields.pop("params", EMA), **fields
    )
    for symbol in symbols:
        instrument, _ = Instrument.objects.get_or_create(
            feed=feed,
            venue_symbol=symbol,
            defaults={"symbol": symbol, "tick_size": Decimal("0.01"), "lot_size": Decimal("0.001")},
        )
        strategy.instruments.add(instrument)
    return strategy


class Wired(RuntimeContext):
    """A runtime context with the hubs the processor's startup tasks read and write."""

    feeds: FeedHubs
    hubs: ProcessorHubs
    held_position: object = None


@pytest.fixture
async def runtime():
    ctx = Wired()
    ctx.feeds, ctx.hubs = FeedHubs(), ProcessorHubs()
    ctx.feeds.specs.provide([FeedSpec(name="sim", venue="simulated", settings={})])
    yield ctx
    for task in ctx._tasks:
        task.cancel()
    await asyncio.gather(*ctx._tasks, return_exceptions=True)
    await ctx.exit_stack.aclose()


async def start(ctx: Wired) -> None:
    wiring = {} if ctx.held_position is None else {"held_position": database_sync_to_async(ctx.held_position)}
    for task in processor_startup_tasks(ctx.feeds, ctx.hubs, **wiring):
        await task.run(ctx)


def routed(ctx: Wired) -> dict:
    return ctx.hubs.processor.get().instrument_routes()


@pytest.mark.django_db(transaction=True)
@override_settings(
    PROCESSOR_RECONCILE_INTERVAL_S=0.02,
    PROCESSOR_SIGNAL_FLUSH_INTERVAL_S=0.02,
    PROCESSOR_OUTPUT_PERSIST_INTERVAL_S=0.0,
    DASHBOARD_PUSH_INTERVAL_S=0.02,
)
async def test_strategies_run_from_the_table_and_reload_without_a_restart(runtime):
    await database_sync_to_async(make_strategy)("ema-btc", ["BTC"])
    await database_sync_to_async(make_strategy)("broken", ["BTC"], params={"fast": "x"})
    await start(runtime)
    assert runtime.health.get("processor:strategies").status is Status.DEGRADED  # "broken" cannot run
    await async_eventually(lambda: asyncio.sleep(0, routed(runtime) == {"ema-btc": {("sim", "BTC")}}))

    fanout: FeedFanout = runtime.feeds.fanout
    signals = runtime.hubs.signals.subscribe("orders")
    fanout.publish(batch(tick("BTC", 1, 100), tick("BTC", 2, 101), tick("BTC", 3, 102), tick("BTC", 4, 103)))
    signal = await asyncio.wait_for(signals.get(), 5)
    assert signal.kind.value == "ENTRY_LONG" and signal.strategy_name == "ema-btc"

    # Stored: the signal with its output, and the latest output.
    def stored():
        return (
            StrategySignal.objects.count() == 1
            and StrategyOutputRecord.objects.filter(output_id=StrategySignal.objects.get().output_id).exists()
        )

    await async_eventually(database_sync_to_async(stored))

    # Hot reload: a new strategy starts, a disabled one stops, without a restart.
    await database_sync_to_async(make_strategy)("ema-eth", ["ETH"])
    await async_eventually(lambda: asyncio.sleep(0, "ema-eth" in routed(runtime)))
    await database_sync_to_async(Strategy.objects.filter(name="ema-eth").update)(enabled=False)
    await async_eventually(lambda: asyncio.sleep(0, "ema-eth" not in routed(runtime)))
    assert runtime.health.get("processor").status is Status.HEALTHY


@pytest.mark.django_db(transaction=True)
@override_settings(PROCESSOR_RECONCILE_INTERVAL_S=3600)
async def test_routing_makes_no_database_query_per_tick(runtime, monkeypatch):
    from django.db.backends.utils import CursorWrapper

    await database_sync_to_async(make_strategy)("ema-btc", ["BTC"])
    await start(runtime)
    await async_eventually(lambda: asyncio.sleep(0, bool(routed(runtime))))
    processor = runtime.hubs.processor.get()
    await asyncio.sleep(0.05)  # let the first backfill finish
    queries = []
    execute = CursorWrapper.execute
    # Counts queries from every thread, including database_sync_to_async's.
    monkeypatch.setattr(
        CursorWrapper, "execute", lambda self, sql, params=None: queries.append(sql) or execute(self, sql, params)
    )
    for second in range(1, 200):
        await processor.consume(batch(tick("BTC", second, 100 + second % 7)))
    await processor.drained()
    assert queries == []
    assert runtime.hubs.strategy_events.get()._latest  # the ticks did produce outputs


async def test_outputs_are_conflated_and_pushed_to_the_market_group():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(MARKET_GROUP, channel)
    stored = []

    async def persist(*, signals, outputs):
        stored.append((list(signals), list(outputs)))

    from processor.processor import Processor
    from tests.processor.factories import spec

    events = LiveStrategyEvents(hub=SignalHub(), layer=layer, persist=persist, symbols={("sim", "BTCUSD"): "BTC-USD"})
    processor = Processor(sink=events)
    processor.start()
    processor.reconcile([spec(7, ["BTCUSD"])])
    await processor.settled()
    for second in range(1, 50):
        await processor.consume(batch(tick("BTCUSD", second, trade_id="long" if second == 40 else None)))
    await processor.drained()
    for message in events.take_push_messages():
        await layer.group_send(MARKET_GROUP, message)
    outputs = await asyncio.wait_for(layer.receive(channel), 1)
    assert outputs["type"] == "strategy.output"
    [row] = outputs["outputs"]  # 49 outputs conflated into the latest one
    assert row["symbol"] == "BTC-USD" and row["venue_symbol"] == "BTCUSD" and row["occurrence_time_ms"] == 49_000
    signals = await asyncio.wait_for(layer.receive(channel), 1)
    assert [s["kind"] for s in signals["signals"]] == ["ENTRY_LONG"] and signals["signals"][0]["price"] == "100"
    await events.flush(force_outputs=True)
    [(stored_signals, stored_outputs)] = stored
    assert len(stored_signals) == 1 and [o.occurrence_ns for o in stored_outputs] == [49 * 10**9]
    await processor.stop()


@pytest.mark.django_db(transaction=True)
@override_settings(PROCESSOR_RECONCILE_INTERVAL_S=0.02)
async def test_the_runtime_wires_held_positions_shed_batches_and_the_signal_backlog_into_health(runtime):
    strategy = await database_sync_to_async(make_strategy)("ema-btc", ["BTC"])
    asked = []

    def held_position(strategy_id: int, feed: str, symbol: str):
        from processor.signals import Position

        asked.append((strategy_id, feed, symbol))
        return Position.LONG

    runtime.held_position = held_position
    await start(runtime)
    await async_eventually(lambda: asyncio.sleep(0, routed(runtime) == {"ema-btc": {("sim", "BTC")}}))
    processor = runtime.hubs.processor.get()
    route = next(iter(processor.snapshot.routes_by_strategy.values()))
    await async_eventually(lambda: asyncio.sleep(0, route.executor.has_open_positions()))
    assert asked == [(strategy.pk, "sim", "BTC")]
    assert runtime.health.get("processor:signals").status is Status.HEALTHY

    # More batches than the processor's input queue holds, with no turn to take them.
    fanout: FeedFanout = runtime.feeds.fanout
    for second in range(1, 1100):
        fanout.publish(batch(tick("BTC", second, 100)))
    reason = await asyncio.wait_for(processor.fatal, 5)  # it held a position: fail fast
    assert "ema-btc degraded with open positions: processor input full" in reason
    health = runtime.health.get("processor")
    assert health.status is Status.BLOCKED and "input shed 75 feed batches (75 events)" in health.reason
