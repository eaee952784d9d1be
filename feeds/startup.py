"""The feed path's startup tasks (see core.runtime.core.Phase) and the hubs it hands on.

FeedHubs is what the rest of the runtime takes from the feed path: the fan-out every
consumer subscribes to (recorder, processor, paper broker, publishers, metrics), and
what these tasks load at startup (feed specs, symbol names, the metadata gate).

The metadata gate runs before any stream is built: an instrument whose metadata is not
known is not subscribed (the feed's other instruments go on), and the feed's watcher
subscribes it once a later check finds its metadata.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from core.health import Status
from core.runtime.core import FatalError, Phase, RuntimeContext, StartupTask
from core.runtime.startup_value import StartupValue
from feeds import selectors
from feeds.distribution.fanout import FeedFanout, drain
from feeds.distribution.metadata_gate import InstrumentMetadataGate
from feeds.distribution.price_publisher import PricePublisher
from feeds.distribution.redispub.metadata import venue_lists_metadata
from feeds.recording.checkpoint_store import load_checkpoints, record_known_hole
from feeds.recording.database_writer import pipelined_writer_for_database
from feeds.recording.recorder import TickRecorder
from feeds.recording.shed_holes import ShedHoles
from feeds.recording.tick_selectors import tick_addresses
from feeds.streams.feed_lease import FeedLeases
from feeds.streams.feed_streams import build_feed_streams, is_exchange_venue
from feeds.streams.local_streams import build_local_stream
from feeds.streams.stream_settings import feed_stream_settings
from feeds.streams.venue_limiter import RateLimiterRegistry
from feeds.venues import get_venue
from feeds.venues.base import ExchangeVenue, FeedSpec

if TYPE_CHECKING:
    from feeds.distribution.redispub.service import MarketDataService

log = logging.getLogger(__name__)

# The recorder's fan-out queue holds batches (a frame's trades, or up to 1000 recovered
# ones); it must absorb a recovery burst while a flush is in progress.
RECORDER_QUEUE_BATCHES = 20_000


# (feed, venue symbol) -> our symbol, for the feeds this process runs.
SymbolNames = dict[tuple[str, str], str]


@dataclass(frozen=True, slots=True)
class FeedHubs:
    """What the feed path hands the rest of the runtime; each value written by one task here."""

    fanout: FeedFanout = field(default_factory=FeedFanout)
    specs: StartupValue[list[FeedSpec]] = field(default_factory=lambda: StartupValue("feed specs"))
    symbols: StartupValue[SymbolNames] = field(default_factory=lambda: StartupValue("symbol names"))
    # Made in phase 1, checked in SUBSCRIPTIONS: followers (the Redis publisher) attach between.
    metadata_gate: StartupValue[InstrumentMetadataGate] = field(
        default_factory=lambda: StartupValue("instrument metadata gate")
    )
    recorder: StartupValue[TickRecorder] = field(default_factory=lambda: StartupValue("tick recorder"))
    redis_market_data: StartupValue[MarketDataService] = field(
        default_factory=lambda: StartupValue("Redis market-data publisher")
    )
    # Provided in phase 1 when the process holds its feeds by lease (runfeed): the
    # recorder writes only while it says yes.
    write_fence: StartupValue[Callable[[], bool]] = field(default_factory=lambda: StartupValue("lease write fence"))

    def feed_names(self) -> list[str]:
        """The names of the feeds this process runs (none before they are loaded)."""
        return [spec.name for spec in self.specs.get_or([])]


async def _record_hole(feed: str, symbol: str, start_ns: int, end_ns: int, reason: str) -> None:
    await database_sync_to_async(record_known_hole)(feed, symbol, start_ns, end_ns, reason)


def feed_startup_tasks(hubs: FeedHubs, feed_names: list[str] | None) -> list[StartupTask]:
    """Return the startup tasks that load the named feeds (all enabled when None) and stream them."""

    async def load_feeds(ctx: RuntimeContext) -> None:
        try:
            specs = await database_sync_to_async(selectors.feed_specs_for_run)(feed_names)
        except selectors.FeedSelectionError as exc:
            raise FatalError(str(exc)) from None
        hubs.specs.provide(specs)
        # Every batch a consumer sheds is shown on health, not only counted.
        hubs.fanout.attach_health(ctx.health)
        ctx.spawn("fanout:review", hubs.fanout.watch())
        hubs.metadata_gate.provide(
            InstrumentMetadataGate(
                ctx.health,
                timeout_s=settings.FEED_REST_TIMEOUT_S,
                retry_s=settings.MARKET_DATA_METADATA_RETRY_S,
            )
        )

    async def open_metadata_gate(ctx: RuntimeContext) -> None:
        gate = hubs.metadata_gate.get()
        specs = [spec for spec in hubs.specs.get() if spec.instruments]
        # Concurrently: one venue's slow metadata endpoint must not hold the others back.
        await asyncio.gather(*(gate.check(spec, fetch=True) for spec in specs))

    async def load_instrument_names(ctx: RuntimeContext) -> None:
        hubs.symbols.provide(await database_sync_to_async(selectors.symbol_names)(hubs.feed_names()))

    async def start_recorder(ctx: RuntimeContext) -> None:
        if not settings.RECORDER_ENABLED:
            return
        keys = await database_sync_to_async(tick_addresses)(hubs.feed_names())
        writer = await database_sync_to_async(pipelined_writer_for_database)()
        recorder = TickRecorder(
            writer,
            keys,
            batch_size=settings.RECORDER_BATCH_SIZE,
            flush_interval_s=settings.RECORDER_FLUSH_INTERVAL_S,
            capacity=settings.RECORDER_CAPACITY,
            health=ctx.health,
            may_write=hubs.write_fence.get_or(None),
        )
        holes = ShedHoles(_record_hole)
        queue = hubs.fanout.subscribe("recorder", capacity=RECORDER_QUEUE_BATCHES, on_overflow=holes.add)

        async def flush_on_shutdown() -> None:
            # Teardown cancelled the drain task: what is still queued is taken here.
            while not queue.empty():
                recorder.offer(queue.get_nowait())
            await recorder.close()

        ctx.exit_stack.push_async_callback(flush_on_shutdown)
        hubs.recorder.provide(recorder)
        ctx.spawn("recorder:drain", drain("recorder", queue, recorder.consume))
        ctx.spawn("recorder:flush", recorder.run())
        ctx.spawn("recorder:shed-holes", holes.flush_forever())

    async def start_data_flow(ctx: RuntimeContext) -> None:
        specs = hubs.specs.get()
        fanout = hubs.fanout
        limiters = RateLimiterRegistry(
            fraction=settings.FEED_RATE_LIMIT_FRACTION, max_wait_s=settings.FEED_RATE_LIMIT_MAX_WAIT_S
        )
        stream_settings = feed_stream_settings()
        gate = hubs.metadata_gate.get()
        # Streams started later (metadata arrived) get fresh numbers, so component names stay unique.
        stream_count: dict[str, int] = {}
        for spec in specs:
            if not spec.instruments:
                ctx.health.set(f"feed:{spec.name}", Status.DEGRADED, "no subscribed instruments")
                continue
            venue = get_venue(spec.venue)
            if not is_exchange_venue(venue):
                # Simulated and replay feeds: the site's own rows are their metadata. A
                # simulated tape goes on after the last recorded trade of each symbol.
                checkpoints = await database_sync_to_async(load_checkpoints)(spec.name)
                stream = build_local_stream(
                    spec,
                    venue,  # type: ignore[arg-type]
                    publish=fanout.publish,
                    health=ctx.health,
                    checkpoints=checkpoints,
                )
                ctx.spawn(f"feed:{spec.name}", stream.run())
                continue
            streaming: set[str] = set()

            async def start_streams(admitted: FeedSpec, venue: ExchangeVenue = venue) -> None:
                checkpoints = await database_sync_to_async(load_checkpoints)(admitted.name)
                streams = await build_feed_streams(
                    admitted,
                    venue,
                    publish=fanout.publish,
                    health=ctx.health,
                    limiter=limiters.for_venue(admitted.venue),
                    settings=stream_settings,
                    checkpoints=checkpoints,
                    hole_sink=_record_hole,
                    first_label=stream_count.get(admitted.name, 0),
                )
                stream_count[admitted.name] = stream_count.get(admitted.name, 0) + len(streams)
                for supervised in streams:
                    ctx.spawn(supervised.component, supervised.run())

            admitted = gate.admitted_spec(spec)
            if admitted.instruments:
                await start_streams(admitted)
                streaming.update(i.venue_symbol for i in admitted.instruments)
            else:
                ctx.health.set(
                    f"feed:{spec.name}",
                    Status.BLOCKED,
                    f"no instrument with known metadata (see metadata-gate:{spec.name})",
                )
            if venue_lists_metadata(spec.venue):
                ctx.spawn(
                    f"metadata-gate:{spec.name}",
                    _watch_metadata(gate, spec, streaming, start_streams, settings.MARKET_DATA_METADATA_RETRY_S),
                )

    async def start_price_publisher(ctx: RuntimeContext) -> None:
        publisher = PricePublisher(
            get_channel_layer(), hubs.symbols.get(), interval_s=settings.DASHBOARD_PUSH_INTERVAL_S
        )
        queue = hubs.fanout.subscribe("price-publisher")
        ctx.spawn("price-publisher:fold", drain("price-publisher", queue, publisher.consume))
        ctx.spawn("price-publisher:push", publisher.run())

    return [
        StartupTask("load-feeds", Phase.ADD_FEEDS_AND_STRATEGIES, load_feeds),
        StartupTask("open-metadata-gate", Phase.SUBSCRIPTIONS, open_metadata_gate),
        StartupTask("load-instrument-names", Phase.SUBSCRIPTIONS, load_instrument_names),
        StartupTask("start-recorder", Phase.SUBSCRIPTIONS, start_recorder),
        StartupTask("start-data-flow", Phase.DATA_FLOW, start_data_flow),
        StartupTask("start-price-publisher", Phase.DATA_BRIDGE, start_price_publisher),
    ]


def feed_lease_task(hubs: FeedHubs, leases: FeedLeases) -> StartupTask:
    """Keep the feeds' leases (already taken) for the life of the process; give them back at a clean stop.

    Registered in phase 1, so its release runs after the recorder's last flush (the exit
    stack unwinds last in, first out): the standby starts from checkpoints that cover
    every tick this process recorded.
    """

    async def hold(ctx: RuntimeContext) -> None:
        hubs.write_fence.provide(leases.valid)
        ctx.exit_stack.push_async_callback(leases.release)
        for name in leases.names:
            ctx.health.set(f"lease:{name}", Status.HEALTHY, f"held by {leases.holder}")
        ctx.spawn("feed-lease", leases.keep())

    return StartupTask("hold-feed-leases", Phase.ADD_FEEDS_AND_STRATEGIES, hold)


async def _watch_metadata(
    gate: InstrumentMetadataGate,
    spec: FeedSpec,
    streaming: set[str],
    start_streams: Callable[[FeedSpec], Awaitable[None]],
    every_s: float,
) -> None:
    """Re-check the feed's metadata for good; subscribe each instrument once it is known.

    While an instrument is held the venue is asked again (after failed fetches the gate
    doubles its wait, up to five minutes); otherwise only the stored rows are read (the hourly refresh, possibly in another process, writes
    them). An instrument already streaming whose metadata goes stale or unlisted keeps
    its subscription (it shares a socket with the others) but is held on health and in
    trade plans until a refresh confirms it again.
    """
    while True:
        await asyncio.sleep(every_s)
        change = await gate.check(spec, fetch=bool(gate.held(spec.name)))
        new = [i for i in spec.instruments if i.venue_symbol in change.admitted and i.venue_symbol not in streaming]
        if not new:
            continue
        log.info("feed %s: metadata arrived for %s; subscribing", spec.name, ", ".join(i.venue_symbol for i in new))
        await start_streams(replace(spec, instruments=tuple(new)))
        streaming.update(i.venue_symbol for i in new)
