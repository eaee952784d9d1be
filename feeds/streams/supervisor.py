"""The runtime supervisor: lifecycle state, and the one place a reconnect is started.

STOPPED -start-> RUNNING -timeout or lost connection-> RECONNECTING -> RUNNING or FAILED.
A reconnect starts only from the expected state, so two callers (the scheduler's
heartbeat check and the reader's lost connection) never run two reconnects at once.
It does not check the heartbeat, sleep, schedule retries, recover trades or touch the
transport.
"""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Protocol

from feeds.streams.heartbeat_monitor import HeartbeatMonitorProtocol
from feeds.streams.reconnect import ReconnectCoordinatorProtocol


class SupervisorState(Enum):
    STOPPED = "stopped"
    RUNNING = "running"
    RECONNECTING = "reconnecting"
    FAILED = "failed"


class RuntimeSupervisorProtocol(Protocol):
    @property
    def state(self) -> SupervisorState: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def notify_activity(self) -> None: ...
    async def handle_heartbeat_timeout(self) -> bool: ...


class RuntimeSupervisor:
    __slots__ = ("_heartbeat", "_reconnect", "_settled", "_state")

    def __init__(self, heartbeat: HeartbeatMonitorProtocol, reconnect: ReconnectCoordinatorProtocol) -> None:
        self._heartbeat = heartbeat
        self._reconnect = reconnect
        self._state = SupervisorState.STOPPED
        self._settled: asyncio.Event | None = None

    @property
    def state(self) -> SupervisorState:
        return self._state

    def start(self) -> None:
        """STOPPED -> RUNNING (after the lifecycle owner made the first connection)."""
        if self._state is not SupervisorState.STOPPED:
            return
        self._heartbeat.start()
        self._state = SupervisorState.RUNNING

    def stop(self) -> None:
        self._heartbeat.stop()
        self._state = SupervisorState.STOPPED
        self._mark_settled()

    def notify_activity(self) -> None:
        """Pass live activity to the heartbeat, only while RUNNING."""
        if self._state is SupervisorState.RUNNING:
            self._heartbeat.record_activity()

    async def handle_heartbeat_timeout(self) -> bool:
        """Reconnect after a confirmed timeout; False when not RUNNING (nothing done)."""
        return await self._reconnect_from(SupervisorState.RUNNING)

    async def handle_connection_lost(self) -> bool:
        """Reconnect after the connection ended; False when not RUNNING (nothing done)."""
        return await self._reconnect_from(SupervisorState.RUNNING)

    async def retry(self) -> bool:
        """Make one more attempt after a failure; False when not FAILED."""
        return await self._reconnect_from(SupervisorState.FAILED)

    async def wait_settled(self) -> SupervisorState:
        """Wait until no reconnect is in flight; return the state then."""
        while self._state is SupervisorState.RECONNECTING:
            if self._settled is None:
                self._settled = asyncio.Event()
            await self._settled.wait()
        return self._state

    async def _reconnect_from(self, expected: SupervisorState) -> bool:
        if self._state is not expected:
            return False
        self._heartbeat.stop()
        self._state = SupervisorState.RECONNECTING
        self._settled = asyncio.Event()
        try:
            await self._reconnect.reconnect()
        except BaseException:
            if self._state is SupervisorState.RECONNECTING:
                self._state = SupervisorState.FAILED
            self._mark_settled()
            raise
        if self._state is SupervisorState.RECONNECTING:  # not stopped meanwhile
            self._heartbeat.start()
            self._state = SupervisorState.RUNNING
        self._mark_settled()
        return True

    def _mark_settled(self) -> None:
        if self._settled is not None:
            self._settled.set()
            self._settled = None
