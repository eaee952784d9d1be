"""A clean stop runs its hooks stage by stage, and a late stage keeps its share of the time."""

from __future__ import annotations

import asyncio

from core.runtime.core import LATER_STAGE_SHARE, Phase, Runtime, RuntimeContext, StartupTask, StopHook, StopStage


async def _stop(runtime: Runtime) -> int:
    run = asyncio.create_task(runtime.run())
    while not runtime.started:
        await asyncio.sleep(0.01)
    runtime.request_stop()
    return await asyncio.wait_for(run, 10)


async def test_stages_run_in_order_whatever_order_the_hooks_were_registered_in() -> None:
    log: list[str] = []

    def hook(name: str) -> StopHook:
        async def run(timeout_s: float) -> None:
            log.append(name)

        return run

    async def start(ctx: RuntimeContext) -> None:
        ctx.on_stop("final pass", hook("final pass"), stage=StopStage.BOOKS)
        ctx.on_stop("executor", hook("executor"))  # DRAIN by default
        ctx.on_stop("watcher", hook("watcher"), stage=StopStage.INTAKE)
        ctx.on_stop("consumer", hook("consumer"))

    assert await _stop(Runtime([StartupTask("start", Phase.DATA_FLOW, start)], stop_timeout_s=5)) == 0
    # Inside a stage the last registered runs first.
    assert log == ["watcher", "consumer", "executor", "final pass"]


async def test_a_drain_that_overruns_leaves_the_books_stage_its_share_of_the_stop() -> None:
    given: dict[str, float] = {}

    async def drain_forever(timeout_s: float) -> None:
        given["drain"] = timeout_s
        await asyncio.Event().wait()

    async def books(timeout_s: float) -> None:
        given["books"] = timeout_s

    async def start(ctx: RuntimeContext) -> None:
        ctx.on_stop("books", books, stage=StopStage.BOOKS)
        ctx.on_stop("drain", drain_forever, stage=StopStage.DRAIN)

    stop_timeout_s = 2.0
    assert await _stop(Runtime([StartupTask("start", Phase.DATA_FLOW, start)], stop_timeout_s=stop_timeout_s)) == 0
    hooks_s = stop_timeout_s * 0.8
    assert given["drain"] <= hooks_s * (1 - LATER_STAGE_SHARE) + 0.01
    assert given["books"] >= hooks_s * LATER_STAGE_SHARE * 0.8  # what is left after the drain's deadline
