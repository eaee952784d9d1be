"""Composition of the runtime for each entry point. Building it has no side effects.

build_hubs makes the runtime's hubs (tradingsite.runtime.hubs) and fills the seams
from the apps that sit above the ones that use them; build_runtime hands each app's
startup task factory the hubs it reads and writes (docs/runtime.md).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.conf import settings

from core.health import ProcessIdentity, Status
from core.runtime.core import Phase, Runtime, RuntimeContext, StartupTask
from core.runtime.periodic import run_periodic_job
from core.runtime.reporting import report_health_forever, withdraw_health
from core.schedule import periodic_jobs
from feeds.redis_startup import redis_publisher_startup_tasks
from feeds.startup import feed_startup_tasks
from feeds.upstox_startup import upstox_token_startup_tasks
from orders.risk_watch import EntriesHalt, risk_watch_startup_tasks
from orders.startup import EntryControls, orders_startup_tasks
from processor.signals import Position
from processor.startup import processor_startup_tasks
from recovery.startup import recovery_startup_tasks
from tradingsite.metrics_startup import metrics_startup_tasks
from tradingsite.runtime.hubs import RuntimeHubs


def _health_reporting(role: str) -> StartupTask:
    # The reports are keyed by this process; a runfeed's role names its feeds.
    kind = "runfeed" if role.startswith("feed:") else role

    async def start(ctx: RuntimeContext) -> None:
        ctx.health.process = ProcessIdentity.of_this_process(role=kind, label=role, instance=ctx.instance_id)
        ctx.health.set(f"runtime:{role}", Status.HEALTHY, f"process {ctx.health.process.key} running")
        ctx.exit_stack.push_async_callback(withdraw_health, ctx)
        ctx.spawn(
            "health-reporter",
            report_health_forever(
                ctx, interval_s=settings.HEALTH_REPORT_INTERVAL_S, stale_after_s=settings.HEALTH_STALE_AFTER_S
            ),
        )

    return StartupTask("start-health-reporting", Phase.ADD_FEEDS_AND_STRATEGIES, start)


def entry_controls() -> EntryControls:
    """Let the trade executor consult the dashboard's kill switches before every entry,
    and reconciliation engage an account's switch when it cannot vouch for the account."""
    from dashboard.halts import entries_halt_by_reconciliation
    from dashboard.manual_control import site_entry_gate, site_entry_gate_many

    return EntryControls(
        # The kill switch first, then the account's risk limits (open positions, daily loss).
        entry_gate=site_entry_gate,
        entries_halt=entries_halt_by_reconciliation,
        entry_gate_many=site_entry_gate_many,
    )


def _risk_halt(hubs: RuntimeHubs) -> EntriesHalt | None:
    """The daily loss limit engages the dashboard's kill switch where the kill switches are wired."""
    if hubs.controls.entries_halt is None:
        return None
    from dashboard.halts import entries_halt_by_risk_limit

    return entries_halt_by_risk_limit


def held_position(strategy_id: int, feed: str, symbol: str) -> Position:
    """The position the ledger says a starting strategy execution holds (a disagreement is audited)."""
    from orders.audit import audit_record
    from orders.positions import strategy_held_position

    held = strategy_held_position(strategy_id, feed, symbol)
    if held.disagreement:
        audit_record(
            event="position.accounts_disagree",
            account_id=None,
            strategy_id=strategy_id,
            message=held.disagreement,
            details={"feed": feed, "symbol": symbol, "resumed": held.position.name},
        )
    return held.position


def build_hubs() -> RuntimeHubs:
    """Return fresh hubs with the seams filled (every starting strategy resumes its held position)."""
    return RuntimeHubs(held_position=database_sync_to_async(held_position), controls=entry_controls())


def _periodic_jobs() -> StartupTask:
    async def start(ctx: RuntimeContext) -> None:
        for job in periodic_jobs():
            ctx.spawn(f"job:{job.name}", run_periodic_job(job))

    return StartupTask("start-periodic-jobs", Phase.DATA_BRIDGE, start)


def build_runtime(
    *, role: str, feed_names: list[str] | None, periodic_jobs: bool, hubs: RuntimeHubs | None = None
) -> Runtime:
    """Return the runtime for the given feeds (None = every enabled feed).

    `role` names the process in health reports ("site", "feed:binance"); a restarted
    process with the same role takes over its predecessor's reports. `hubs` defaults to
    build_hubs(); pass your own to read what the startup tasks provide.
    """
    hubs = hubs or build_hubs()
    tasks = [_health_reporting(role), *feed_startup_tasks(hubs.feeds, feed_names)]
    tasks += redis_publisher_startup_tasks(hubs.feeds)
    tasks += processor_startup_tasks(hubs.feeds, hubs.processor, held_position=hubs.held_position)
    tasks += recovery_startup_tasks(hubs.auth_state)
    tasks += upstox_token_startup_tasks(hubs.feeds, hubs.auth_state)
    tasks += orders_startup_tasks(
        hubs.orders,
        fanout=hubs.feeds.fanout,
        signals=hubs.processor.signals,
        auth_state=hubs.auth_state,
        controls=hubs.controls,
    )
    tasks += risk_watch_startup_tasks(hubs.orders, fanout=hubs.feeds.fanout, halt_entries=_risk_halt(hubs))
    tasks += metrics_startup_tasks(hubs)
    if periodic_jobs:
        tasks.append(_periodic_jobs())
    return Runtime(tasks, stop_timeout_s=settings.RUNTIME_STOP_TIMEOUT_S)
