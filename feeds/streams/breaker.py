"""A circuit breaker for redials: stop knocking on a venue that keeps refusing.

CLOSED counts consecutive failures; at `failure_threshold` (10 by default) it
OPENs and no attempt is made for `cooldown_s`; then HALF_OPEN lets one attempt through:
success closes it, failure opens it again for another cool-down. Backoff alone would
still knock every `max_s` forever. The monotonic clock is injectable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum

from core.health import Status


class BreakerState(Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        *,
        failure_threshold: int = 10,
        cooldown_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1 or cooldown_s <= 0:
            raise ValueError("need failure_threshold >= 1 and cooldown_s > 0")
        self._threshold = failure_threshold
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self.last_error = ""
        self.times_opened = 0

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self._cooldown_s:
            self._state = BreakerState.HALF_OPEN
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def allow_attempt(self) -> bool:
        """True when an attempt may be made now (CLOSED, or the one HALF_OPEN probe)."""
        return self.state is not BreakerState.OPEN

    def retry_after_s(self) -> float:
        """Seconds until an OPEN breaker lets a probe through (0 when not OPEN)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._cooldown_s - (self._clock() - self._opened_at))

    def record_success(self) -> None:
        self._state = BreakerState.CLOSED
        self._failures = 0
        self.last_error = ""

    def record_failure(self, error: str = "") -> None:
        self._failures += 1
        self.last_error = error
        if self.state is BreakerState.HALF_OPEN or self._failures >= self._threshold:
            if self._state is not BreakerState.OPEN:
                self.times_opened += 1
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()

    def health(self) -> tuple[Status, str]:
        """BLOCKED while open or probing, DEGRADED while failing below the threshold."""
        state = self.state
        if state is BreakerState.CLOSED:
            if self._failures:
                return Status.DEGRADED, f"{self._failures} failed attempts: {self.last_error}"
            return Status.HEALTHY, ""
        return Status.BLOCKED, (
            f"circuit {state.value} after {self._failures} consecutive failures "
            f"(next attempt in {self.retry_after_s():.0f}s): {self.last_error}"
        )
