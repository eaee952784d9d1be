"""Write paths of sweeps started from the browser or the API: create, start, execute.

As for a run: one writer per sweep (its execution), claimed by one statement (queued ->
running) so a task delivered twice runs it once; a Celery task sent by name, or a
background thread of the web process in the embedded default. The recorded ticks are
written once to a tick CSV in a temporary directory, which every worker process reads
(backtesting.sweep.run_sweep); the sweep's points are spread over `workers` processes.
A Celery prefork worker is a daemonic process, which may not start children: there the
points run one after another in the worker itself, and the sweep records 1 process.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from celery import current_app
from django.conf import settings as django_settings
from django.db import connection, transaction

from backtesting.job_liveness import heartbeat
from backtesting.models import BacktestSweep, RunStatus
from backtesting.push import sweep_push, web_event_loop
from backtesting.services import RunRequest, simulated_settings_of
from backtesting.sweep import SweepResult, grid_points, ranked, result_as_json, run_sweep
from backtesting.sweep_optimize import optimize
from backtesting.tick_sources import TickSourceError, recorded_batches
from feeds.market import MarketData
from feeds.venues.tick_csv import HEADER, frame_from_tick

log = logging.getLogger(__name__)
EXECUTE_SWEEP_TASK = "backtesting.backtest_sweep_execute"
PROGRESS_INTERVAL_S = 0.25
MAX_WORKERS = 8


@dataclass(frozen=True)
class SweepRequest:
    """A validated sweep: the run's terms (params are the fixed ones) and the grid."""

    run: RunRequest
    grid: dict[str, Any]
    metric: str
    workers: int
    trials: int | None = None  # set: an optimizer sweep, `grid` being its search space
    seed: int = 0


def backtest_sweep_create(*, owner: Any, request: SweepRequest) -> BacktestSweep:
    """Store a queued sweep for `owner` and start it once the row is committed."""
    run = request.run
    sweep = BacktestSweep.objects.create(
        owner=owner,
        kind=run.kind,
        params=run.params,
        grid=request.grid,
        trials=request.trials,
        seed=request.seed,
        metric=request.metric,
        workers=request.workers,
        feed=run.feed,
        symbols=run.symbols,
        start_ns=run.start_ns,
        end_ns=run.end_ns,
        capital=run.capital,
        quantity=run.quantity,
        lot_size=run.lot_size,
        tick_size=run.tick_size,
        order_type=run.order_type,
        reversal=run.reversal,
        taker_bps=run.taker_bps,
        maker_bps=run.maker_bps,
        latency_ms=run.latency_ms,
        **run.risk_fields(),
        points_total=request.trials or len(grid_points(run.params, request.grid)),
    )
    transaction.on_commit(lambda: backtest_sweep_start(sweep_id=sweep.pk))
    return sweep


def backtest_sweep_start(*, sweep_id: int) -> None:
    """Hand the sweep to a Celery worker; without a broker (eager tasks) to a background thread."""
    if django_settings.CELERY_TASK_ALWAYS_EAGER:
        threading.Thread(
            target=backtest_sweep_in_thread,
            kwargs={"sweep_id": sweep_id, "push_loop": web_event_loop()},
            name=f"backtest-sweep-{sweep_id}",
            daemon=True,
        ).start()
        return
    current_app.send_task(EXECUTE_SWEEP_TASK, args=[sweep_id])


def backtest_sweep_in_thread(*, sweep_id: int, push_loop: asyncio.AbstractEventLoop | None = None) -> str:
    try:
        return backtest_sweep_execute(sweep_id=sweep_id, push_loop=push_loop)
    finally:
        connection.close()


def _write_tape(sweep: BacktestSweep, path: Path) -> int:
    count = 0
    with path.open("wb") as out:
        out.write(HEADER.encode() + b"\n")
        for batch in recorded_batches(sweep.feed, sweep.symbols, sweep.start_ns, sweep.end_ns, 1024):
            for event in batch.events:
                if isinstance(event, MarketData):
                    out.write(frame_from_tick(event) + b"\n")
                    count += 1
    return count


class _Progress:
    def __init__(self, sweep: BacktestSweep, push_loop: asyncio.AbstractEventLoop | None) -> None:
        self.sweep = sweep
        self.push_loop = push_loop
        self.saved_at = time.monotonic()

    def __call__(self, result: SweepResult) -> None:
        self.sweep.points_done += 1
        if time.monotonic() - self.saved_at >= PROGRESS_INTERVAL_S:
            self.saved_at = time.monotonic()
            BacktestSweep.objects.filter(pk=self.sweep.pk).update(points_done=self.sweep.points_done)
            sweep_push(self.sweep, loop=self.push_loop)


def backtest_sweep_execute(*, sweep_id: int, push_loop: asyncio.AbstractEventLoop | None = None) -> str:
    """Run a queued sweep to its end, saving progress and the ranked results; a failure is stored, never raised."""
    claimed_at = datetime.now(UTC)
    claimed = BacktestSweep.objects.filter(pk=sweep_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=claimed_at, heartbeat_at=claimed_at
    )
    if not claimed:
        return f"backtest sweep {sweep_id}: not queued, nothing to do"
    with heartbeat(BacktestSweep, sweep_id):
        return _execute(BacktestSweep.objects.get(pk=sweep_id), push_loop)


def _execute(sweep: BacktestSweep, push_loop: asyncio.AbstractEventLoop | None) -> str:
    sweep_id = sweep.pk
    workers = min(sweep.workers, MAX_WORKERS)
    if workers > 1 and multiprocessing.current_process().daemon:
        log.info("backtesting: sweep %s runs in this daemonic worker process, one point after another", sweep_id)
        workers = sweep.workers = 1
        BacktestSweep.objects.filter(pk=sweep.pk).update(workers=1)
    sweep_push(sweep, loop=push_loop)
    try:
        points = [] if sweep.trials else grid_points(sweep.params, sweep.grid)
        with tempfile.TemporaryDirectory(prefix="sweep-") as folder:
            tape = Path(folder) / "ticks.csv"
            sweep.ticks = _write_tape(sweep, tape)
            BacktestSweep.objects.filter(pk=sweep.pk).update(ticks=sweep.ticks)
            settings, progress = simulated_settings_of(sweep), _Progress(sweep, push_loop)
            if sweep.trials:
                results = optimize(
                    kind=sweep.kind,
                    base=sweep.params,
                    space=sweep.grid,
                    trials=sweep.trials,
                    metric=sweep.metric,
                    seed=sweep.seed,
                    ticks=str(tape),
                    settings=settings,
                    workers=workers,
                    on_result=progress,
                )
            else:
                results = run_sweep(
                    kind=sweep.kind,
                    points=points,
                    ticks=str(tape),
                    settings=settings,
                    workers=workers,
                    on_result=progress,
                )
    except (TickSourceError, ValueError) as exc:
        return _finish_failed(sweep, str(exc), push_loop)
    except Exception as exc:  # a sweep's bug must not kill the worker; the sweep says what happened
        log.exception("backtesting: sweep %s failed", sweep_id)
        return _finish_failed(sweep, f"{type(exc).__name__}: {exc}", push_loop)
    sweep.results = [result_as_json(result) for result in ranked(results, sweep.metric)]
    sweep.points_done = len(results)
    sweep.status = RunStatus.DONE
    sweep.finished_at = datetime.now(UTC)
    sweep.save(update_fields=["results", "points_done", "status", "finished_at"])
    sweep_push(sweep, loop=push_loop)
    return f"backtest sweep {sweep_id}: {len(results)} points over {sweep.ticks} ticks"


def _finish_failed(sweep: BacktestSweep, error: str, push_loop: asyncio.AbstractEventLoop | None) -> str:
    sweep.status = RunStatus.FAILED
    sweep.error = error[:2000]
    sweep.finished_at = datetime.now(UTC)
    sweep.save(update_fields=["status", "error", "points_done", "finished_at"])
    sweep_push(sweep, loop=push_loop)
    return f"backtest sweep {sweep.pk}: failed: {sweep.error}"
