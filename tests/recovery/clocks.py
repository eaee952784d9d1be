"""A controllable wall clock for token expiry tests."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta


class FakeClock:
    """now() only moves when a test calls advance(); sleepers wake when their deadline passes."""

    def __init__(self, start: datetime) -> None:
        assert start.tzinfo is not None
        self._now = start
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + timedelta(seconds=seconds), future))
        try:
            await future
        finally:
            self._sleepers = [(d, f) for d, f in self._sleepers if f is not future]

    @property
    def sleepers(self) -> int:
        return sum(1 for _, f in self._sleepers if not f.done())

    def advance(self, delta: timedelta) -> None:
        self._now += delta
        for deadline, future in self._sleepers:
            if deadline <= self._now and not future.done():
                future.set_result(None)

    def set(self, moment: datetime) -> None:
        self.advance(moment - self._now)
