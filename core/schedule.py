"""Periodic jobs: what a job is, its cadence, and the registry of the jobs this site runs.

A job declares itself: `@periodic_job(name, every_s=...)` (core.jobs) on a function in an
app's tasks module registers its name, its Celery task and its cadence here. The tasks
modules of the installed apps are imported on the first read, so Celery beat, the worker
and the embedded site's in-process runner (core.runtime.periodic) all see the same jobs.
An operator can change a cadence with PERIODIC_JOB_INTERVALS ("name=seconds,...").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    task: str  # dotted path of the Celery task (a thin wrapper over a service)
    every_s: float  # default cadence


# Filled by @periodic_job when the apps' tasks modules are imported; read-only after.
_jobs: dict[str, PeriodicJob] = {}
_discovered = False


class DuplicateJobError(ValueError):
    """Two different jobs declared under one name."""


def register_periodic_job(job: PeriodicJob) -> None:
    """Add `job`; the same declaration again (a module imported twice) is a no-op."""
    known = _jobs.get(job.name)
    if known is not None and known != job:
        raise DuplicateJobError(f"periodic job {job.name!r} is declared twice: {known.task} and {job.task}")
    _jobs[job.name] = job


def unregister_periodic_job(name: str) -> None:
    _jobs.pop(name, None)


def periodic_jobs() -> tuple[PeriodicJob, ...]:
    """Return every declared job, after importing the installed apps' tasks modules once."""
    global _discovered
    if not _discovered:
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("tasks")
        _discovered = True
    return tuple(_jobs.values())


def job_interval_s(job: PeriodicJob) -> float:
    """Return the job's cadence, with the operator's override if any."""
    from django.conf import settings

    return float(settings.PERIODIC_JOB_INTERVALS.get(job.name, job.every_s))


def scheduled_interval_s(job: PeriodicJob) -> float:
    """The cadence the job actually runs at: with Celery beat (REDIS_URL), its database row's interval.

    Beat's rows are seeded from job_interval_s and then edited in the admin, so the row
    is what beat sends on; without a row (or an interval on it) the declared cadence.
    """
    from django.conf import settings

    if settings.REDIS_URL:
        from django.db import DatabaseError
        from django_celery_beat.models import PeriodicTask

        try:
            row = PeriodicTask.objects.filter(name=job.name).select_related("interval").first()
        except DatabaseError:
            row = None
        if row is not None and row.interval is not None:
            seconds = float(row.interval.schedule.run_every.total_seconds())
            if seconds > 0:
                return seconds
    return job_interval_s(job)


def job_named(name: str) -> PeriodicJob:
    for job in periodic_jobs():
        if job.name == name:
            return job
    raise LookupError(f"no periodic job named {name!r}")


def beat_schedule() -> dict[str, dict[str, object]]:
    """Return every declared job in Celery's beat_schedule shape."""
    return {job.name: {"task": job.task, "schedule": job_interval_s(job)} for job in periodic_jobs()}
