"""Write paths of backtest runs: create, start (a Celery task, or a thread in the embedded default), execute.

One writer per run: after creation, only the run's execution changes its status,
progress and result; a run is claimed by one statement (queued -> running), so a
task delivered twice runs it once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from celery import current_app
from django.conf import settings as django_settings
from django.db import connection, transaction

from backtesting.job_liveness import heartbeat
from backtesting.models import BacktestRun, BacktestSweep, RunStatus
from backtesting.push import progress_push, web_event_loop
from backtesting.runner import run_filled_backtest
from backtesting.simulated_account import SimulatedSettings, risk_events_as_json
from backtesting.tick_sources import TickSourceError, read_in_thread, recorded_batches, recorded_tick_count
from feeds.market import parse_fixed
from orders.brokers.paper import PaperFees
from orders.risk_limits import AccountLimits, ExitLevels
from processor.backtest import BacktestError
from processor.backtest_report import report_as_json

log = logging.getLogger(__name__)
# The Celery task that executes a run (backtesting.tasks).
EXECUTE_TASK = "backtesting.backtest_run_execute"

BATCH_TICKS = 256
# Progress is saved and pushed at most this often (and once at the end).
PROGRESS_INTERVAL_S = 0.25


@dataclass(frozen=True)
class RunRequest:
    """A validated request for a run (from the form or the API serializer)."""

    kind: str
    params: dict[str, Any]
    feed: str
    symbols: list[str]
    start_ns: int
    end_ns: int
    capital: Decimal
    quantity: Decimal
    lot_size: Decimal
    tick_size: Decimal
    order_type: str
    reversal: str
    taker_bps: int
    maker_bps: int
    latency_ms: int
    stop_loss_pct: Decimal | None = None
    take_profit_pct: Decimal | None = None
    trailing_stop_pct: Decimal | None = None
    max_open_positions: int | None = None
    daily_loss_limit: Decimal | None = None

    def risk_fields(self) -> dict[str, Any]:
        """The exit levels and account limits, by their model field names."""
        return {name: getattr(self, name) for name in RISK_FIELDS}


STORED_RISK_EVENTS = 1_000  # a run's report keeps the first ones; the counts cover all of them
RISK_FIELDS = ("stop_loss_pct", "take_profit_pct", "trailing_stop_pct", "max_open_positions", "daily_loss_limit")


def backtest_run_create(*, owner: Any, request: RunRequest) -> BacktestRun:
    """Store a queued run for `owner` and start it once the row is committed."""
    run = BacktestRun.objects.create(
        owner=owner,
        kind=request.kind,
        params=request.params,
        feed=request.feed,
        symbols=request.symbols,
        start_ns=request.start_ns,
        end_ns=request.end_ns,
        capital=request.capital,
        quantity=request.quantity,
        lot_size=request.lot_size,
        tick_size=request.tick_size,
        order_type=request.order_type,
        reversal=request.reversal,
        taker_bps=request.taker_bps,
        maker_bps=request.maker_bps,
        latency_ms=request.latency_ms,
        **request.risk_fields(),
    )
    transaction.on_commit(lambda: backtest_run_start(run_id=run.pk))
    return run


def backtest_run_start(*, run_id: int) -> None:
    """Hand the run to a Celery worker; without a broker (eager tasks) to a background thread, so the request returns."""
    if django_settings.CELERY_TASK_ALWAYS_EAGER:
        threading.Thread(
            target=backtest_run_in_thread,
            kwargs={"run_id": run_id, "push_loop": web_event_loop()},
            name=f"backtest-run-{run_id}",
            daemon=True,
        ).start()
        return
    # Sent by name: the task module wraps this one, so importing it here would close a loop.
    current_app.send_task(EXECUTE_TASK, args=[run_id])


def backtest_run_in_thread(*, run_id: int, push_loop: asyncio.AbstractEventLoop | None = None) -> str:
    """Execute the run in the calling (non-request) thread, closing its database connection afterwards."""
    try:
        return backtest_run_execute(run_id=run_id, push_loop=push_loop)
    finally:
        connection.close()


def _fixed(value: Decimal) -> int:
    return parse_fixed(format(value, "f"))


def simulated_settings_of(run: BacktestRun | BacktestSweep) -> SimulatedSettings:
    return SimulatedSettings(
        capital=_fixed(run.capital),
        quantity=_fixed(run.quantity),
        lot_size=_fixed(run.lot_size),
        tick_size=_fixed(run.tick_size),
        order_type=run.order_type,
        reversal=run.reversal,
        fees=PaperFees(taker_bps=run.taker_bps, maker_bps=run.maker_bps),
        latency_ns=run.latency_ms * 1_000_000,
        exit_levels=ExitLevels.from_percent(run.stop_loss_pct, run.take_profit_pct, run.trailing_stop_pct),
        limits=AccountLimits(
            max_open_positions=run.max_open_positions,
            daily_loss_limit=None if run.daily_loss_limit is None else _fixed(run.daily_loss_limit),
        ),
    )


class _Progress:
    """Counts replayed ticks; saves and pushes the count at most every PROGRESS_INTERVAL_S."""

    def __init__(self, run: BacktestRun, push_loop: asyncio.AbstractEventLoop | None) -> None:
        self.run = run
        self.push_loop = push_loop
        self.saved_at = time.monotonic()

    def __call__(self, ticks: int) -> None:
        self.run.ticks_done += ticks
        if time.monotonic() - self.saved_at >= PROGRESS_INTERVAL_S:
            self.save()

    def save(self) -> None:
        self.saved_at = time.monotonic()
        BacktestRun.objects.filter(pk=self.run.pk).update(ticks_done=self.run.ticks_done)
        progress_push(self.run, loop=self.push_loop)


def backtest_run_execute(*, run_id: int, push_loop: asyncio.AbstractEventLoop | None = None) -> str:
    """Run a queued backtest to its end, saving progress and the report; a failure is stored, never raised.

    `push_loop`: the web process's event loop, for a run in a background thread there.
    """
    claimed_at = datetime.now(UTC)
    claimed = BacktestRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=claimed_at, heartbeat_at=claimed_at
    )
    if not claimed:
        return f"backtest run {run_id}: not queued, nothing to do"
    with heartbeat(BacktestRun, run_id):
        return _execute(BacktestRun.objects.get(pk=run_id), push_loop)


def _execute(run: BacktestRun, push_loop: asyncio.AbstractEventLoop | None) -> str:
    run_id = run.pk
    try:
        run.ticks_total = recorded_tick_count(run.feed, run.symbols, run.start_ns, run.end_ns)
        BacktestRun.objects.filter(pk=run.pk).update(ticks_total=run.ticks_total)
        progress_push(run, loop=push_loop)
        progress = _Progress(run, push_loop)
        batches = read_in_thread(
            lambda: recorded_batches(run.feed, run.symbols, run.start_ns, run.end_ns, BATCH_TICKS, on_batch=progress)
        )
        result = asyncio.run(
            run_filled_backtest(kind=run.kind, params=run.params, batches=batches, settings=simulated_settings_of(run))
        )
    except (TickSourceError, BacktestError, ValueError) as exc:
        return _finish_failed(run, str(exc), push_loop)
    except Exception as exc:  # a run's bug must not kill the worker; the run says what happened
        log.exception("backtesting: run %s failed", run_id)
        return _finish_failed(run, f"{type(exc).__name__}: {exc}", push_loop)
    run.report = (
        report_as_json(result.report)
        | {
            "signals": result.summary.signals,
            "ticks": result.summary.ticks,
            "outcomes": dict(sorted(result.account.outcomes.items())),
        }
        | risk_events_as_json(result.account.risk_events, limit=STORED_RISK_EVENTS)
    )
    run.signals = result.summary.signals
    run.ticks_done = result.summary.ticks
    # The count taken at the start misses ticks the recorder wrote into the range since (a
    # range ending now, or late prints): the run replayed them, so the total is what it read.
    run.ticks_total = max(run.ticks_total, run.ticks_done)
    run.status = RunStatus.DONE
    run.finished_at = datetime.now(UTC)
    run.save(update_fields=["report", "signals", "ticks_done", "ticks_total", "status", "finished_at"])
    progress_push(run, loop=push_loop)
    return f"backtest run {run_id}: {result.summary.ticks} ticks, {result.report.trades} trades"


def _finish_failed(run: BacktestRun, error: str, push_loop: asyncio.AbstractEventLoop | None) -> str:
    run.status = RunStatus.FAILED
    run.error = error[:2000]
    run.finished_at = datetime.now(UTC)
    run.save(update_fields=["status", "error", "ticks_done", "finished_at"])
    progress_push(run, loop=push_loop)
    return f"backtest run {run.pk}: failed: {run.error}"
