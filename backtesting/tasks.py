"""Celery tasks of the backtesting app: one-line wrappers of its services."""

from __future__ import annotations

from celery import shared_task

from backtesting import job_liveness, services, sweep_services
from core.jobs import periodic_job


@shared_task(name=services.EXECUTE_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
def backtest_run_execute(run_id: int) -> str:
    return services.backtest_run_execute(run_id=run_id)


@shared_task(name=sweep_services.EXECUTE_SWEEP_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
def backtest_sweep_execute(sweep_id: int) -> str:
    return sweep_services.backtest_sweep_execute(sweep_id=sweep_id)


@periodic_job("backtests-fail-stalled", every_s=30.0)
def backtests_fail_stalled() -> str:
    failed = job_liveness.fail_stalled_jobs()
    return f"failed {len(failed)} stalled: {', '.join(failed)}" if failed else "none stalled"
