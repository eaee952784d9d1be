"""A passive heartbeat: remembers the last activity and says, when asked, if it is too old.

It owns no task and no loop (the scheduler asks), knows nothing of the supervisor and
never reconnects. It reads the monotonic clock, injectable for tests. A timeout is
published once, until new activity or a new start().
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum
from typing import Protocol

from feeds.streams.runtime_events import HeartbeatTimeoutEvent, RuntimeEventPublisher


class HeartbeatState(Enum):
    IDLE = "idle"
    MONITORING = "monitoring"
    TIMED_OUT = "timed_out"


class HeartbeatMonitorProtocol(Protocol):
    @property
    def state(self) -> HeartbeatState: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def record_activity(self) -> None: ...
    async def check_timeout(self) -> bool: ...


class HeartbeatMonitor:
    __slots__ = ("_clock", "_last_activity", "_publisher", "_state", "_timeout_s")

    def __init__(
        self,
        timeout_s: float,
        publisher: RuntimeEventPublisher,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self._timeout_s = timeout_s
        self._publisher = publisher
        self._clock = clock
        self._state = HeartbeatState.IDLE
        self._last_activity = 0.0

    @property
    def state(self) -> HeartbeatState:
        return self._state

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    def start(self) -> None:
        self._state = HeartbeatState.MONITORING
        self._last_activity = self._clock()

    def stop(self) -> None:
        self._state = HeartbeatState.IDLE

    def record_activity(self) -> None:
        """Move the boundary forward; re-arms a heartbeat that had timed out (not an idle one)."""
        if self._state is HeartbeatState.IDLE:
            return
        self._last_activity = self._clock()
        self._state = HeartbeatState.MONITORING

    async def check_timeout(self) -> bool:
        """Return True exactly when this call detected the timeout (and published it)."""
        if self._state is not HeartbeatState.MONITORING:
            return False
        elapsed = self._clock() - self._last_activity
        if elapsed < self._timeout_s:
            return False
        # State first: a failing publisher must not make the next check report again.
        self._state = HeartbeatState.TIMED_OUT
        await self._publisher.publish(HeartbeatTimeoutEvent(elapsed_s=elapsed, timeout_s=self._timeout_s))
        return True
