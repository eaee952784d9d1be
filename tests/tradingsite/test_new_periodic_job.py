"""Adding a periodic job, as docs/extending.md says: a task with @periodic_job plus its row in tradingsite.schedule.PERIODIC_JOBS."""
from __future__ import annotations

import pytest
from django.utils.module_loading import import_string

from core import schedule
from tradingsite.celery import app as celery_app
from core.jobs import periodic_job
from core.models import ComponentHealth
from core.schedule import PeriodicJob, beat_schedule, job_interval_s, job_named

THROWAWAY = PeriodicJob("throwaway-job", f"{__name__}.throwaway_job", 42.0)
runs: list[int] = []


@periodic_job(THROWAWAY.name)
def throwaway_job() -> str:
    runs.append(1)
    return f"{len(runs)} run(s)"


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> PeriodicJob:
    monkeypatch.setattr(schedule, "_installed", (*schedule.periodic_jobs(), THROWAWAY))
    return THROWAWAY


@pytest.mark.django_db
def test_a_declared_job_is_scheduled_by_beat_and_runs_as_the_same_task_with_its_health(declared: PeriodicJob) -> None:
    assert beat_schedule()["throwaway-job"] == {"task": declared.task, "schedule": 42.0}
    assert declared.task in celery_app.tasks  # the name Celery beat sends and the worker runs
    task = import_string(declared.task)  # what the embedded runner calls
    assert task.name == declared.task
    assert task() == "1 run(s)"
    health = ComponentHealth.objects.get(component="job:throwaway-job")
    assert health.status == "HEALTHY" and health.reason.startswith("last run ok")
    assert health.stale_after_s == pytest.approx(2 * job_interval_s(job_named("throwaway-job")))


def test_the_operator_override_applies_to_it(declared: PeriodicJob, settings) -> None:
    settings.PERIODIC_JOB_INTERVALS = {"throwaway-job": 7.0}
    assert beat_schedule()["throwaway-job"]["schedule"] == 7.0
