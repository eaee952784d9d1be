"""Periodic jobs inside the site process (embedded default, no Celery beat).

The same Celery task functions as in scale-out, on the cadence of tradingsite.schedule,
each in a worker thread so a slow job never blocks the event loop.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from channels.db import database_sync_to_async
from django.utils.module_loading import import_string

from tradingsite.schedule import PeriodicJob, job_interval_s

log = logging.getLogger(__name__)


async def run_periodic_job(
    job: PeriodicJob, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> None:
    """Run `job` on its cadence until cancelled; a failing run is logged, not fatal."""
    task = import_string(job.task)
    every_s = job_interval_s(job)
    while True:
        await sleep(every_s)
        try:
            # The task records its own outcome as `job:<name>` health.
            await database_sync_to_async(task)()
        except Exception:
            log.warning("jobs: %s failed; next run in %ss", job.name, every_s)
