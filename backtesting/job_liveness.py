"""A running backtest job says it is alive; one whose process died is failed, with the reason.

A run or a sweep is claimed (QUEUED to RUNNING) by the process that executes it: a Celery
worker, or a thread of the embedded site. While it runs, a thread of that process renews
the job's `heartbeat_at` every BACKTEST_HEARTBEAT_S. If the process is killed (SIGKILL,
an out-of-memory kill, a lost machine), nothing would ever finish the job: the
`backtests-fail-stalled` periodic job fails every running job whose heartbeat is older
than BACKTEST_STALL_AFTER_S, in one conditional statement per job (a heartbeat that lands
first keeps the job running), and pushes the new state to its owner's pages.

A job that finishes after all (its process was only stalled longer than the limit) still
stores its result: the work is valid, and the record ends as it ended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q

from backtesting.models import BacktestRun, BacktestSweep, RunStatus
from backtesting.push import progress_push, sweep_push
from core.log_throttle import FailureLog

log = logging.getLogger(__name__)


@contextmanager
def heartbeat(model: type[BacktestRun] | type[BacktestSweep], pk: int) -> Iterator[None]:
    """Renew the running job's heartbeat from a thread of its own while the block runs."""
    interval = float(settings.BACKTEST_HEARTBEAT_S)
    if interval <= 0:
        yield
        return
    stop = threading.Event()
    failures = FailureLog(log, f"backtesting: {model.__name__} {pk} heartbeat", interval_s=60.0)

    def beat() -> None:
        try:
            while not stop.wait(interval):
                try:
                    model.objects.filter(pk=pk, status=RunStatus.RUNNING).update(heartbeat_at=datetime.now(UTC))
                except Exception as exc:  # the database's own alarm; a missed beat is harmless
                    failures.failed(exc)
                else:
                    failures.succeeded("beating again")
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"heartbeat-{model.__name__}-{pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 5)


def _stalled(cutoff: datetime) -> Q:
    # A job claimed before heartbeats existed has none: its start time stands in.
    return Q(status=RunStatus.RUNNING) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )


def fail_stalled_jobs(*, now: datetime | None = None) -> list[str]:
    """Fail every running run and sweep whose heartbeat stopped; what was failed, one line each."""
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(seconds=float(settings.BACKTEST_STALL_AFTER_S))
    failed: list[str] = []
    for model in (BacktestRun, BacktestSweep):
        for pk in model.objects.filter(_stalled(cutoff)).values_list("pk", flat=True):
            if fail_if_stalled(model, pk, cutoff=cutoff, now=now):
                failed.append(f"{model.__name__} {pk}")
    return failed


def fail_if_stalled(
    model: type[BacktestRun] | type[BacktestSweep], pk: int, *, cutoff: datetime, now: datetime
) -> bool:
    """Fail the job if it is still running without a heartbeat since `cutoff`; push its new state."""
    job = model.objects.filter(pk=pk).only("heartbeat_at", "started_at").first()
    if job is None:
        return False
    last = job.heartbeat_at or job.started_at
    since = f"{last:%Y-%m-%d %H:%M:%S} UTC" if last else "it was claimed"
    error = f"stopped: the process running it sent no heartbeat since {since} (killed or lost); start it again"
    # One statement: a heartbeat that landed since the job was listed keeps it running.
    if not model.objects.filter(_stalled(cutoff), pk=pk).update(status=RunStatus.FAILED, error=error, finished_at=now):
        return False
    job = model.objects.get(pk=pk)
    log.warning("backtesting: %s %s %s", model.__name__, pk, error)
    if isinstance(job, BacktestRun):
        progress_push(job)
    else:
        sweep_push(job)
    return True
