"""Adding a periodic job, as docs/extending.md says: one decorated task that declares its name and cadence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils.module_loading import import_string

from core.jobs import periodic_job
from core.models import ComponentHealth
from core.schedule import (
    DuplicateJobError,
    PeriodicJob,
    beat_schedule,
    job_interval_s,
    job_named,
    periodic_jobs,
    register_periodic_job,
    unregister_periodic_job,
)
from tradingsite.celery import app as celery_app

runs: list[int] = []


def throwaway_job() -> str:
    runs.append(1)
    return f"{len(runs)} run(s)"


THROWAWAY = PeriodicJob("throwaway-job", f"{__name__}.throwaway_job", 42.0)


@pytest.fixture
def declared() -> Iterator[PeriodicJob]:
    # Declared here rather than at import, so the other schedule tests see only the site's jobs.
    global throwaway_job
    assert "throwaway-job" not in celery_app.conf.beat_schedule  # beat's schedule is read once, before this job
    if THROWAWAY.task in celery_app.tasks:  # decorated by an earlier test: the task exists, declare it again
        register_periodic_job(THROWAWAY)
    else:
        throwaway_job = periodic_job("throwaway-job", every_s=42.0)(throwaway_job)  # type: ignore[assignment]
    try:
        yield job_named("throwaway-job")
    finally:
        unregister_periodic_job("throwaway-job")


@pytest.mark.django_db
def test_a_declared_job_is_scheduled_by_beat_and_runs_as_the_same_task_with_its_health(declared: PeriodicJob) -> None:
    assert declared == THROWAWAY
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


def test_a_second_job_under_a_taken_name_or_without_a_cadence_is_refused(declared: PeriodicJob) -> None:
    def other() -> None:
        return None

    with pytest.raises(DuplicateJobError, match="throwaway-job"):
        periodic_job("throwaway-job", every_s=42.0)(other)
    with pytest.raises(ValueError, match="every_s must be positive"):
        periodic_job("never-runs", every_s=0)(other)
    assert "never-runs" not in {job.name for job in periodic_jobs()}
