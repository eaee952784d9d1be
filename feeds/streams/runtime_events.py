"""Events the stream runtime publishes about itself: heartbeat timeouts and reconnects.

Components publish; the lifecycle owner decides what an event means for health and logs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol, Union

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HeartbeatTimeoutEvent:
    elapsed_s: float
    timeout_s: float


@dataclass(frozen=True, slots=True)
class ReconnectStartedEvent:
    attempt: int


@dataclass(frozen=True, slots=True)
class ReconnectCompletedEvent:
    attempt: int


@dataclass(frozen=True, slots=True)
class ReconnectFailedEvent:
    attempt: int
    error: str


RuntimeEvent = Union[HeartbeatTimeoutEvent, ReconnectStartedEvent, ReconnectCompletedEvent, ReconnectFailedEvent]


class RuntimeEventPublisher(Protocol):
    async def publish(self, event: RuntimeEvent) -> None: ...


class LoggingEventPublisher:
    """Logs each runtime event under the stream's name."""

    def __init__(self, stream: str) -> None:
        self._stream = stream

    async def publish(self, event: RuntimeEvent) -> None:
        if isinstance(event, (HeartbeatTimeoutEvent, ReconnectFailedEvent)):
            log.warning("feed %s: %s", self._stream, event)
        else:
            log.info("feed %s: %s", self._stream, event)
