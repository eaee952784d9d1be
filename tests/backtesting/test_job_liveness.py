"""A backtest run or sweep whose process died is failed with the reason, never left running.

The process running a job renews its heartbeat from a thread; the stalled-jobs job fails a
running job whose heartbeat is older than BACKTEST_STALL_AFTER_S. On PostgreSQL a real
process runs a real run and is SIGKILLed, beside one that keeps beating and finishes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from backtesting import job_liveness
from backtesting.job_liveness import fail_if_stalled, fail_stalled_jobs, heartbeat
from backtesting.models import BacktestRun, BacktestSweep, RunStatus
from tests.backtesting.factories import START_NS, queued_run, record_walk_ticks
from tests.backtesting.test_sweep_runs import queued_sweep
from tests.orders.factories import make_instrument

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def trader() -> Any:
    return get_user_model().objects.create_user("trader", password="pw-long-enough-123")


@pytest.fixture
def pushed(monkeypatch) -> list[tuple[str, int, str]]:
    seen: list[tuple[str, int, str]] = []
    monkeypatch.setattr(job_liveness, "progress_push", lambda run: seen.append(("run", run.pk, run.status)))
    monkeypatch.setattr(job_liveness, "sweep_push", lambda sweep: seen.append(("sweep", sweep.pk, sweep.status)))
    return seen


@pytest.mark.django_db
def test_running_jobs_without_a_recent_heartbeat_are_failed_with_the_reason_and_pushed(
    settings, trader, pushed
) -> None:
    settings.BACKTEST_STALL_AFTER_S = 60
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    instrument = make_instrument()
    old, fresh = now - timedelta(seconds=61), now - timedelta(seconds=59)
    dead = queued_run(trader, instrument)
    alive = queued_run(trader, instrument)
    legacy = queued_run(trader, instrument)  # claimed before heartbeats existed
    waiting = queued_run(trader, instrument)
    done = queued_run(trader, instrument)
    BacktestRun.objects.filter(pk=dead.pk).update(status=RunStatus.RUNNING, started_at=old, heartbeat_at=old)
    BacktestRun.objects.filter(pk=alive.pk).update(status=RunStatus.RUNNING, started_at=old, heartbeat_at=fresh)
    BacktestRun.objects.filter(pk=legacy.pk).update(status=RunStatus.RUNNING, started_at=old, heartbeat_at=None)
    BacktestRun.objects.filter(pk=waiting.pk).update(created_at=old)
    BacktestRun.objects.filter(pk=done.pk).update(status=RunStatus.DONE, started_at=old, heartbeat_at=old)
    sweep = queued_sweep(trader, instrument)
    BacktestSweep.objects.filter(pk=sweep.pk).update(status=RunStatus.RUNNING, started_at=old, heartbeat_at=old)

    failed = fail_stalled_jobs(now=now)

    assert sorted(failed) == sorted([f"BacktestRun {dead.pk}", f"BacktestRun {legacy.pk}", f"BacktestSweep {sweep.pk}"])
    states = dict(BacktestRun.objects.values_list("pk", "status"))
    assert states == {
        dead.pk: RunStatus.FAILED,
        alive.pk: RunStatus.RUNNING,
        legacy.pk: RunStatus.FAILED,
        waiting.pk: RunStatus.QUEUED,
        done.pk: RunStatus.DONE,
    }
    dead.refresh_from_db()
    assert "no heartbeat since 2026-12-03 11:58:59 UTC" in dead.error and "start it again" in dead.error
    assert dead.finished_at == now
    assert BacktestSweep.objects.get(pk=sweep.pk).status == RunStatus.FAILED
    assert sorted(pushed) == sorted(
        [("run", dead.pk, "failed"), ("run", legacy.pk, "failed"), ("sweep", sweep.pk, "failed")]
    )
    assert fail_stalled_jobs(now=now) == []  # once: a failed job is not failed again


@pytest.mark.django_db
def test_a_heartbeat_that_lands_after_the_job_was_listed_keeps_it_running(settings, trader, pushed) -> None:
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    run = queued_run(trader, make_instrument())
    stale = now - timedelta(seconds=600)
    BacktestRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=stale, heartbeat_at=stale)
    listed = list(BacktestRun.objects.filter(job_liveness._stalled(now - timedelta(seconds=60))))
    assert [job.pk for job in listed] == [run.pk]
    BacktestRun.objects.filter(pk=run.pk).update(heartbeat_at=now)  # the beat lands between the list and the update
    assert not fail_if_stalled(BacktestRun, run.pk, cutoff=now - timedelta(seconds=60), now=now)
    assert BacktestRun.objects.get(pk=run.pk).status == RunStatus.RUNNING and pushed == []


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_renews_a_running_job_and_stops_with_its_block(settings, trader) -> None:
    settings.BACKTEST_HEARTBEAT_S = 0.05
    run = queued_run(trader, make_instrument())
    claimed = datetime.now(UTC) - timedelta(hours=1)
    BacktestRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=claimed, heartbeat_at=claimed)
    with heartbeat(BacktestRun, run.pk):
        deadline = time.monotonic() + 10
        while BacktestRun.objects.get(pk=run.pk).heartbeat_at == claimed and time.monotonic() < deadline:
            time.sleep(0.02)
        first = BacktestRun.objects.get(pk=run.pk).heartbeat_at
        assert first > claimed
        time.sleep(0.2)
        assert BacktestRun.objects.get(pk=run.pk).heartbeat_at > first
    ended = BacktestRun.objects.get(pk=run.pk).heartbeat_at
    time.sleep(0.2)
    assert BacktestRun.objects.get(pk=run.pk).heartbeat_at == ended  # the thread is gone


_RUNNER = """
import asyncio, os, sys
sys.path.insert(0, {root!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "tradingsite.settings"
import django
django.setup()
from backtesting import services
hold_s = float(sys.argv[2])
replay = services.run_filled_backtest
async def held(**arguments):  # a long run: the replay starts after hold_s
    await asyncio.sleep(hold_s)
    return await replay(**arguments)
services.run_filled_backtest = held
print(services.backtest_run_execute(run_id=int(sys.argv[1])), flush=True)
"""


def _database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _start_run(run_id: int, hold_s: float) -> subprocess.Popen[str]:
    environment = {
        key: value for key, value in os.environ.items() if key not in {"REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    environment |= {"DATABASE_URL": _database_url(), "BACKTEST_HEARTBEAT_S": "0.2", "BACKTEST_STALL_AFTER_S": "1.5"}
    return subprocess.Popen(
        [sys.executable, "-c", _RUNNER.format(root=str(ROOT)), str(run_id), str(hold_s)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(what: str, condition: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_a_sigkilled_runner_leaves_a_failed_run_and_a_live_one_finishes(settings, trader) -> None:
    settings.BACKTEST_STALL_AFTER_S = 1.5
    instrument = record_walk_ticks()
    params = {"kind": "ema", "params": {"timeframe_s": 30, "fast": 3, "slow": 8}, "end_ns": START_NS + 3_600 * 10**9}
    doomed = queued_run(trader, instrument, **params)
    survivor = queued_run(trader, instrument, **params)
    killed = _start_run(doomed.pk, hold_s=120)
    living = _start_run(survivor.pk, hold_s=4)
    try:
        for run in (doomed, survivor):  # each claimed, and beating
            _wait_for(
                f"run {run.pk} to beat",
                lambda run=run: BacktestRun.objects.filter(
                    pk=run.pk, status=RunStatus.RUNNING, heartbeat_at__gt=datetime.now(UTC) - timedelta(seconds=0.5)
                ).exists(),
            )
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
        time.sleep(2.0)  # past the stall limit for the killed one; the living one beats on
        assert fail_stalled_jobs() == [f"BacktestRun {doomed.pk}"]
        doomed.refresh_from_db()
        assert doomed.status == RunStatus.FAILED and "no heartbeat" in doomed.error
        output, errors = living.communicate(timeout=60)
        assert living.returncode == 0, errors
        survivor.refresh_from_db()
        assert survivor.status == RunStatus.DONE and survivor.report["trades"] > 0, (output, errors)
    finally:
        for process in (killed, living):
            if process.poll() is None:
                process.kill()
                process.wait(10)
