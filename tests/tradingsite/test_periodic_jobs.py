"""Periodic jobs: one schedule, run in-process (embedded) or by Celery beat + worker (scale-out)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import OperationalError, connection
from django.utils import timezone

from core.models import ComponentHealth
from core.runtime.periodic import _finish_when_cancelled, run_periodic_job
from core.schedule import beat_schedule, job_named, periodic_jobs
from tests.helpers import async_eventually, eventually
from tradingsite.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]


def make_sessions() -> tuple[str, str]:
    expired, live = SessionStore(), SessionStore()
    expired.create()
    live.create()
    Session.objects.filter(session_key=expired.session_key).update(expire_date=timezone.now() - timedelta(days=1))
    return expired.session_key, live.session_key


def test_celery_beat_schedule_is_every_declared_job() -> None:
    declared = {job.name: (job.task, job.every_s) for job in periodic_jobs()}
    assert declared == {
        "clear-expired-sessions": ("tradingsite.tasks.clear_expired_sessions", 3600.0),
        "prune-component-health": ("tradingsite.tasks.prune_component_health", 600.0),
        "recovery-token-expiry": ("recovery.tasks.expire_broker_tokens", 60.0),
        "refresh-instrument-metadata": ("feeds.tasks.instrument_metadata_refresh", 3600.0),
        "orders-reconcile": ("orders.tasks.reconcile_accounts", 10.0),
        "alerts-collect": ("alerts.tasks.collect_alerts", 5.0),
        "alerts-deliver": ("alerts.tasks.deliver_alerts", 5.0),
        "backtests-fail-stalled": ("backtesting.tasks.backtests_fail_stalled", 30.0),
    }
    assert beat_schedule() == {job.name: {"task": job.task, "schedule": job.every_s} for job in periodic_jobs()}
    # Beat reads the schedule from the database (seeded from these jobs), not from the config.
    assert celery_app.conf.beat_schedule == {}
    assert celery_app.conf.beat_scheduler == "tradingsite.beat_scheduler:LeasedDatabaseScheduler"
    celery_app.loader.import_default_modules()  # what a worker does at start: autodiscovery
    for job in periodic_jobs():
        assert job.task in celery_app.tasks, f"{job.task} is not a registered Celery task"


def test_operator_can_override_a_cadence(settings) -> None:
    settings.PERIODIC_JOB_INTERVALS = {"clear-expired-sessions": 5.0}
    assert beat_schedule()["clear-expired-sessions"]["schedule"] == 5.0


@pytest.mark.django_db(transaction=True)
async def test_embedded_runner_calls_the_same_task_on_its_cadence_and_records_the_run(settings) -> None:
    from channels.db import database_sync_to_async

    settings.PERIODIC_JOB_INTERVALS = {"clear-expired-sessions": 0.05}
    expired, live = await database_sync_to_async(make_sessions)()
    runner = asyncio.create_task(run_periodic_job(job_named("clear-expired-sessions")))
    try:

        async def cleared() -> bool:
            try:
                return not await Session.objects.filter(session_key=expired).aexists()
            except OperationalError:  # SQLite's shared in-memory test database: the job's thread holds the table
                return False

        await async_eventually(cleared, timeout_s=10)
    finally:
        runner.cancel()
        # Cancelling waits for a run in progress to finish (its thread cannot be stopped).
        await asyncio.gather(runner, return_exceptions=True)
    assert runner.cancelled()
    assert await Session.objects.filter(session_key=live).aexists()
    health = await ComponentHealth.objects.aget(component="job:clear-expired-sessions")
    assert health.status == "HEALTHY" and health.reason.startswith("last run ok")
    assert health.stale_status == "DEGRADED" and health.stale_after_s == pytest.approx(0.1)


@pytest.mark.django_db
def test_a_failing_job_is_recorded_degraded_and_raises(monkeypatch) -> None:
    from tradingsite import services, tasks

    def broken(**kwargs: object) -> int:
        raise RuntimeError("disk full")

    monkeypatch.setattr(services, "sessions_clear_expired", broken)
    with pytest.raises(RuntimeError):
        tasks.clear_expired_sessions()
    health = ComponentHealth.objects.get(component="job:clear-expired-sessions")
    assert health.status == "DEGRADED" and "disk full" in health.reason


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.mark.needs_postgres
@pytest.mark.needs_redis
@pytest.mark.django_db(transaction=True)
def test_celery_beat_and_a_real_worker_run_the_periodic_job_over_redis(tmp_path: Path) -> None:
    expired, live = make_sessions()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),  # the test database, so the test sees the worker's effect
        "VAR_DIR": str(tmp_path),
        "CELERY_QUEUE": f"test-{uuid.uuid4().hex[:8]}",  # nobody else's worker can take it
        "PERIODIC_JOB_INTERVALS": "clear-expired-sessions=1,prune-component-health=3600",
    }
    common = [sys.executable, "-m", "celery", "-A", "tradingsite"]
    worker = subprocess.Popen(
        [*common, "worker", "--pool", "solo", "--loglevel", "INFO", "--without-mingle", "--without-gossip"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    beat = subprocess.Popen(
        [*common, "beat", "--loglevel", "INFO", "--max-interval", "1", "--schedule", str(tmp_path / "beat-schedule")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    outputs: list[str] = []
    try:
        eventually(lambda: not Session.objects.filter(session_key=expired).exists(), timeout_s=60, interval_s=0.25)
        assert Session.objects.filter(session_key=live).exists()
        health = eventually(lambda: ComponentHealth.objects.filter(component="job:clear-expired-sessions").first())
        assert health.status == "HEALTHY"
    finally:
        for process in (beat, worker):
            process.terminate()
            try:
                outputs.append(process.communicate(timeout=20)[0])
            except subprocess.TimeoutExpired:
                process.kill()
                outputs.append(process.communicate()[0])
        print("beat:", outputs[0], "worker:", outputs[1], sep="\n")
    assert "tradingsite.tasks.clear_expired_sessions" in outputs[1], outputs[1]


async def test_a_cancelled_run_lets_its_thread_finish_first() -> None:
    from asgiref.sync import sync_to_async

    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def work() -> None:
        started.set()
        release.wait(5)
        finished.append(True)

    task = asyncio.create_task(_finish_when_cancelled(sync_to_async(work, thread_sensitive=False)()))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    await asyncio.sleep(0.05)
    task.cancel()  # the runtime cancels again while it waits
    await asyncio.sleep(0.05)
    assert not task.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [True]
