"""Two runtime processes reporting a component of the same name keep a row each.

Drives the production reporter (the runtime's health-reporting startup task) in two
runtimes at once; each is its own start instance, as two runfeed processes are.
"""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import datetime

import pytest
from channels.db import database_sync_to_async

from core.health import Status
from core.models import ComponentHealth
from core.runtime.core import Phase, Runtime, RuntimeContext, StartupTask
from tests.helpers import async_eventually
from tradingsite.runtime.compose import _health_reporting

pytestmark = pytest.mark.django_db(transaction=True)


def _processor(status: Status, reason: str) -> StartupTask:
    async def start(ctx: RuntimeContext) -> None:
        ctx.health.set("processor", status, reason)  # the component API: no process named

    return StartupTask("processor", Phase.DATA_FLOW, start)


def _rows() -> list[tuple[str, str, str, str, str, int | None]]:
    return sorted(
        ComponentHealth.objects.filter(component="processor").values_list(
            "process", "role", "label", "status", "host", "pid"
        )
    )


def _oldest_report() -> datetime:
    return min(ComponentHealth.objects.filter(component="processor").values_list("updated_at", flat=True))


async def test_two_runtimes_report_their_processor_under_their_own_identity(settings) -> None:  # type: ignore[no-untyped-def]
    settings.HEALTH_REPORT_INTERVAL_S = 0.05
    sim = Runtime([_health_reporting("feed:sim"), _processor(Status.HEALTHY, "routing")])
    binance = Runtime([_health_reporting("feed:binance"), _processor(Status.BLOCKED, "mailbox full")])
    runs = [asyncio.create_task(sim.run()), asyncio.create_task(binance.run())]

    async def both_reported() -> list[tuple[str, str, str, str, str, int | None]] | None:
        rows = await database_sync_to_async(_rows)()
        return rows if len(rows) == 2 else None

    try:
        rows = await async_eventually(both_reported, timeout_s=20)
        first = await database_sync_to_async(_oldest_report)()

        async def reported_again() -> bool:
            return bool(await database_sync_to_async(_oldest_report)() > first)

        # Both processes reported again: the rows still belong to their own process.
        await async_eventually(reported_again, timeout_s=20)
        assert await database_sync_to_async(_rows)() == rows
    finally:
        sim.request_stop()
        binance.request_stop()
        assert await asyncio.gather(*runs) == [0, 0]
    by_label = {label: (process, role, status, host, pid) for process, role, label, status, host, pid in rows}
    host, pid = socket.gethostname(), os.getpid()
    assert by_label["feed:sim"] == (f"{host}:{pid}:{sim.context.instance_id}", "runfeed", "HEALTHY", host, pid)
    assert by_label["feed:binance"] == (f"{host}:{pid}:{binance.context.instance_id}", "runfeed", "BLOCKED", host, pid)
    # A clean stop withdraws each process's own rows.
    assert await database_sync_to_async(_rows)() == []
