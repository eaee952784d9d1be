"""Periodic jobs: Celery tasks that record their own last run as component health.

A concrete job is one decorated function; the decorator owns timing, error capture and
the `job:<name>` health row, whether Celery beat or the embedded site runs it.
"""
from __future__ import annotations

import functools
import logging
import time
from typing import Callable, TypeVar

from celery import shared_task
from django.utils import timezone

from core.health import Status
from core.metrics import observe_job_run
from core.models import ComponentHealth
from core.schedule import job_interval_s, job_named

log = logging.getLogger(__name__)
T = TypeVar("T")

JOB_HEALTH_PROCESS = "periodic-jobs"


def _record_run(job_name: str, status: Status, reason: str) -> None:
    every_s = job_interval_s(job_named(job_name))
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


def periodic_job(job_name: str) -> Callable[[Callable[[], T]], Callable[[], T]]:
    """Turn a no-argument function into the Celery task a periodic job (core.schedule) names."""

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

        return shared_task(name=f"{fn.__module__}.{fn.__name__}")(run)

    return decorate
