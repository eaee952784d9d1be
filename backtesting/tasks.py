"""Celery tasks of the backtesting app: one-line wrappers of its services."""

from __future__ import annotations

from celery import shared_task

from backtesting import services


@shared_task(name=services.EXECUTE_TASK, ignore_result=True)  # type: ignore[untyped-decorator]
def backtest_run_execute(run_id: int) -> str:
    return services.backtest_run_execute(run_id=run_id)
