"""Periodic jobs: what a job is, its cadence, and the table of the jobs this site runs.

The table names app tasks, so the composition root declares it (tradingsite.schedule)
and installs it here when Django starts. Celery beat reads it in scale-out; the embedded
site runs the same task functions on the same cadence inside its own process
(core.runtime.periodic). An operator can change a cadence with PERIODIC_JOB_INTERVALS
("name=seconds,...").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    task: str  # dotted path of the Celery task (a thin wrapper over a service)
    every_s: float  # default cadence


# Written once, by install_periodic_jobs at Django start; read-only afterwards.
_installed: tuple[PeriodicJob, ...] | None = None


def install_periodic_jobs(jobs: Sequence[PeriodicJob]) -> None:
    """Make `jobs` the site's periodic jobs (the composition root calls this at startup)."""
    global _installed
    _installed = tuple(jobs)


def periodic_jobs() -> tuple[PeriodicJob, ...]:
    """Return the installed table; refuses before the composition root installed one."""
    if _installed is None:
        raise LookupError("no periodic jobs installed: the composition root installs them when Django starts")
    return _installed


def job_interval_s(job: PeriodicJob) -> float:
    """Return the job's cadence, with the operator's override if any."""
    from django.conf import settings

    return float(settings.PERIODIC_JOB_INTERVALS.get(job.name, job.every_s))


def job_named(name: str) -> PeriodicJob:
    return next(job for job in periodic_jobs() if job.name == name)


def beat_schedule(jobs: Sequence[PeriodicJob] | None = None) -> dict[str, dict[str, object]]:
    """Return `jobs` (the installed table by default) in Celery's beat_schedule shape."""
    return {job.name: {"task": job.task, "schedule": job_interval_s(job)} for job in (jobs or periodic_jobs())}
