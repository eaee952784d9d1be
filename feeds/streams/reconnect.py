"""One reconnect attempt: connect, then restore subscriptions.

It does not decide when to run, how often to retry, which backoff to use, whether
trades must be recovered or when live processing resumes: the lifecycle owner does.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from feeds.streams.runtime_events import (
    ReconnectCompletedEvent,
    ReconnectFailedEvent,
    ReconnectStartedEvent,
    RuntimeEventPublisher,
)


class ReconnectState(Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    RESTORING_SUBSCRIPTIONS = "restoring_subscriptions"
    CONNECTED = "connected"
    FAILED = "failed"


class ConnectDispatcher(Protocol):
    """Carries out the connect command (the connection's owner replaces its socket)."""

    async def connect(self) -> None: ...


class SubscriptionManager(Protocol):
    async def restore_subscriptions(self) -> None: ...


class ReconnectCoordinatorProtocol(Protocol):
    async def reconnect(self) -> None: ...


class ReconnectCoordinator:
    __slots__ = ("_attempt", "_dispatcher", "_publisher", "_state", "_subscriptions")

    def __init__(
        self,
        dispatcher: ConnectDispatcher,
        subscriptions: SubscriptionManager,
        publisher: RuntimeEventPublisher,
    ) -> None:
        self._dispatcher = dispatcher
        self._subscriptions = subscriptions
        self._publisher = publisher
        self._state = ReconnectState.DISCONNECTED
        self._attempt = 0

    @property
    def state(self) -> ReconnectState:
        return self._state

    @property
    def attempt(self) -> int:
        return self._attempt

    async def reconnect(self) -> None:
        """Make exactly one attempt; on failure publish it, set FAILED and raise the original error."""
        self._attempt += 1
        attempt = self._attempt
        await self._publisher.publish(ReconnectStartedEvent(attempt))
        try:
            self._state = ReconnectState.CONNECTING
            await self._dispatcher.connect()
            self._state = ReconnectState.RESTORING_SUBSCRIPTIONS
            await self._subscriptions.restore_subscriptions()
        except BaseException as exc:
            self._state = ReconnectState.FAILED
            if isinstance(exc, Exception):
                await self._publisher.publish(ReconnectFailedEvent(attempt, f"{type(exc).__name__}: {exc}"))
            raise
        self._state = ReconnectState.CONNECTED
        await self._publisher.publish(ReconnectCompletedEvent(attempt))
