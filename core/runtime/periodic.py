"""Periodic jobs inside the site process (embedded default, no Celery beat).

The same Celery task functions as in scale-out, on the cadence of core.schedule,
each in a worker thread so a slow job never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.utils.module_loading import import_string

from core.schedule import PeriodicJob, job_interval_s

log = logging.getLogger(__name__)


async def run_periodic_job(job: PeriodicJob, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Run `job` on its cadence until cancelled; a failing run is logged, not fatal."""
    task = import_string(job.task)
    every_s = job_interval_s(job)

    def run_once() -> None:
        close_old_connections()
        try:
            task()
        finally:
            close_old_connections()

    while True:
        await sleep(every_s)
        try:
            # A thread of its own, not Channels' shared database thread: a job may run
            # async code itself (async_to_sync), and a long job must not hold up the
            # runtime's own database calls. The task records its outcome as job health.
            await _finish_when_cancelled(sync_to_async(run_once, thread_sensitive=False)())
        except Exception:
            log.warning("jobs: %s failed; next run in %ss", job.name, every_s)


async def _finish_when_cancelled(run: Awaitable[None]) -> None:
    """Await `run`; when cancelled, first let it finish, then re-raise the cancellation.

    A thread cannot be interrupted: cancelling the await would only orphan it, still
    inside its database transaction while the runtime (or a test) goes on tearing down.
    A job is short, and the runtime's stop timeout still bounds the wait.
    """
    job = asyncio.ensure_future(run)
    try:
        await asyncio.shield(job)
    except asyncio.CancelledError:
        while not job.done():
            try:
                await asyncio.wait({job})
            except asyncio.CancelledError:
                continue  # the runtime cancels again while it waits; the job still ends first
        raise
