"""Backtest runs: the Celery task function, the in-process job, progress, failures stored, candles."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from backtesting import tasks
from backtesting.models import BacktestRun, RunStatus
from backtesting.selectors import run_candles
from backtesting.services import backtest_run_create, backtest_run_execute
from tests.backtesting.factories import START, START_NS, queued_run, record_flipping_ticks, run_request

pytestmark = pytest.mark.django_db(transaction=True)  # the ticks are read by a thread of its own


@pytest.fixture
def trader():
    return get_user_model().objects.create_user("trader", password="pw-long-enough-123")


def test_the_celery_task_runs_a_queued_run_to_a_stored_report(trader) -> None:
    run = queued_run(trader, record_flipping_ticks())
    assert "240 ticks" in tasks.backtest_run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert (run.ticks_done, run.ticks_total) == (240, 240)
    assert run.progress == 1.0
    assert run.report["trades"] > 0
    assert run.report["trades"] == len(run.report["closed_trades"])
    assert run.report["starting_capital"] == "10000"
    assert run.signals == run.report["signals"] > 0
    assert run.started_at and run.finished_at


def test_a_run_is_executed_once_even_when_its_task_is_delivered_twice(trader) -> None:
    run = queued_run(trader, record_flipping_ticks())
    backtest_run_execute(run_id=run.pk)
    finished_at = BacktestRun.objects.get(pk=run.pk).finished_at
    assert "not queued" in backtest_run_execute(run_id=run.pk)
    assert BacktestRun.objects.get(pk=run.pk).finished_at == finished_at


def test_a_run_over_an_instrument_without_ticks_records_the_failure_and_does_not_raise(trader) -> None:
    run = queued_run(trader, record_flipping_ticks(), symbols=["NOPE"])
    assert "failed" in backtest_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "NOPE" in run.error
    assert run.report is None


def test_in_the_embedded_default_a_created_run_runs_in_a_background_thread(trader, settings, held_threads) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    run = backtest_run_create(owner=trader, request=run_request(record_flipping_ticks()))
    assert held_threads.finish() == [f"backtest-run-{run.pk}"]
    done = BacktestRun.objects.get(pk=run.pk, status=RunStatus.DONE)
    assert done.ticks_done == 240
    assert done.report["trades"] > 0


def test_the_trades_match_the_backtest_command_over_the_same_recorded_ticks(trader) -> None:
    instrument = record_flipping_ticks()
    run = queued_run(trader, instrument)
    backtest_run_execute(run_id=run.pk)
    run.refresh_from_db()
    out = io.StringIO()
    call_command(
        "backtest",
        "--strategy=volume_breakout",
        f"--params={json.dumps(run.params)}",
        f"--feed={instrument.feed.name}",
        f"--symbol={instrument.symbol}",
        f"--from={START.isoformat()}",
        f"--to={START.replace(minute=2).isoformat()}",
        "--report=json",
        "--quantity=1",
        f"--lot-size={instrument.lot_size}",
        f"--tick-size={instrument.tick_size}",
        "--taker-bps=5",
        "--maker-bps=2",
        stdout=out,
        stderr=io.StringIO(),
    )
    command = json.loads(out.getvalue())
    assert command["closed_trades"] == run.report["closed_trades"]
    assert command["pnl"] == run.report["pnl"]


def test_candles_of_a_run_bucket_its_recorded_ticks(trader) -> None:
    instrument = record_flipping_ticks()
    run = queued_run(trader, instrument)  # 120 s: one-second candles of four ticks each
    candles = run_candles(run, instrument.venue_symbol)
    assert len(candles) == 60
    assert candles[0] == {"time": START_NS // 1_000_000_000, "open": 100.0, "high": 100.0, "low": 100.0, "close": 100.0}
    assert candles[3] | {"time": 0} == {"time": 0, "open": 101.0, "high": 101.0, "low": 101.0, "close": 101.0}
    assert run_candles(run, "NOPE") == []


def test_the_run_is_sent_by_the_name_its_celery_task_is_registered_under() -> None:
    from celery import current_app

    import backtesting.tasks  # noqa: F401  (registers the task, as the worker does)
    from backtesting.services import EXECUTE_TASK

    assert current_app.tasks[EXECUTE_TASK].name == EXECUTE_TASK
