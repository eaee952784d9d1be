"""Celery tasks of the backtesting app: one-line wrappers of its services."""

from __future__ import annotations

from celery import shared_task

from backtesting import services, sweep_services


@shared_task(name=services.EXECUTE_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
def backtest_run_execute(run_id: int) -> str:
    return services.backtest_run_execute(run_id=run_id)


@shared_task(name=sweep_services.EXECUTE_SWEEP_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
def backtest_sweep_execute(sweep_id: int) -> str:
    return sweep_services.backtest_sweep_execute(sweep_id=sweep_id)
