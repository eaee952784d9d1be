"""The runtime runs phases in order, tasks of a phase together, and stops cleanly or fatally."""

from __future__ import annotations

import asyncio

import pytest

from core.runtime.core import FatalError, Phase, Runtime, RuntimeContext, StartupTask
from core.runtime.signals import parse_feed_names
from tradingsite.runtime.web import daphne_endpoint


async def test_phases_run_in_order_and_tasks_inside_a_phase_run_concurrently() -> None:
    log: list[str] = []
    both_started = asyncio.Event()
    running: set[str] = set()

    def task(name: str, phase: Phase, wait_for_sibling: bool = False) -> StartupTask:
        async def run(ctx: RuntimeContext) -> None:
            log.append(f"start {name}")
            running.add(name)
            if len(running & {"feeds", "strategies"}) == 2:
                both_started.set()
            if wait_for_sibling:
                # Deadlocks unless the sibling in the same phase runs at the same time.
                await asyncio.wait_for(both_started.wait(), timeout=5)
            log.append(f"end {name}")

        return StartupTask(name, phase, run)

    runtime = Runtime(
        [
            task("bridge", Phase.DATA_BRIDGE),
            task("flow", Phase.DATA_FLOW),
            task("feeds", Phase.ADD_FEEDS_AND_STRATEGIES, wait_for_sibling=True),
            task("strategies", Phase.ADD_FEEDS_AND_STRATEGIES, wait_for_sibling=True),
            task("subscriptions", Phase.SUBSCRIPTIONS),
        ]
    )
    run = asyncio.create_task(runtime.run())
    while not runtime.started:
        await asyncio.sleep(0.01)
    runtime.request_stop()
    assert await run == 0
    order = [entry.split()[1] for entry in log if entry.startswith("end")]
    assert set(order[:2]) == {"feeds", "strategies"}
    assert order[2:] == ["subscriptions", "flow", "bridge"]
    assert log.index("start subscriptions") > log.index("end feeds")


async def test_stop_cancels_spawned_work_and_runs_teardown_in_reverse() -> None:
    events: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            events.append("worker cancelled")

    async def start(ctx: RuntimeContext) -> None:
        async def first() -> None:
            events.append("teardown first")

        async def second() -> None:
            events.append("teardown second")

        ctx.exit_stack.push_async_callback(first)
        ctx.exit_stack.push_async_callback(second)
        ctx.spawn("worker", forever())

    runtime = Runtime([StartupTask("start", Phase.DATA_FLOW, start)])
    run = asyncio.create_task(runtime.run())
    while not runtime.started:
        await asyncio.sleep(0.01)
    runtime.request_stop()
    runtime.request_stop()  # idempotent
    assert await run == 0
    assert events == ["worker cancelled", "teardown second", "teardown first"]


async def test_a_task_that_swallows_one_cancellation_is_cancelled_again() -> None:
    swallowed: list[str] = []

    async def stubborn() -> None:
        # What a library that catches CancelledError mid-call looks like from outside.
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed.append("once")

    async def start(ctx: RuntimeContext) -> None:
        ctx.spawn("stubborn", stubborn())

    runtime = Runtime([StartupTask("start", Phase.DATA_FLOW, start)], stop_timeout_s=5)
    run = asyncio.create_task(runtime.run())
    while not runtime.started:
        await asyncio.sleep(0.01)
    runtime.request_stop()
    assert await asyncio.wait_for(run, 2) == 0
    assert swallowed == ["once"]
    assert all(task.cancelled() for task in runtime.context._tasks)


async def test_a_failing_spawned_task_is_fatal_and_exits_non_zero() -> None:
    async def start(ctx: RuntimeContext) -> None:
        async def crash() -> None:
            await asyncio.sleep(0.01)
            raise FatalError("route with open positions degraded")

        ctx.spawn("route", crash())

    assert await asyncio.wait_for(Runtime([StartupTask("s", Phase.DATA_FLOW, start)]).run(), 5) == 1


async def test_a_failing_startup_task_stops_before_later_phases() -> None:
    later_ran = False

    async def broken(ctx: RuntimeContext) -> None:
        raise FatalError("no enabled feed named nope")

    async def later(ctx: RuntimeContext) -> None:
        nonlocal later_ran
        later_ran = True

    runtime = Runtime(
        [StartupTask("load", Phase.ADD_FEEDS_AND_STRATEGIES, broken), StartupTask("flow", Phase.DATA_FLOW, later)]
    )
    assert await asyncio.wait_for(runtime.run(), 5) == 1
    assert later_ran is False
    assert runtime.started is False


async def test_a_stop_during_startup_skips_the_remaining_phases() -> None:
    later_ran = False
    runtime: Runtime

    async def slow(ctx: RuntimeContext) -> None:
        runtime.request_stop()
        await asyncio.sleep(10)

    async def later(ctx: RuntimeContext) -> None:
        nonlocal later_ran
        later_ran = True

    runtime = Runtime([StartupTask("slow", Phase.SUBSCRIPTIONS, slow), StartupTask("flow", Phase.DATA_FLOW, later)])
    assert await asyncio.wait_for(runtime.run(), 5) == 0
    assert later_ran is False


def test_building_a_runtime_has_no_side_effects() -> None:
    from tradingsite.runtime.compose import build_runtime

    runtime = build_runtime(role="site", feed_names=None, periodic_jobs=True)
    assert runtime.started is False
    assert runtime.context._tasks == []
    assert {t.phase for t in runtime.tasks} >= {Phase.ADD_FEEDS_AND_STRATEGIES, Phase.DATA_FLOW, Phase.DATA_BRIDGE}


@pytest.mark.parametrize(
    ("values", "expected"),
    [(None, []), (["a"], ["a"]), (["a,b", "b", " c "], ["a", "b", "c"]), ([","], [])],
)
def test_feed_names_are_flattened_and_deduplicated(values, expected) -> None:
    assert parse_feed_names(values) == expected


def test_daphne_endpoint_escapes_ipv6() -> None:
    assert daphne_endpoint("127.0.0.1", 8000) == "tcp:port=8000:interface=127.0.0.1"
    assert daphne_endpoint("[::1]", 8001) == "tcp:port=8001:interface=\\:\\:1"


async def test_a_clean_stop_runs_stop_hooks_last_registered_first_before_tasks_are_cancelled() -> None:
    log: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            log.append("task cancelled")

    async def start(ctx: RuntimeContext) -> None:
        ctx.spawn("forever", forever())

        async def first(timeout_s: float) -> None:
            log.append("producer books closed")

        async def second(timeout_s: float) -> None:
            assert timeout_s > 0
            await asyncio.sleep(0.01)
            log.append("consumer drained")

        ctx.on_stop("producer", first)
        ctx.on_stop("consumer", second)

    runtime = Runtime([StartupTask("start", Phase.DATA_FLOW, start)], stop_timeout_s=5)
    run = asyncio.create_task(runtime.run())
    while not runtime.started:
        await asyncio.sleep(0.01)
    runtime.request_stop()
    assert await run == 0
    assert log == ["consumer drained", "producer books closed", "task cancelled"]


async def test_a_stop_hook_that_overruns_or_fails_does_not_block_the_stop() -> None:
    async def start(ctx: RuntimeContext) -> None:
        async def hangs(timeout_s: float) -> None:
            await asyncio.Event().wait()

        async def fails(timeout_s: float) -> None:
            raise RuntimeError("broker gone")

        ctx.on_stop("hangs", hangs)
        ctx.on_stop("fails", fails)

    runtime = Runtime([StartupTask("start", Phase.DATA_FLOW, start)], stop_timeout_s=0.5)
    run = asyncio.create_task(runtime.run())
    while not runtime.started:
        await asyncio.sleep(0.01)
    runtime.request_stop()
    assert await asyncio.wait_for(run, 5) == 0
