"""The periodic jobs, declared once.

Celery beat reads this table in scale-out; the embedded site runs the same task
functions on the same cadence inside its own process (tradingsite.runtime.periodic).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    task: str  # dotted path of the Celery task (a thin wrapper over a service)
    every_s: float


PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob("clear-expired-sessions", "tradingsite.tasks.clear_expired_sessions", 3600.0),
    PeriodicJob("prune-component-health", "tradingsite.tasks.prune_component_health", 600.0),
)


def beat_schedule() -> dict[str, dict[str, object]]:
    """Return PERIODIC_JOBS in Celery's beat_schedule shape."""
    return {job.name: {"task": job.task, "schedule": job.every_s} for job in PERIODIC_JOBS}
