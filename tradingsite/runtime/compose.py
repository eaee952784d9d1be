"""Composition of the runtime for each entry point. Building it has no side effects."""
from __future__ import annotations

from django.conf import settings

from feeds.redis_startup import redis_publisher_startup_tasks
from feeds.startup import feed_startup_tasks
from feeds.venues.upstox_startup import upstox_token_startup_tasks
from orders.startup import orders_startup_tasks
from processor.startup import processor_startup_tasks
from recovery.startup import recovery_startup_tasks
from tradingsite.health import Status
from tradingsite.metrics_startup import metrics_startup_tasks
from tradingsite.runtime.core import Phase, Runtime, RuntimeContext, StartupTask
from tradingsite.runtime.periodic import run_periodic_job
from tradingsite.runtime.reporting import report_health_forever, withdraw_health
from tradingsite.schedule import PERIODIC_JOBS


def _health_reporting(role: str) -> StartupTask:
    async def start(ctx: RuntimeContext) -> None:
        ctx.health.set(f"runtime:{role}", Status.HEALTHY, f"process {ctx.instance_id} running")
        ctx.exit_stack.push_async_callback(withdraw_health, ctx)
        ctx.spawn(
            "health-reporter",
            report_health_forever(
                ctx, interval_s=settings.HEALTH_REPORT_INTERVAL_S, stale_after_s=settings.HEALTH_STALE_AFTER_S
            ),
        )

    return StartupTask("start-health-reporting", Phase.ADD_FEEDS_AND_STRATEGIES, start)


def _entry_controls() -> StartupTask:
    """Let the trade executor consult the dashboard's kill switches before every entry,
    and reconciliation engage an account's switch when it cannot vouch for the account."""

    async def start(ctx: RuntimeContext) -> None:
        from dashboard.halts import entries_halt_by_reconciliation
        from dashboard.selectors import entries_halted

        ctx.resources["entry_gate"] = lambda account_id: entries_halted(account_id=account_id)
        ctx.resources["entries_halt"] = entries_halt_by_reconciliation

    return StartupTask("load-entry-controls", Phase.ADD_FEEDS_AND_STRATEGIES, start)


def _held_positions() -> StartupTask:
    """Let each starting strategy execution resume the position the ledger says it holds."""

    async def start(ctx: RuntimeContext) -> None:
        from orders.audit import audit_record
        from orders.positions import strategy_held_position
        from processor.signals import Position

        def held_position(strategy_id: int, feed: str, symbol: str) -> Position:
            held = strategy_held_position(strategy_id, feed, symbol)
            if held.disagreement:
                audit_record(
                    event="position.accounts_disagree", account_id=None, strategy_id=strategy_id,
                    message=held.disagreement, details={"feed": feed, "symbol": symbol, "resumed": held.position.name},
                )
            return held.position

        ctx.resources["held_position"] = held_position

    return StartupTask("load-held-positions", Phase.ADD_FEEDS_AND_STRATEGIES, start)


def _periodic_jobs() -> StartupTask:
    async def start(ctx: RuntimeContext) -> None:
        for job in PERIODIC_JOBS:
            ctx.spawn(f"job:{job.name}", run_periodic_job(job))

    return StartupTask("start-periodic-jobs", Phase.DATA_BRIDGE, start)


def build_runtime(*, role: str, feed_names: list[str] | None, periodic_jobs: bool) -> Runtime:
    """Return the runtime for the given feeds (None = every enabled feed).

    `role` names the process in health reports ("site", "feed:binance"); a restarted
    process with the same role takes over its predecessor's reports.
    """
    tasks = [_health_reporting(role), _entry_controls(), _held_positions(), *feed_startup_tasks(feed_names)]
    tasks += redis_publisher_startup_tasks()
    tasks += processor_startup_tasks()
    tasks += recovery_startup_tasks()
    tasks += upstox_token_startup_tasks()
    tasks += orders_startup_tasks()
    tasks += metrics_startup_tasks()
    if periodic_jobs:
        tasks.append(_periodic_jobs())
    return Runtime(tasks, stop_timeout_s=settings.RUNTIME_STOP_TIMEOUT_S)
