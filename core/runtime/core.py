"""The runtime: startup phases in order, tasks inside a phase concurrently.

Phases start in order, each relying on the ones before. A startup task does its setup and returns; work
that lives as long as the process is handed to `RuntimeContext.spawn`. A spawned task
that fails is fatal: the runtime stops and `run()` returns a non-zero exit code.
Constructing a Runtime has no side effects; `run()` does everything.

A clean stop runs the stop hooks stage by stage (StopStage): whatever makes new work
stops first, the work in flight drains next, the books are closed last. A later stage
keeps a share of the stop timeout however long an earlier one takes, so a drain that
overruns can never leave the books unclosed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from core.health import HealthBoard

log = logging.getLogger(__name__)
RECANCEL_INTERVAL_S = 0.25
# Of the stop hooks' time, the share each later stage with hooks keeps for itself.
LATER_STAGE_SHARE = 0.3


class Phase(IntEnum):
    ADD_FEEDS_AND_STRATEGIES = 1
    SUBSCRIPTIONS = 2
    DATA_FLOW = 3
    AUTH_STATE = 4
    DATA_BRIDGE = 5


class StopStage(IntEnum):
    """The order of a clean stop; hooks of one stage run last registered first."""

    # Producers of work stop making it (signal sources, tick watchers): nothing new starts after this.
    INTAKE = 1
    # Work already started finishes (orders in flight placed and persisted, or given back).
    DRAIN = 2
    # The books are closed against the outside world (the final reconciliation pass).
    BOOKS = 3


StopHook = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class StartupTask:
    name: str
    phase: Phase
    run: Callable[[RuntimeContext], Awaitable[None]]


class FatalError(RuntimeError):
    """Raised by a component that cannot go on; stops the process with a non-zero code."""


@dataclass
class RuntimeContext:
    """What startup tasks share. Each attribute has one writer, named beside it."""

    instance_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    health: HealthBoard = field(default_factory=HealthBoard)
    # Written by phase-1 and phase-2 tasks, read-only afterwards.
    resources: dict[str, Any] = field(default_factory=dict)
    exit_stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stop_hooks: list[tuple[str, StopHook, StopStage]] = field(default_factory=list)
    _fatal: asyncio.Future[BaseException] | None = None

    def spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `coro` for the life of the process; its failure stops the runtime."""
        task = asyncio.create_task(coro, name=name)
        task.add_done_callback(self._on_done)
        self._tasks.append(task)
        return task

    def on_stop(self, name: str, hook: StopHook, *, stage: StopStage = StopStage.DRAIN) -> None:
        """Run `hook(timeout_s)` at a clean stop, before any spawned task is cancelled.

        Stages run in order (StopStage); inside a stage hooks run one after another, the
        last registered first (a consumer registered after its producer drains before
        the producer's books are closed). Each hook is given what is left of its stage's
        time: the runtime's stop timeout less the shares the later stages keep. A hook
        that fails or overruns is logged and the stop goes on: stopping is never
        blocked for good, and the later stages still run.
        """
        self._stop_hooks.append((name, hook, stage))

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._fatal is None or self._fatal.done():
            return
        exc = task.exception()
        if exc is not None:
            log.error("runtime: %s failed: %r", task.get_name(), exc, exc_info=exc)
            self._fatal.set_result(exc)
        else:
            log.info("runtime: %s finished", task.get_name())


class Runtime:
    """Runs startup tasks phase by phase, then waits for a stop request or a fatal error."""

    def __init__(self, tasks: Sequence[StartupTask], *, stop_timeout_s: float = 10.0) -> None:
        self.tasks = list(tasks)
        self.context = RuntimeContext()
        self._stop_timeout_s = stop_timeout_s
        self._stop: asyncio.Event | None = None
        self.started = False

    def request_stop(self) -> None:
        """Ask the runtime to stop; safe to call from a signal handler, more than once."""
        if self._stop is not None:
            self._stop.set()

    async def run(self) -> int:
        """Start every phase, run until stopped; return the process exit code."""
        loop = asyncio.get_running_loop()
        self._stop = self._stop or asyncio.Event()
        self.context._fatal = loop.create_future()
        try:
            failure = await self._start_phases()
            if failure is None and not self._stop.is_set():
                self.started = True
                log.info("runtime: started (%d startup tasks)", len(self.tasks))
                stop_wait = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait({stop_wait, self.context._fatal}, return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
                stop_wait.cancel()
            if self.context._fatal.done():
                failure = self.context._fatal.result()
        finally:
            await self._teardown()
        if failure is not None:
            log.error("runtime: stopped on a fatal error: %s", failure)
            return 1
        log.info("runtime: stopped cleanly")
        return 0

    async def _start_phases(self) -> BaseException | None:
        for phase in sorted({task.phase for task in self.tasks}):
            in_phase = [task for task in self.tasks if task.phase == phase]
            log.info("runtime: phase %s: %s", phase.name, ", ".join(t.name for t in in_phase))
            starts = [asyncio.ensure_future(t.run(self.context)) for t in in_phase]
            stop_wait = asyncio.ensure_future(self._stop.wait())  # type: ignore[union-attr]
            pending: set[asyncio.Future[Any]] = set(starts)
            while pending:
                done, pending = await asyncio.wait(  # type: ignore[type-var,assignment]  # _fatal is set by run()
                    pending | {stop_wait, self.context._fatal},
                    return_when=asyncio.FIRST_COMPLETED,
                )
                pending -= {stop_wait, self.context._fatal}
                failed = next((f for f in done if f in starts and f.exception()), None)
                interrupted = stop_wait.done() or self.context._fatal.done()  # type: ignore[union-attr]
                if failed is not None or interrupted:
                    for future in pending:
                        future.cancel()
                    stop_wait.cancel()
                    if failed is not None:
                        return failed.exception()
                    return self.context._fatal.result() if self.context._fatal.done() else None  # type: ignore[union-attr]
            stop_wait.cancel()
        return None

    async def _run_stop_hooks(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        hooks = list(reversed(self.context._stop_hooks))
        stages = sorted({stage for _, _, stage in hooks})
        budget_s = max(deadline - loop.time(), 0.0)
        for index, stage in enumerate(stages):
            later = len(stages) - index - 1
            stage_deadline = deadline - budget_s * LATER_STAGE_SHARE * later
            for name, hook, hook_stage in hooks:
                if hook_stage == stage:
                    await self._run_stop_hook(name, hook, stage_deadline)

    async def _run_stop_hook(self, name: str, hook: StopHook, deadline: float) -> None:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            log.warning("runtime: no time left for stop hook %s", name)
            return
        try:
            await asyncio.wait_for(hook(remaining), remaining)
        except TimeoutError:
            log.warning("runtime: stop hook %s did not finish within %.1fs", name, remaining)
        except Exception as exc:
            log.error("runtime: stop hook %s failed: %r", name, exc, exc_info=exc)

    async def _teardown(self) -> None:
        loop = asyncio.get_running_loop()
        # The hooks (draining in-flight trades, booking what the broker did) get most of
        # the stop timeout; cancelling the tasks afterwards gets the rest.
        await self._run_stop_hooks(loop.time() + self._stop_timeout_s * 0.8 if self.started else loop.time())
        deadline = loop.time() + self._stop_timeout_s
        pending = set(self.context._tasks)
        for task in reversed(self.context._tasks):
            task.cancel()
        while pending:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=min(remaining, RECANCEL_INTERVAL_S))
            # Some libraries swallow a CancelledError that lands mid-call (channels_redis
            # group_send does, now and then) and the task carries on to its next await.
            # Cancelling again reaches it there.
            for task in pending:
                task.cancel()
        for task in pending:
            log.warning("runtime: %s did not stop within %ss", task.get_name(), self._stop_timeout_s)
        await self.context.exit_stack.aclose()
