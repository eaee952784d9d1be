"""Wall-clock time for token expiry, injectable so tests can move it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Return the current time as an aware UTC datetime."""

    async def sleep(self, seconds: float) -> None:
        """Sleep for `seconds` of this clock's time."""


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# Module-level so views and services share one; tests swap it (see tests/recovery/clocks.py).
system_clock: Clock = SystemClock()


def current_clock() -> Clock:
    return system_clock


async def sleep_until(clock: Clock, deadline: datetime, *, max_step_s: float = 60.0) -> None:
    """Sleep until `deadline` on `clock`, in steps, so a wall-clock jump is noticed within a step."""
    while True:
        remaining = (deadline - clock.now()).total_seconds()
        if remaining <= 0:
            return
        await clock.sleep(min(remaining, max_step_s))
