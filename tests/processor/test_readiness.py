"""Readiness and health per the processor's table, and fail-fast as a non-zero process exit."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from core.health import Status
from core.runtime.core import Phase, Runtime, RuntimeContext, StartupTask
from processor.processor import Processor
from processor.readiness import ProcessorHealth, processor_readiness
from processor.routing import Active, Degraded, Stopping
from tests.processor.factories import FEED, RecordingSink, batch, spec, tick, turn

CORE = {"fatal-watcher": True, "route-commands": True, "feed-router": True, "reconcile": True}


@dataclass
class FakeRoute:
    state: object
    name: str = "s"

    @property
    def spec(self):
        return self


@pytest.mark.parametrize(
    ("core", "states", "ready", "health"),
    [
        ({}, [], False, ProcessorHealth.INACTIVE),
        ({**CORE, "reconcile": False}, [Active()], False, ProcessorHealth.BLOCKED),
        (CORE, [Active(), Degraded("full", 0, True)], False, ProcessorHealth.BLOCKED),
        (CORE, [Active(), Degraded("full", 0, False)], True, ProcessorHealth.DEGRADED),
        (CORE, [Active(), Stopping(frozenset({(FEED, "BTC")}))], True, ProcessorHealth.DEGRADED),
        (CORE, [Active(), Active()], True, ProcessorHealth.HEALTHY),
        (CORE, [], True, ProcessorHealth.HEALTHY),
    ],
    ids=["no core jobs", "core job stopped", "degraded open", "degraded flat", "stopping", "all active", "no routes"],
)
def test_readiness_table(core, states, ready, health):
    readiness = processor_readiness(core, [FakeRoute(state) for state in states])
    assert (readiness.ready, readiness.health) == (ready, health)
    assert readiness.health.board_status.allows_readiness == ready or health is ProcessorHealth.INACTIVE


async def test_processor_reports_its_readiness_as_routes_change():
    reports = []
    processor = Processor(sink=RecordingSink(), on_readiness=reports.append)
    processor.start()
    processor.reconcile([spec(1, ["BTC"])])
    await processor.settled()
    assert reports[-1].health is ProcessorHealth.HEALTHY
    await processor.consume(batch(tick("BTC", 1, trade_id="long")))
    await turn()
    processor.reconcile([])
    await processor.settled()
    assert reports[-1].health is ProcessorHealth.DEGRADED and "stopping" in reports[-1].reason
    await processor.stop()
    assert reports[-1].health is ProcessorHealth.BLOCKED  # core jobs gone


async def test_a_degraded_route_with_open_positions_stops_the_runtime_with_a_nonzero_exit():
    async def start_processor(ctx: RuntimeContext) -> None:
        processor = Processor(
            sink=RecordingSink(),
            route_mailbox_capacity=2,
            on_readiness=lambda r: ctx.health.set("processor", r.health.board_status, r.reason),
        )
        processor.start(spawn=ctx.spawn)
        processor.reconcile([spec(1, ["BTC"])])
        await processor.settled()
        await processor.consume(batch(tick("BTC", 1, trade_id="long")))
        await turn()
        for second in range(2, 6):
            processor.route(FEED, (tick("BTC", second),))  # the executor never gets a turn

    runtime = Runtime([StartupTask("processor", Phase.DATA_FLOW, start_processor)], stop_timeout_s=2)
    assert await runtime.run() == 1
    assert runtime.context.health.get("processor").status is Status.BLOCKED
