"""The runtime scheduler: owns only when the heartbeat is checked.

`start()` loops until `stop()`; it creates no task of its own (the lifecycle owner
decides where it runs), never runs a second loop, and lets dependency errors through
unwrapped after resetting `running`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from feeds.streams.heartbeat_monitor import HeartbeatMonitorProtocol
from feeds.streams.supervisor import RuntimeSupervisorProtocol

Sleep = Callable[[float], Awaitable[None]]


class RuntimeSchedulerProtocol(Protocol):
    @property
    def running(self) -> bool: ...
    async def start(self) -> None: ...
    async def run_once(self) -> None: ...
    def stop(self) -> None: ...


class RuntimeScheduler:
    __slots__ = ("_heartbeat", "_interval_s", "_running", "_sleep", "_supervisor")

    def __init__(
        self,
        heartbeat: HeartbeatMonitorProtocol,
        supervisor: RuntimeSupervisorProtocol,
        interval_s: float,
        *,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self._heartbeat = heartbeat
        self._supervisor = supervisor
        self._interval_s = interval_s
        self._sleep = sleep
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    @property
    def interval_s(self) -> float:
        return self._interval_s

    async def start(self) -> None:
        """Check, then sleep, until stopped; a second call while running returns at once."""
        if self._running:
            return
        self._running = True
        try:
            while self._running:
                await self.run_once()
                if self._running:
                    await self._sleep(self._interval_s)
        finally:
            self._running = False

    async def run_once(self) -> None:
        """One step: check the heartbeat and hand a confirmed timeout to the supervisor."""
        if await self._heartbeat.check_timeout():
            await self._supervisor.handle_heartbeat_timeout()

    def stop(self) -> None:
        self._running = False
