"""The periodic jobs, declared once.

Celery beat reads this table in scale-out; the embedded site runs the same task
functions on the same cadence inside its own process (tradingsite.runtime.periodic).
An operator can change a cadence with PERIODIC_JOB_INTERVALS ("name=seconds,...").
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    task: str  # dotted path of the Celery task (a thin wrapper over a service)
    every_s: float  # default cadence


PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob("clear-expired-sessions", "tradingsite.tasks.clear_expired_sessions", 3600.0),
    PeriodicJob("prune-component-health", "tradingsite.tasks.prune_component_health", 600.0),
    PeriodicJob("recovery-token-expiry", "recovery.tasks.expire_broker_tokens", 60.0),
    PeriodicJob("refresh-instrument-metadata", "feeds.tasks.instrument_metadata_refresh", 3600.0),
    PeriodicJob("orders-reconcile", "orders.tasks.reconcile_accounts", 10.0),
)


def job_interval_s(job: PeriodicJob) -> float:
    """Return the job's cadence, with the operator's override if any."""
    from django.conf import settings

    return float(settings.PERIODIC_JOB_INTERVALS.get(job.name, job.every_s))


def job_named(name: str) -> PeriodicJob:
    return next(job for job in PERIODIC_JOBS if job.name == name)


def beat_schedule() -> dict[str, dict[str, object]]:
    """Return PERIODIC_JOBS in Celery's beat_schedule shape."""
    return {job.name: {"task": job.task, "schedule": job_interval_s(job)} for job in PERIODIC_JOBS}
