"""Reports a process's HealthBoard to the database so every web process can read it."""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async

from core import services
from core.log_throttle import FailureLog
from core.runtime.core import RuntimeContext

log = logging.getLogger(__name__)


async def report_health_forever(ctx: RuntimeContext, *, interval_s: float, stale_after_s: float) -> None:
    """Write the board every `interval_s`; a failed write is retried on the next beat."""
    report = database_sync_to_async(services.component_health_report)
    failures = FailureLog(log, "health: report", interval_s=60.0)
    while True:
        try:
            await report(process=ctx.health.process, health=ctx.health.snapshot(), default_stale_after_s=stale_after_s)
        except Exception as exc:
            # The database being down is reported by the database's own checks; say it here once a minute.
            failures.failed(exc)
        else:
            failures.succeeded("reporting again")
        await asyncio.sleep(interval_s)


async def withdraw_health(ctx: RuntimeContext) -> None:
    """Remove the process's reports on a clean stop, so readiness does not wait for them to go stale."""
    await database_sync_to_async(services.component_health_withdraw)(process=ctx.health.process)
