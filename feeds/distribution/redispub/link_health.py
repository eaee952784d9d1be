"""The publisher's own health: whether its round trips to Redis work, said truthfully.

Every write (market data, heartbeats, metadata, REST fallback values) and the EXISTS
sweep report here, and the heartbeat writes every interval even on a quiet market, so
the component follows Redis within one interval both ways:

- HEALTHY while the last round trip worked;
- BLOCKED while Redis cannot be reached (connection refused or timed out: nothing is
  published), with the error and how many round trips and messages failed;
- DEGRADED while Redis answers with an error (out of memory, read-only replica).

Failures are logged once in full, then once per interval with a count (core.log_throttle).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from core.health import HealthBoard, Status
from core.log_throttle import FailureLog

log = logging.getLogger("feeds.distribution.redispub")

HEALTH_COMPONENT = "redis-publisher"


def failure_status(error: BaseException) -> Status:
    """BLOCKED when Redis cannot be reached at all, DEGRADED when it answers with an error."""
    unreachable = isinstance(error, (RedisConnectionError, RedisTimeoutError, OSError, TimeoutError))
    return Status.BLOCKED if unreachable else Status.DEGRADED


class RedisLinkHealth:
    def __init__(
        self,
        board: HealthBoard,
        *,
        healthy_reason: str,
        component: str = HEALTH_COMPONENT,
        log_interval_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._board = board
        self.component = component
        self.healthy_reason = healthy_reason
        self.note = ""  # appended to the HEALTHY reason (expiry notifications missing)
        self.failed_round_trips = 0  # of the current outage
        self.lost_messages = 0  # of the current outage
        self.log = FailureLog(log, "redis-publisher: Redis", interval_s=log_interval_s, monotonic=monotonic)

    @property
    def failing(self) -> bool:
        return self.log.failing

    def reason(self) -> str:
        return f"{self.healthy_reason}; {self.note}" if self.note else self.healthy_reason

    def succeeded(self) -> None:
        if self.log.failing:
            self.log.succeeded(f"publishing again ({self.lost_messages} messages lost)")
            self.failed_round_trips = self.lost_messages = 0
            self._board.set(self.component, Status.HEALTHY, self.reason())
        elif self._board.get(self.component) is None:
            self._board.set(self.component, Status.HEALTHY, self.reason())

    def failed(self, error: RedisError | OSError, *, lost: int = 0) -> None:
        self.failed_round_trips += 1
        self.lost_messages += lost
        self.log.failed(error)
        status = failure_status(error)
        what = "Redis unreachable" if status is Status.BLOCKED else "Redis refusing writes"
        self._board.set(
            self.component,
            status,
            f"{what}: {error!r}"[:200]
            + f" ({self.failed_round_trips} round trips failed, {self.lost_messages} messages lost)",
        )

    def show_note(self, note: str) -> None:
        """Set the remark shown with HEALTHY (and show it now if healthy)."""
        self.note = note
        current = self._board.get(self.component)
        if current is not None and current.status is Status.HEALTHY:
            self._board.set(self.component, Status.HEALTHY, self.reason())
