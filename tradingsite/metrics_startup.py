"""Startup tasks that feed tradingsite.metrics from a runtime process (any role)."""

from __future__ import annotations

from django.conf import settings

from core.metrics import mark_process_dead
from core.runtime.core import Phase, RuntimeContext, StartupTask
from feeds.distribution.fanout import drain
from feeds.market import FeedData
from tradingsite import metrics
from tradingsite.runtime.hubs import RuntimeHubs

METRICS_CONSUMER = "metrics"


def metrics_startup_tasks(hubs: RuntimeHubs) -> list[StartupTask]:
    async def watch_health(ctx: RuntimeContext) -> None:
        # Components that reported before this ran are seeded; later changes arrive live.
        for component, health in ctx.health.snapshot().items():
            metrics.observe_health_change(component, None, health)
        ctx.health.listeners.append(metrics.observe_health_change)
        ctx.exit_stack.callback(mark_process_dead)

    async def sample(ctx: RuntimeContext) -> None:
        async def observe(batch: FeedData) -> None:
            metrics.observe_feed_batch(batch)

        fanout = hubs.feeds.fanout
        # Its own bounded queue: a slow metrics consumer never holds the feed back.
        ctx.spawn("metrics:feed-lag", drain(METRICS_CONSUMER, fanout.subscribe(METRICS_CONSUMER), observe))
        ctx.spawn(
            "metrics:sampler", metrics.sample_runtime_forever(hubs, interval_s=settings.METRICS_SAMPLE_INTERVAL_S)
        )

    return [
        StartupTask("start-health-metrics", Phase.ADD_FEEDS_AND_STRATEGIES, watch_health),
        StartupTask("start-metrics-sampling", Phase.DATA_BRIDGE, sample),
    ]
