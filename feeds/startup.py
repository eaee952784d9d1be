"""The feed path's startup tasks (see tradingsite.runtime.core.Phase)."""
from __future__ import annotations

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from feeds import selectors
from feeds.fanout import FeedFanout, drain
from feeds.publisher import PricePublisher
from feeds.stream import FeedStream
from feeds.venues import get_venue
from feeds.venues.base import FeedSpec
from tradingsite.health import Status
from tradingsite.runtime.core import FatalError, Phase, RuntimeContext, StartupTask


def feed_startup_tasks(feed_names: list[str] | None) -> list[StartupTask]:
    """Return the startup tasks that load the named feeds (all enabled when None) and stream them."""

    async def load_feeds(ctx: RuntimeContext) -> None:
        try:
            specs = await database_sync_to_async(selectors.feed_specs_for_run)(feed_names)
        except selectors.FeedSelectionError as exc:
            raise FatalError(str(exc)) from None
        ctx.resources["feed_specs"] = specs
        ctx.resources["fanout"] = FeedFanout()

    async def load_instrument_names(ctx: RuntimeContext) -> None:
        names = [spec.name for spec in ctx.resources["feed_specs"]]
        ctx.resources["symbols"] = await database_sync_to_async(selectors.symbol_names)(names)

    async def start_data_flow(ctx: RuntimeContext) -> None:
        specs: list[FeedSpec] = ctx.resources["feed_specs"]
        for spec in specs:
            if not spec.instruments:
                ctx.health.set(f"feed:{spec.name}", Status.DEGRADED, "no subscribed instruments")
                continue
            stream = FeedStream(spec, get_venue(spec.venue), ctx.resources["fanout"], ctx.health)
            ctx.spawn(f"feed:{spec.name}", stream.run())

    async def start_price_publisher(ctx: RuntimeContext) -> None:
        fanout: FeedFanout = ctx.resources["fanout"]
        publisher = PricePublisher(
            get_channel_layer(), ctx.resources["symbols"], interval_s=settings.DASHBOARD_PUSH_INTERVAL_S
        )
        queue = fanout.subscribe("price-publisher")
        ctx.spawn("price-publisher:fold", drain("price-publisher", queue, publisher.consume))
        ctx.spawn("price-publisher:push", publisher.run())

    return [
        StartupTask("load-feeds", Phase.ADD_FEEDS_AND_STRATEGIES, load_feeds),
        StartupTask("load-instrument-names", Phase.SUBSCRIPTIONS, load_instrument_names),
        StartupTask("start-data-flow", Phase.DATA_FLOW, start_data_flow),
        StartupTask("start-price-publisher", Phase.DATA_BRIDGE, start_price_publisher),
    ]
