"""The processor's startup tasks (see core.runtime.core.Phase) and the hubs it hands on.

The processor takes the feed path's hubs (FeedHubs: the fan-out, feed specs, symbol
names) and hands on ProcessorHubs, whose signal hub the trade executor subscribes to.
ADD_FEEDS_AND_STRATEGIES: the signal hub's backlog is watched and the strategy table
is checked once. DATA_FLOW: the processor subscribes to the feed fan-out (batches it
sheds go to `Processor.shed`) and starts its core jobs; its executions ask the
`held_position` lookup (wired by the composition root from the orders ledger, read
after the restart rebuild) which position each strategy already holds.
DATA_BRIDGE: outputs and signals start flowing to browsers and the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from core.health import Status
from core.runtime.core import Phase, RuntimeContext, StartupTask
from core.runtime.startup_value import StartupValue
from feeds.market import MarketData
from feeds.recording.tick_history import arecorded_ticks
from feeds.recording.tick_selectors import InstrumentNotFound
from feeds.startup import FeedHubs
from processor import selectors, services
from processor.backfill_source import HistoricalTickProvider
from processor.held import HeldPositionLookup, nothing_held
from processor.processor import Processor
from processor.publishing import LiveStrategyEvents
from processor.readiness import Readiness
from processor.signals import SignalHub
from processor.specs import StrategySpec

STRATEGIES_COMPONENT = "processor:strategies"
PROCESSOR_COMPONENT = "processor"
SIGNALS_COMPONENT = "processor:signals"


class RecordedHistory:
    """Backfill from the feeds app's tick recorder (feeds.recording.tick_history)."""

    async def ticks(self, feed: str, symbol: str, start_ns: int, end_ns: int) -> Sequence[MarketData]:
        try:
            return await arecorded_ticks(feed, symbol, start_ns, end_ns)
        except InstrumentNotFound:
            return ()


def history_provider() -> HistoricalTickProvider:
    """The recorded-tick source for strategy backfill."""
    return RecordedHistory()


def _report_rejected(ctx: RuntimeContext, rejected: dict[str, str]) -> None:
    if rejected:
        reason = "; ".join(f"{name}: {why}" for name, why in sorted(rejected.items()))
        ctx.health.set(STRATEGIES_COMPONENT, Status.DEGRADED, f"not running: {reason}")
    else:
        ctx.health.set(STRATEGIES_COMPONENT, Status.HEALTHY, "every enabled strategy is valid")


@dataclass(frozen=True, slots=True)
class ProcessorHubs:
    """What the processor hands the rest of the runtime; each value written by one task here."""

    signals: SignalHub = field(default_factory=SignalHub)
    processor: StartupValue[Processor] = field(default_factory=lambda: StartupValue("processor"))
    strategy_events: StartupValue[LiveStrategyEvents] = field(default_factory=lambda: StartupValue("strategy events"))


def processor_startup_tasks(
    feeds: FeedHubs, hubs: ProcessorHubs, *, held_position: HeldPositionLookup = nothing_held
) -> list[StartupTask]:
    async def load_strategies(ctx: RuntimeContext) -> None:
        hub = hubs.signals
        # The signal queues' depth on health and metrics; past the hard limit this job
        # raises FatalError, which stops the runtime non-zero with the reason.
        ctx.spawn(
            "processor:signal-backlog",
            hub.watch(lambda status, reason: ctx.health.set(SIGNALS_COMPONENT, status, reason)),
        )
        desired = await database_sync_to_async(selectors.desired_strategies)(None)
        _report_rejected(ctx, desired.rejected)
        ctx.health.set(PROCESSOR_COMPONENT, Status.BLOCKED, "not started")

    async def start_processor(ctx: RuntimeContext) -> None:
        feed_names = feeds.feed_names()
        events = LiveStrategyEvents(
            hub=hubs.signals,
            layer=get_channel_layer(),
            persist=database_sync_to_async(services.strategy_events_persist),
            symbols=feeds.symbols.get_or(None),
            push_interval_s=settings.DASHBOARD_PUSH_INTERVAL_S,
            signal_flush_interval_s=settings.PROCESSOR_SIGNAL_FLUSH_INTERVAL_S,
            output_persist_interval_s=settings.PROCESSOR_OUTPUT_PERSIST_INTERVAL_S,
        )
        hubs.strategy_events.provide(events)

        async def load_desired() -> tuple[StrategySpec, ...]:
            desired = await database_sync_to_async(selectors.desired_strategies)(feed_names)
            _report_rejected(ctx, desired.rejected)
            return desired.specs

        def report(readiness: Readiness) -> None:
            ctx.health.set(PROCESSOR_COMPONENT, readiness.health.board_status, readiness.reason)

        processor = Processor(
            sink=events,
            held_position=held_position,
            history=history_provider(),
            load_desired=load_desired,
            reconcile_interval_s=settings.PROCESSOR_RECONCILE_INTERVAL_S,
            backfill_default_ns=int(settings.PROCESSOR_BACKFILL_S * 1e9),
            on_readiness=report,
        )
        hubs.processor.provide(processor)
        feed = feeds.fanout.subscribe("processor", on_overflow=processor.shed)
        processor.start(spawn=ctx.spawn, feed=feed)

    async def start_strategy_publishing(ctx: RuntimeContext) -> None:
        events = hubs.strategy_events.get()
        ctx.spawn("processor:push", events.run_push())
        ctx.spawn("processor:store", events.run_store())
        # Runs after the tasks are cancelled: the last signals and outputs are stored.
        ctx.exit_stack.push_async_callback(events.flush, force_outputs=True)

    return [
        StartupTask("load-strategies", Phase.ADD_FEEDS_AND_STRATEGIES, load_strategies),
        StartupTask("start-processor", Phase.DATA_FLOW, start_processor),
        StartupTask("start-strategy-publishing", Phase.DATA_BRIDGE, start_strategy_publishing),
    ]
