"""Periodic jobs: Celery tasks that record their own last run as component health.

A concrete job is one decorated function in an app's tasks module: the decorator declares
its name and cadence (core.schedule) and owns timing, error capture and the
`job:<name>` health row, whether Celery beat or the embedded site runs it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from celery import shared_task
from django.utils import timezone

from core.health import Status
from core.metrics import observe_job_run
from core.models import ComponentHealth
from core.schedule import PeriodicJob, job_named, register_periodic_job, scheduled_interval_s

log = logging.getLogger(__name__)
T = TypeVar("T")

JOB_HEALTH_PROCESS = "periodic-jobs"


def _record_run(job_name: str, status: Status, reason: str) -> None:
    every_s = scheduled_interval_s(job_named(job_name))
    ComponentHealth.objects.update_or_create(
        component=f"job:{job_name}",
        defaults={
            "process": JOB_HEALTH_PROCESS,
            "status": status.value,
            "reason": reason[:2000],
            # A job that misses two runs in a row is late: DEGRADED, not BLOCKED.
            "stale_after_s": 2 * every_s,
            "stale_status": Status.DEGRADED.value,
            "updated_at": timezone.now(),
        },
    )


def periodic_job(job_name: str, *, every_s: float) -> Callable[[Callable[[], T]], Callable[[], T]]:
    """Declare a periodic job: `fn` (no arguments) becomes its Celery task, run every `every_s`."""
    if not every_s > 0:
        raise ValueError(f"periodic job {job_name!r}: every_s must be positive, not {every_s!r}")

    def decorate(fn: Callable[[], T]) -> Callable[[], T]:
        @functools.wraps(fn)
        def run() -> T:
            started = time.monotonic()
            try:
                result = fn()
            except Exception as exc:
                log.exception("job %s: failed", job_name)
                observe_job_run(job_name, duration_s=time.monotonic() - started, ok=False)
                _record_run(job_name, Status.DEGRADED, f"last run failed: {exc!r}")
                raise
            observe_job_run(job_name, duration_s=time.monotonic() - started, ok=True)
            elapsed_ms = (time.monotonic() - started) * 1000
            _record_run(job_name, Status.HEALTHY, f"last run ok in {elapsed_ms:.0f} ms: {result}")
            return result

        task_name = f"{fn.__module__}.{fn.__name__}"
        register_periodic_job(PeriodicJob(job_name, task_name, float(every_s)))
        return shared_task(name=task_name)(run)

    return decorate
