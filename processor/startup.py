"""The processor's startup tasks (see tradingsite.runtime.core.Phase).

ADD_FEEDS_AND_STRATEGIES: the signal hub exists (the trade executor subscribes to
ctx.resources["signals"]; its backlog is watched) and the strategy table is checked
once. DATA_FLOW: the processor subscribes to the feed fan-out (batches it sheds go to
`Processor.shed`) and starts its core jobs; its executions ask
ctx.resources["held_position"] (wired by the composition root from the orders ledger,
read after the restart rebuild) which position each strategy already holds.
DATA_BRIDGE: outputs and signals start flowing to browsers and the store.
"""
from __future__ import annotations

from typing import Sequence

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from feeds.recording.tick_history import arecorded_ticks
from feeds.market import MarketData
from feeds.recording.tick_selectors import InstrumentNotFound
from processor import selectors, services
from processor.held import nothing_held
from processor.backfill_source import HistoricalTickProvider
from processor.processor import Processor
from processor.publishing import LiveStrategyEvents
from processor.readiness import Readiness
from processor.specs import StrategySpec
from processor.signals import SignalHub
from tradingsite.health import Status
from tradingsite.runtime.core import Phase, RuntimeContext, StartupTask

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


def processor_startup_tasks() -> list[StartupTask]:
    async def load_strategies(ctx: RuntimeContext) -> None:
        hub = SignalHub()
        ctx.resources["signals"] = hub
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
        feed_names = [spec.name for spec in ctx.resources.get("feed_specs", ())]
        events = LiveStrategyEvents(
            hub=ctx.resources["signals"],
            layer=get_channel_layer(),
            persist=database_sync_to_async(services.strategy_events_persist),
            symbols=ctx.resources.get("symbols"),
            push_interval_s=settings.DASHBOARD_PUSH_INTERVAL_S,
            signal_flush_interval_s=settings.PROCESSOR_SIGNAL_FLUSH_INTERVAL_S,
            output_persist_interval_s=settings.PROCESSOR_OUTPUT_PERSIST_INTERVAL_S,
        )
        ctx.resources["strategy_events"] = events

        async def load_desired() -> tuple[StrategySpec, ...]:
            desired = await database_sync_to_async(selectors.desired_strategies)(feed_names)
            _report_rejected(ctx, desired.rejected)
            return desired.specs

        def report(readiness: Readiness) -> None:
            ctx.health.set(PROCESSOR_COMPONENT, readiness.health.board_status, readiness.reason)

        held = ctx.resources.get("held_position")
        processor = Processor(
            sink=events,
            held_position=database_sync_to_async(held) if held is not None else nothing_held,
            history=history_provider(),
            load_desired=load_desired,
            reconcile_interval_s=settings.PROCESSOR_RECONCILE_INTERVAL_S,
            backfill_default_ns=int(settings.PROCESSOR_BACKFILL_S * 1e9),
            on_readiness=report,
        )
        ctx.resources["processor"] = processor
        feed = ctx.resources["fanout"].subscribe("processor", on_overflow=processor.shed)
        processor.start(spawn=ctx.spawn, feed=feed)

    async def start_strategy_publishing(ctx: RuntimeContext) -> None:
        events: LiveStrategyEvents = ctx.resources["strategy_events"]
        ctx.spawn("processor:push", events.run_push())
        ctx.spawn("processor:store", events.run_store())
        # Runs after the tasks are cancelled: the last signals and outputs are stored.
        ctx.exit_stack.push_async_callback(events.flush, force_outputs=True)

    return [
        StartupTask("load-strategies", Phase.ADD_FEEDS_AND_STRATEGIES, load_strategies),
        StartupTask("start-processor", Phase.DATA_FLOW, start_processor),
        StartupTask("start-strategy-publishing", Phase.DATA_BRIDGE, start_strategy_publishing),
    ]
